/* flatbuf.h: the flatbuffer reader of both IPC parsers, format.c's on the
 * host and dpath.h's on the device (nvcc compiles it too), so that they
 * read a message's metadata alike.
 *
 * A table at `pos` starts with an int32 soffset to its vtable (vtable =
 * pos - soffset); the vtable is uint16 {vtable size, table size, field
 * offsets...}; a field offset of 0 means "absent, use the default". Offsets
 * to other objects (tables, vectors, strings) are uint32, relative to where
 * they are stored. Every access goes through `struct funnel__fb`, whose
 * sticky `bad` flag turns any out-of-bounds read into one error. */
#ifndef FUNNEL_FLATBUF_H
#define FUNNEL_FLATBUF_H

#include <stdbool.h>
#include <stdint.h>
#include <string.h>

#if defined(__CUDACC__)
#define FUNNEL_FB static __device__ __forceinline__
#else
#define FUNNEL_FB static inline
#endif

/* Little-endian loads at any alignment (partitions lie at any byte). */
FUNNEL_FB uint16_t funnel__ld16(const uint8_t *p) {
#if defined(__CUDA_ARCH__)
  return (uint16_t)(p[0] | p[1] << 8);
#else
  uint16_t v;
  memcpy(&v, p, 2);
  return v;
#endif
}
FUNNEL_FB uint32_t funnel__ld32(const uint8_t *p) {
#if defined(__CUDA_ARCH__)
  if (((uintptr_t)p & 3) == 0) return *(const uint32_t *)p;
  return (uint32_t)p[0] | (uint32_t)p[1] << 8 | (uint32_t)p[2] << 16 | (uint32_t)p[3] << 24;
#else
  uint32_t v;
  memcpy(&v, p, 4);
  return v;
#endif
}
FUNNEL_FB uint64_t funnel__ld64(const uint8_t *p) {
#if defined(__CUDA_ARCH__)
  if (((uintptr_t)p & 7) == 0) return *(const uint64_t *)p;
  return (uint64_t)funnel__ld32(p) | (uint64_t)funnel__ld32(p + 4) << 32;
#else
  uint64_t v;
  memcpy(&v, p, 8);
  return v;
#endif
}

/* A flatbuffer of n bytes at p. */
struct funnel__fb {
  const uint8_t *p;
  uint32_t n;
  int64_t at; /* where p[0] lies in the partition, for errors */
  bool bad;
};

struct funnel__fb_table {
  uint32_t pos;    /* table start */
  uint32_t vt;     /* vtable start */
  uint32_t vt_len;
  uint32_t t_len;
};

FUNNEL_FB bool funnel__fb_in(struct funnel__fb *r, uint64_t pos, uint64_t size) {
  if (pos > r->n || size > r->n - pos) r->bad = true;
  return !r->bad;
}

FUNNEL_FB struct funnel__fb_table funnel__fb_table_at(struct funnel__fb *r, uint32_t pos) {
  struct funnel__fb_table t = {0, 0, 0, 0};
  if (!funnel__fb_in(r, pos, 4)) return t;
  const int64_t vt = (int64_t)pos - (int32_t)funnel__ld32(r->p + pos);
  if (vt < 0) r->bad = true;
  if (r->bad || !funnel__fb_in(r, (uint64_t)vt, 4)) return t;
  const uint32_t vt_len = funnel__ld16(r->p + vt), t_len = funnel__ld16(r->p + vt + 2);
  /* Arrow Java reads vtable entries as int16: past 0x7FFF it would read
   * other bytes than we do */
  if (vt_len < 4 || (vt_len & 1) || vt_len > INT16_MAX || !funnel__fb_in(r, (uint64_t)vt, vt_len) ||
      t_len < 4 || t_len > INT16_MAX || !funnel__fb_in(r, pos, t_len)) {
    r->bad = true;
    return t;
  }
  t.pos = pos;
  t.vt = (uint32_t)vt;
  t.vt_len = vt_len;
  t.t_len = t_len;
  return t;
}

/* Absolute position of field `slot` of size `size`, or 0 when absent. */
FUNNEL_FB uint32_t funnel__fb_field(struct funnel__fb *r, struct funnel__fb_table t, int slot,
                                    uint32_t size) {
  if (r->bad) return 0;
  const uint32_t at = 4 + 2 * (uint32_t)slot;
  if (at + 2 > t.vt_len) return 0;
  const uint32_t off = funnel__ld16(r->p + t.vt + at);
  if (off == 0) return 0;
  if (off + size > t.t_len) {
    r->bad = true;
    return 0;
  }
  return t.pos + off;
}

FUNNEL_FB int64_t funnel__fb_i64(struct funnel__fb *r, struct funnel__fb_table t, int slot,
                                 int64_t dflt) {
  const uint32_t at = funnel__fb_field(r, t, slot, 8);
  return at ? (int64_t)funnel__ld64(r->p + at) : dflt;
}
FUNNEL_FB int32_t funnel__fb_i32(struct funnel__fb *r, struct funnel__fb_table t, int slot,
                                 int32_t dflt) {
  const uint32_t at = funnel__fb_field(r, t, slot, 4);
  return at ? (int32_t)funnel__ld32(r->p + at) : dflt;
}
FUNNEL_FB int16_t funnel__fb_i16(struct funnel__fb *r, struct funnel__fb_table t, int slot,
                                 int16_t dflt) {
  const uint32_t at = funnel__fb_field(r, t, slot, 2);
  return at ? (int16_t)funnel__ld16(r->p + at) : dflt;
}
FUNNEL_FB uint8_t funnel__fb_u8(struct funnel__fb *r, struct funnel__fb_table t, int slot,
                                uint8_t dflt) {
  const uint32_t at = funnel__fb_field(r, t, slot, 1);
  return at ? r->p[at] : dflt;
}

/* Follows the uoffset in field `slot`: absolute position of the object, or
 * 0 when the field is absent. */
FUNNEL_FB uint32_t funnel__fb_ref(struct funnel__fb *r, struct funnel__fb_table t, int slot) {
  const uint32_t at = funnel__fb_field(r, t, slot, 4);
  if (at == 0) return 0;
  const uint64_t target = (uint64_t)at + funnel__ld32(r->p + at);
  if (!funnel__fb_in(r, target, 4)) return 0;
  return (uint32_t)target;
}

/* A vector in field `slot`: position of its first element and its length,
 * checked to fit. Absent: count 0. */
FUNNEL_FB uint32_t funnel__fb_vector(struct funnel__fb *r, struct funnel__fb_table t, int slot,
                                     uint32_t elem, uint32_t *count) {
  *count = 0;
  const uint32_t v = funnel__fb_ref(r, t, slot);
  if (v == 0) return 0;
  const uint32_t n = funnel__ld32(r->p + v);
  if (!funnel__fb_in(r, (uint64_t)v + 4, (uint64_t)n * elem)) return 0;
  *count = n;
  return v + 4;
}

/* The table that element `i` of a vector of tables points to. */
FUNNEL_FB struct funnel__fb_table funnel__fb_vector_table(struct funnel__fb *r, uint32_t first,
                                                          uint32_t i) {
  const uint32_t at = first + 4 * i;
  const uint64_t target = (uint64_t)at + funnel__ld32(r->p + at);
  struct funnel__fb_table none = {0, 0, 0, 0};
  if (!funnel__fb_in(r, target, 4)) return none;
  return funnel__fb_table_at(r, (uint32_t)target);
}

#endif
