/* concat_cpu.c: the partition-map concat on the host, segment by segment.
 * This is the reference every device kernel is compared against. */
#include <string.h>

#include "backend.h"

#define PTR(addr) ((void *)(uintptr_t)(addr))

/* Writes `n` bits taken from `src` at bit `sbit` into `dst` at bit `dbit`,
 * changing no other bit of dst (neighbouring segments share bytes). */
static void copy_bits(uint8_t *dst, uint64_t dbit, const uint8_t *src, uint64_t sbit,
                      uint64_t n) {
  if ((dbit & 7) == 0 && (sbit & 7) == 0 && n >= 8) {
    uint64_t whole = n / 8;
    memcpy(dst + dbit / 8, src + sbit / 8, whole);
    dbit += whole * 8;
    sbit += whole * 8;
    n -= whole * 8;
  }
  while (n > 0) {
    unsigned doff = (unsigned)(dbit & 7), soff = (unsigned)(sbit & 7);
    unsigned take = 8 - doff;
    if (take > n) take = (unsigned)n;
    unsigned v = src[sbit >> 3] >> soff;
    if (soff + take > 8) v |= (unsigned)src[(sbit >> 3) + 1] << (8 - soff);
    uint8_t mask = (uint8_t)(((1u << take) - 1) << doff);
    dst[dbit >> 3] = (uint8_t)((dst[dbit >> 3] & ~mask) | ((v << doff) & mask));
    dbit += take;
    sbit += take;
    n -= take;
  }
}

static void set_bits(uint8_t *dst, uint64_t dbit, uint64_t n, int value) {
  while (n > 0 && (dbit & 7) != 0) {
    uint8_t mask = (uint8_t)(1u << (dbit & 7));
    dst[dbit >> 3] = value ? (uint8_t)(dst[dbit >> 3] | mask) : (uint8_t)(dst[dbit >> 3] & ~mask);
    dbit++;
    n--;
  }
  if (n >= 8) {
    memset(dst + (dbit >> 3), value ? 0xFF : 0, n / 8);
    dbit += n / 8 * 8;
    n %= 8;
  }
  while (n > 0) {
    uint8_t mask = (uint8_t)(1u << (dbit & 7));
    dst[dbit >> 3] = value ? (uint8_t)(dst[dbit >> 3] | mask) : (uint8_t)(dst[dbit >> 3] & ~mask);
    dbit++;
    n--;
  }
}

void funnel__concat_segments(const struct funnel__segment *segments, int64_t count) {
  for (int64_t i = 0; i < count; i++) {
    const struct funnel__segment *s = &segments[i];
    switch (s->kind) {
      case FUNNEL_SEG_BYTES:
        memcpy(PTR(s->dst), PTR(s->src), s->count);
        break;
      case FUNNEL_SEG_BITS:
        copy_bits(PTR(s->dst), s->dst_bit, PTR(s->src), s->src_bit, s->count);
        break;
      case FUNNEL_SEG_ONES:
        set_bits(PTR(s->dst), s->dst_bit, s->count, 1);
        break;
      case FUNNEL_SEG_ZEROS:
        set_bits(PTR(s->dst), s->dst_bit, s->count, 0);
        break;
      case FUNNEL_SEG_OFFSETS32: {
        const uint8_t *in = PTR(s->src);
        uint8_t *out = PTR(s->dst);
        for (uint64_t k = 0; k < s->count; k++) {
          uint32_t v;
          memcpy(&v, in + 4 * k, 4);
          v += (uint32_t)s->value;
          memcpy(out + 4 * k, &v, 4);
        }
        break;
      }
      case FUNNEL_SEG_OFFSETS64: {
        const uint8_t *in = PTR(s->src);
        uint8_t *out = PTR(s->dst);
        /* unsigned: offsets not yet checked (the read checks them while
         * the concat runs, and drops the result of a bad one) may wrap */
        for (uint64_t k = 0; k < s->count; k++) {
          uint64_t v;
          memcpy(&v, in + 8 * k, 8);
          v += (uint64_t)s->value;
          memcpy(out + 8 * k, &v, 8);
        }
        break;
      }
      case FUNNEL_SEG_PUT32: {
        int32_t v = (int32_t)s->value;
        memcpy(PTR(s->dst), &v, 4);
        break;
      }
      case FUNNEL_SEG_PUT64:
        memcpy(PTR(s->dst), &s->value, 8);
        break;
      default:
        break; /* the plan emits only the kinds above */
    }
  }
}
