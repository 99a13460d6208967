/* zstddec.h: the ZSTD frame decoder the device runs (concat.cu's
 * funnel_zstd_decode: a warp a buffer) and the cpu backend runs alike
 * (one thread taking every lane's share), for the buffers a read leaves
 * to the device to decode (parse.c's dd_layout): one source, so that the
 * tests here run the device's code. Written from the format's
 * description (RFC 8878, Zstandard Compression and the
 * 'application/zstd' Media Type).
 *
 * The warp runs the format's sequential parts (headers, the tables'
 * descriptions, the sequences' bitstream) in every lane alike: the lanes
 * compute the same values from the same loads, so the warp goes as one
 * thread would, with no broadcasts. The lanes split what is parallel:
 * building the tables (the FSE tables' spread and next states, the
 * Huffman codes' ranks and entries: votes and prefix sums over the lanes,
 * no lane walking a table alone), a block's four Huffman streams (a lane
 * each), and each sequence's literal and match copies (a byte a lane).
 *
 * It decodes what libzstd writes: frames one after another (skippable
 * frames skipped), raw, RLE and compressed blocks, every literals and
 * sequences mode (predefined, RLE, FSE-compressed and repeated tables;
 * raw, RLE, Huffman-compressed and treeless literals, one or four
 * streams), with or without content size and content checksum
 * (XXH64, verified). It checks every read against the buffer's bounds,
 * every write against the bytes the buffer declared, every match offset
 * against the frame's bytes decoded so far, and the tables' descriptions
 * as libzstd does; a frame with a dictionary id is refused. Any failure is
 * a status: the host then decodes that buffer itself (libzstd), which
 * either finds the error and names it, or decodes what this decoder
 * refused.
 *
 * A compressed block's Huffman literals are decoded into the end of the
 * buffer's output, past where the block's output can reach while they are
 * read: a block's output up to any sequence is never past the literals it
 * has still to read (each byte of output is a literal read or a match),
 * so the copies never overwrite a literal before it is read. */
#ifndef FUNNEL_ZSTDDEC_H
#define FUNNEL_ZSTDDEC_H

#include <stdbool.h>
#include <stdint.h>

#include "lz4dec.h" /* the job (funnel__lz4_job) and the status codes */

/* The lanes are a warp's 32 on the device and one on the host, where the
 * warp's votes and shuffles are those of a warp of one lane. */
#if defined(__CUDACC__)
#define FUNNEL_ZS static __device__ __forceinline__
#define FUNNEL_ZS_SYNC() __syncwarp()
#define FUNNEL_ZS_ANY(c) __any_sync(0xFFFFFFFFu, (c))
#define FUNNEL_ZS_BALLOT(c) __ballot_sync(0xFFFFFFFFu, (c))
#define FUNNEL_ZS_MATCH(v) __match_any_sync(0xFFFFFFFFu, (v)) /* the lanes of the same v */
#define FUNNEL_ZS_FROM(v, q) __shfl_sync(0xFFFFFFFFu, (v), (q)) /* lane q's v */
#define FUNNEL_ZS_POPC(v) __popc(v)
#define FUNNEL_ZS_FFS(v) __ffs(v)
#define FUNNEL_ZS_LD(p) ((unsigned)__ldg(p))
/* the format's tables: in constant memory, which serves a warp whose lanes
 * read the same entry at once */
#define FUNNEL_ZS_TABLE static __constant__ const
#else
#include <string.h>
#define FUNNEL_ZS static inline
#define FUNNEL_ZS_SYNC() ((void)0)
#define FUNNEL_ZS_ANY(c) (c)
#define FUNNEL_ZS_BALLOT(c) ((c) ? 1u : 0u)
#define FUNNEL_ZS_MATCH(v) ((void)(v), 1u)
#define FUNNEL_ZS_FROM(v, q) ((void)(q), (v))
#define FUNNEL_ZS_POPC(v) ((unsigned)__builtin_popcount(v))
#define FUNNEL_ZS_FFS(v) __builtin_ffs((int)(v))
#define FUNNEL_ZS_LD(p) ((unsigned)*(p))
#define FUNNEL_ZS_TABLE static const
#endif

/* Shared memory every lane reads is written by lane 0 alone (the others
 * compute the same value), then read after a sync. */
#define FUNNEL_ZS_SET(lvalue, value) \
  do {                               \
    if (lane == 0) (lvalue) = (value); \
  } while (0)

/* A block decodes to at most 128 KiB (RFC 8878, Block_Maximum_Size). */
#define FUNNEL_ZS_BLOCK_MAX (128u << 10)
#define FUNNEL_ZS_HUF_LOG 11 /* a Huffman code's longest */
#define FUNNEL_ZS_LL_LOG 9   /* the sequences' tables' largest accuracy logs */
#define FUNNEL_ZS_ML_LOG 9
#define FUNNEL_ZS_OF_LOG 8
#define FUNNEL_ZS_WEIGHT_LOG 6 /* the Huffman weights' table */

/* A block's sequences are decoded this many at a time, then the batch's
 * bytes written by every lane at once. */
#define FUNNEL_ZS_BATCH 32
/* A batch of at most this many bytes of output maps each byte to its
 * sequence (funnel__zs_batch_mapped); a longer one searches for them. */
#define FUNNEL_ZS_MAP 2048

/* An FSE state's entry: its symbol, the bits the next state reads, and
 * the next state's base (below 2^9) in the low 9 bits of `base`, where a
 * sequences table keeps its symbol's extra bits (up to 31) above them.
 * The chain of states (funnel__zs_chain) loads an entry as one word. */
struct __attribute__((aligned(4))) funnel__zs_fse {
  uint8_t symbol, bits;
  uint16_t base;
};

/* A warp's tables (the host's: its stack), kept from block to block of a
 * frame for the modes that repeat them. */
struct funnel__zstd_scratch {
  uint16_t huf[1 << FUNNEL_ZS_HUF_LOG]; /* the symbol << 8 | its code's bits */
  struct funnel__zs_fse ll[1 << FUNNEL_ZS_LL_LOG], ml[1 << FUNNEL_ZS_ML_LOG],
      of[1 << FUNNEL_ZS_OF_LOG];
  struct funnel__zs_fse weights[1 << FUNNEL_ZS_WEIGHT_LOG];
  /* a batch of sequences (funnel__zs_batch), relative to its output's
   * and its literals' first bytes: each one's first byte of output (and
   * the batch's end), its match's first, its offset; its literals' first
   * and its match's first among the batch's (and the ends) */
  uint32_t lo[FUNNEL_ZS_BATCH + 1], m[FUNNEL_ZS_BATCH], off[FUNNEL_ZS_BATCH],
      lpre[FUNNEL_ZS_BATCH + 1], mpre[FUNNEL_ZS_BATCH + 1];
  /* a batch's sequences as they are decoded (funnel__zs_chain, then
   * funnel__zs_values): where each one's extra bits begin and its codes,
   * then its offset's value, its literals' and its match's lengths */
  int32_t sbit[FUNNEL_ZS_BATCH];
  uint32_t scode[FUNNEL_ZS_BATCH], sov[FUNNEL_ZS_BATCH], sll[FUNNEL_ZS_BATCH],
      sml[FUNNEL_ZS_BATCH];
  union { /* the tables' building, then the block's sequences */
    struct {
      uint8_t w[256];  /* a Huffman description's weights */
      int16_t norm[256]; /* a table description's counts */
      uint16_t nexts[1 << FUNNEL_ZS_LL_LOG]; /* a table's states' next states, as it is built */
    };
    uint8_t own[FUNNEL_ZS_MAP]; /* a batch's output bytes' sequences (its first MAP bytes) */
  };
  int huf_log;     /* the Huffman table's bits; 0: none yet in the frame */
  int ll_log, ml_log, of_log; /* the tables' accuracy logs; -1: none yet */
};

/* ------------------------------------------------------------- bits */

/* The bytes a decoder's loads may touch: its job's source, [lo, hi). A
 * stream inside it is read by whole aligned words where those lie inside
 * it too, its own bounds applied after. */
struct funnel__zs_span {
  const uint8_t *lo, *hi;
};

/* A backward bitstream (RFC 8878, 4.1): the bits of bytes [0, n) are read
 * from the last byte's highest bit below its end mark down to bit 0 of
 * byte 0, a field's first bit read its highest. `bit` counts the bits
 * still unread: bits [0, bit) in little-endian order. `c` holds bytes
 * [pos, pos + 8) (those before 0 read as zeros, as libzstd reads past the
 * start). Reading past the start leaves `bit` below 0. A stream lies in a
 * block (at most 128 KiB, or the init refuses it), so 32 bits count it. */
struct funnel__zs_bits {
  const uint8_t *p;
  struct funnel__zs_span span;
  int32_t n, bit, pos;
  int32_t fast_lo, fast_hi; /* the pos whose 8 bytes need no bounds (the device's) */
  uint64_t c;
};

#if defined(__CUDACC__)
/* The 8 bytes at address a, from the three aligned words around them. */
FUNNEL_ZS uint64_t funnel__zs_words(uintptr_t a) {
  const uint32_t *w = (const uint32_t *)(a & ~(uintptr_t)3);
  const unsigned sh = (unsigned)(a & 3) * 8;
  const uint32_t w0 = __ldg(w), w1 = __ldg(w + 1), w2 = __ldg(w + 2);
  return (uint64_t)__funnelshift_r(w1, w2, sh) << 32 | __funnelshift_r(w0, w1, sh);
}
#endif

/* Bytes [at, at + 8) of the n at p, those outside [0, n) as zeros; at >= -8. */
FUNNEL_ZS uint64_t funnel__zs_ld8(const uint8_t *p, int64_t at, int64_t n,
                                  struct funnel__zs_span span) {
#if defined(__CUDACC__)
  /* the three aligned words around them, when those lie in the span */
  const uintptr_t a = (uintptr_t)p + (uintptr_t)(intptr_t)at;
  const uint32_t *w = (const uint32_t *)(a & ~(uintptr_t)3);
  if ((const uint8_t *)w >= span.lo && (const uint8_t *)(w + 3) <= span.hi) {
    uint64_t v = funnel__zs_words(a);
    if (at < 0) v &= at <= -8 ? 0 : ~(uint64_t)0 << (8 * -at);
    if (at > n - 8) v &= at >= n ? 0 : ((uint64_t)1 << (8 * (n - at))) - 1;
    return v;
  }
#else
  (void)span;
#if defined(__BYTE_ORDER__) && __BYTE_ORDER__ == __ORDER_LITTLE_ENDIAN__
  if (at >= 0 && at <= n - 8) {
    uint64_t v;
    memcpy(&v, p + at, 8);
    return v;
  }
#endif
#endif
  uint64_t v = 0;
  for (int k = 7; k >= 0; k--) {
    const int64_t i = at + k;
    v = v << 8 | (i >= 0 && i < n ? FUNNEL_ZS_LD(p + i) : 0u);
  }
  return v;
}

FUNNEL_ZS int funnel__zs_high(uint32_t v) { /* v > 0 */
#if defined(__CUDACC__)
  return 31 - __clz(v);
#else
  return 31 - __builtin_clz(v);
#endif
}

/* 0, or -1 when the stream is empty, longer than a block can hold, or its
 * last byte holds no end mark. */
FUNNEL_ZS int funnel__zs_bits_init(struct funnel__zs_bits *b, const uint8_t *p, int64_t n,
                                   struct funnel__zs_span span) {
  if (n < 1 || n > (int64_t)FUNNEL_ZS_BLOCK_MAX) return -1;
  const unsigned last = FUNNEL_ZS_LD(p + n - 1);
  if (last == 0) return -1;
  b->p = p;
  b->span = span;
  b->n = (int32_t)n;
#if defined(__CUDACC__)
  /* funnel__zs_ld8's three aligned words lie in the span, and its bytes in
   * [0, n), for pos in [fast_lo, fast_hi] */
  const uintptr_t a = (uintptr_t)p, lo = ((uintptr_t)span.lo + 3) & ~(uintptr_t)3,
                  hi = (uintptr_t)span.hi;
  const int64_t first = lo > a ? (int64_t)(lo - a) : 0;
  const int64_t last_word = hi >= a + 12 ? (int64_t)(((hi - 12) & ~(uintptr_t)3) - a) + 3 : -1;
  b->fast_lo = (int32_t)first;
  b->fast_hi = (int32_t)(last_word < n - 8 ? last_word : n - 8);
#else
  b->fast_lo = 1;
  b->fast_hi = 0;
#endif
  b->bit = 8 * (b->n - 1) + funnel__zs_high(last);
  b->pos = b->n - 8;
  b->c = funnel__zs_ld8(p, b->pos, n, span);
  return 0;
}

/* The readers: funnel__zs_seek puts the reader at `bit` with the next 56
 * bits readable, funnel__zs_fill makes the next 56 bits readable (while
 * bit >= 0), then funnel__zs_look and funnel__zs_take read up to 56 of
 * them in all, k <= 32 each, without a bounds check apiece. */
FUNNEL_ZS void funnel__zs_seek(struct funnel__zs_bits *b, int32_t bit) {
  int32_t at = (bit - 56) >> 3; /* (rounded down: the shift is arithmetic) */
  if (at < -8) at = -8;
  b->bit = bit;
  b->pos = at;
#if defined(__CUDACC__)
  if (at >= b->fast_lo && at <= b->fast_hi) { /* funnel__zs_ld8 without its checks */
    b->c = funnel__zs_words((uintptr_t)b->p + (uintptr_t)at);
    return;
  }
#endif
  b->c = funnel__zs_ld8(b->p, at, b->n, b->span);
}

FUNNEL_ZS void funnel__zs_fill(struct funnel__zs_bits *b) {
  if (b->bit - 56 >= 8 * b->pos) return;
  funnel__zs_seek(b, b->bit);
}

FUNNEL_ZS uint32_t funnel__zs_look(const struct funnel__zs_bits *b, int k) {
  return (uint32_t)((b->c >> (b->bit - k - 8 * b->pos)) & (((uint64_t)1 << k) - 1));
}

FUNNEL_ZS uint32_t funnel__zs_take(struct funnel__zs_bits *b, int k) {
  b->bit -= k;
  return (uint32_t)((b->c >> (b->bit - 8 * b->pos)) & (((uint64_t)1 << k) - 1));
}

/* ------------------------------------------------------------ tables */

/* The 32 bits of the forward stream z (n bytes) from bit `bit` on, zeros
 * past its end. */
FUNNEL_ZS uint32_t funnel__zs_fwd(const uint8_t *z, int64_t n, int64_t bit) {
  uint64_t w = 0;
  for (int k = 4; k >= 0; k--) {
    const int64_t i = bit / 8 + k;
    w = w << 8 | (i < n ? FUNNEL_ZS_LD(z + i) : 0u);
  }
  return (uint32_t)(w >> (bit % 8));
}

/* A table description (RFC 8878, 4.1.1) at z (n bytes): its counts into
 * norm (symbols up to *max_symbol, which it lowers to the last one
 * described) and its accuracy log into *log. Returns the bytes it took, or
 * -1 when corrupt (more than `max_log`, counts that do not sum up, a
 * symbol past *max_symbol, past the end), as libzstd judges it. */
FUNNEL_ZS int64_t funnel__zs_counts(const uint8_t *z, int64_t n, int max_log, int *max_symbol,
                                    int *log, int16_t *norm, unsigned lane) {
  if (n < 1) return -1;
  const int al = (int)(FUNNEL_ZS_LD(z) & 15) + 5;
  if (al > max_log) return -1;
  int64_t bit = 4;
  int remaining = (1 << al) + 1, threshold = 1 << al, nbits = al + 1, s = 0;
  bool previous0 = false;
  while (remaining > 1 && s <= *max_symbol) {
    if (previous0) { /* repeat flags, 2 bits each: 3 goes on */
      int zeros = 0;
      unsigned f;
      do {
        if (bit > 8 * n) return -1;
        f = funnel__zs_fwd(z, n, bit) & 3;
        bit += 2;
        zeros += (int)f;
      } while (f == 3);
      if (s + zeros > *max_symbol) return -1; /* a count must follow them */
      for (int k = 0; k < zeros; k++, s++) FUNNEL_ZS_SET(norm[s], 0);
    }
    const uint32_t w = funnel__zs_fwd(z, n, bit);
    const int max = 2 * threshold - 1 - remaining;
    int count;
    if ((int)(w & (uint32_t)(threshold - 1)) < max) {
      count = (int)(w & (uint32_t)(threshold - 1));
      bit += nbits - 1;
    } else {
      count = (int)(w & (uint32_t)(2 * threshold - 1));
      if (count >= threshold) count -= max;
      bit += nbits;
    }
    count--;
    remaining -= count < 0 ? -count : count;
    if (remaining < 1) return -1;
    FUNNEL_ZS_SET(norm[s], (int16_t)count);
    s++;
    previous0 = count == 0;
    while (remaining < threshold) {
      nbits--;
      threshold >>= 1;
    }
  }
  if (remaining != 1 || bit > 8 * n) return -1;
  *max_symbol = s - 1;
  *log = al;
  return (bit + 7) / 8;
}

/* The warp's inclusive prefix sum of v over its lanes, and lane 31's. */
FUNNEL_ZS uint32_t funnel__zs_scan(uint32_t v, unsigned lane) {
#if defined(__CUDACC__)
  for (unsigned o = 1; o < 32; o <<= 1) {
    const uint32_t y = __shfl_up_sync(0xFFFFFFFFu, v, o);
    if (lane >= o) v += y;
  }
#else
  (void)lane;
#endif
  return v;
}

FUNNEL_ZS uint32_t funnel__zs_sum(uint32_t v) {
#if defined(__CUDACC__)
  for (int o = 16; o > 0; o >>= 1) v += __shfl_xor_sync(0xFFFFFFFFu, v, o);
#endif
  return v;
}

/* The last q in [0, n) with a[q] <= v (a[0] <= v; a non-decreasing). */
FUNNEL_ZS int funnel__zs_find16(const uint16_t *a, int n, uint32_t v) {
  int lo = 0, hi = n - 1;
  while (lo < hi) {
    const int mid = (lo + hi + 1) >> 1;
    if (a[mid] <= v) lo = mid;
    else hi = mid - 1;
  }
  return lo;
}

/* A live lane's rank among the live lanes of the same key before it,
 * added to count[key], which counts those so far: the count before and
 * that rank. Then count[key] counts them all (its group's last lane
 * writes it, after every lane has read it). */
FUNNEL_ZS int funnel__zs_rank(int16_t *count, unsigned key, bool live, unsigned lane) {
  const unsigned same = FUNNEL_ZS_MATCH(live ? key : 0x10000u + lane), below = (1u << lane) - 1;
  const int from = live ? count[key] : 0;
  FUNNEL_ZS_SYNC();
  if (live && (same >> lane) == 1u) count[key] = (int16_t)(from + (int)FUNNEL_ZS_POPC(same));
  FUNNEL_ZS_SYNC();
  return from + (int)FUNNEL_ZS_POPC(same & below);
}

/* The literals lengths' and match lengths' codes' bases and extra bits
 * (RFC 8878, 3.1.1.3.2.1.1), computed rather than looked up: a warp's
 * lanes hold different codes, and a table in constant memory answers
 * different addresses one at a time. Literals lengths: codes 0 to 15 are
 * their lengths; 16 to 24 take 1, 1, 1, 1, 2, 2, 3, 3, 4 extra bits from
 * bases 16 + (0, 2, 4, 6, 8, 12, 16, 24, 32), 6 bits each in LL_UPS; 25 to
 * 35 take code - 19 bits from 2^(code - 19). Match lengths: codes 0 to 31
 * are their lengths less 3; 32 to 41 take 1, 1, 1, 1, 2, 2, 3, 3, 4, 4
 * bits from 35 + 2 * (0, 1, 2, 3, 4, 6, 8, 12, 16, 24), 5 bits each in
 * ML_UPS; 42 takes 5 from 99; 43 to 52 take code - 36 from 2^(code - 36)
 * + 3. (Checked against the RFC's tables for every code.) */
#define FUNNEL_ZS_LL_UPS                                                                      \
  ((uint64_t)2 << 6 | (uint64_t)4 << 12 | (uint64_t)6 << 18 | (uint64_t)8 << 24 |             \
   (uint64_t)12 << 30 | (uint64_t)16 << 36 | (uint64_t)24 << 42 | (uint64_t)32 << 48)
#define FUNNEL_ZS_ML_UPS                                                                      \
  ((uint64_t)1 << 5 | (uint64_t)2 << 10 | (uint64_t)3 << 15 | (uint64_t)4 << 20 |             \
   (uint64_t)6 << 25 | (uint64_t)8 << 30 | (uint64_t)12 << 35 | (uint64_t)16 << 40 |          \
   (uint64_t)24 << 45)

FUNNEL_ZS int funnel__zs_ll_bits(unsigned code) {
  return code < 16 ? 0 : code < 20 ? 1 : code < 25 ? (int)(code - 16) >> 1 : (int)code - 19;
}
FUNNEL_ZS uint32_t funnel__zs_ll_base(unsigned code) {
  return code < 16   ? code
         : code < 25 ? 16 + (uint32_t)((FUNNEL_ZS_LL_UPS >> (6 * (code - 16))) & 63)
                     : 1u << (code - 19);
}
FUNNEL_ZS int funnel__zs_ml_bits(unsigned code) {
  return code < 32 ? 0 : code < 36 ? 1 : code < 43 ? (int)(code - 32) >> 1 : (int)code - 36;
}
FUNNEL_ZS uint32_t funnel__zs_ml_base(unsigned code) {
  return code < 32    ? code + 3
         : code < 42  ? 35 + 2 * (uint32_t)((FUNNEL_ZS_ML_UPS >> (5 * (code - 32))) & 31)
         : code == 42 ? 99
                      : (1u << (code - 36)) + 3;
}

/* The extra bits of sequences table `which`'s symbol s (0 literals
 * lengths, 1 offsets, 2 match lengths; -1 another table: none). */
FUNNEL_ZS unsigned funnel__zs_extra(int which, unsigned s) {
  return which == 0 ? (unsigned)funnel__zs_ll_bits(s)
         : which == 1 ? s
         : which == 2 ? (unsigned)funnel__zs_ml_bits(s)
                      : 0u;
}

/* The decoding table of counts norm[0 .. max_symbol] at accuracy log al
 * (RFC 8878, 4.1.1) of table `which` (funnel__zs_extra's), which uses
 * norm up: 0, or -1 when the counts do not fill the table. The lanes
 * share every step, none walking the table alone. */
FUNNEL_ZS int funnel__zs_fse_build(struct funnel__zs_fse *t, uint16_t *nexts, int16_t *norm,
                                   int max_symbol, int al, int which, unsigned lane,
                                   unsigned lanes) {
  const uint32_t size = 1u << al, mask = size - 1, below = (1u << lane) - 1;
  /* each symbol's first occurrence among the spread ones (the positive
   * counts before it, into nexts[s]), and the symbols of count -1 ("less
   * than 1") at the end of the table, the first one last */
  uint32_t spread = 0, low = 0;
  for (int s0 = 0; s0 <= max_symbol; s0 += (int)lanes) {
    const int s = s0 + (int)lane;
    const int c = s <= max_symbol ? norm[s] : 0;
    const uint32_t mine = c > 0 ? (uint32_t)c : 0u, upto = funnel__zs_scan(mine, lane);
    const unsigned lows = FUNNEL_ZS_BALLOT(c == -1);
    if (s <= max_symbol) {
      nexts[s] = (uint16_t)(spread + upto - mine);
      const uint32_t r = low + FUNNEL_ZS_POPC(lows & below);
      if (c == -1 && r < size) t[size - 1 - r].symbol = (uint8_t)s;
    }
    spread += FUNNEL_ZS_FROM(upto, lanes - 1);
    low += FUNNEL_ZS_POPC(lows);
  }
  if (spread + low != size) return -1;
  FUNNEL_ZS_SYNC();
  /* the spread: the occurrences in symbol order take the positions the
   * step visits from 0 (j * step, modulo the size: every position once,
   * the step being odd), the last `low` ones (the count -1 symbols')
   * skipped; when every symbol is a count -1 one there is none to take */
  const uint32_t step = (size >> 1) + (size >> 3) + 3;
  uint32_t placed = 0;
  for (uint32_t j0 = 0; j0 < size; j0 += lanes) {
    const uint32_t j = j0 + lane, at = (j * step) & mask;
    const bool takes = j < size && at + low < size;
    const unsigned takers = FUNNEL_ZS_BALLOT(takes);
    if (takes)
      t[at].symbol = (uint8_t)funnel__zs_find16(nexts, max_symbol + 1,
                                                placed + FUNNEL_ZS_POPC(takers & below));
    placed += FUNNEL_ZS_POPC(takers);
  }
  for (int s = (int)lane; s <= max_symbol; s += (int)lanes)
    if (norm[s] == -1) norm[s] = 1;
  FUNNEL_ZS_SYNC();
  /* a symbol's states in order take the next states from its count on:
   * a state's is its symbol's count so far (norm[s], counting up) and its
   * rank among the lanes of the same symbol */
  for (uint32_t u0 = 0; u0 < size; u0 += lanes) {
    const uint32_t u = u0 + lane;
    const int next = funnel__zs_rank(norm, u < size ? t[u].symbol : 0u, u < size, lane);
    if (u < size) nexts[u] = (uint16_t)next;
  }
  for (uint32_t u = lane; u < size; u += lanes) {
    const uint32_t next = nexts[u];
    const int bits = al - funnel__zs_high(next);
    t[u].bits = (uint8_t)bits;
    t[u].base = (uint16_t)(((next << bits) - size) | funnel__zs_extra(which, t[u].symbol) << 9);
  }
  FUNNEL_ZS_SYNC();
  return 0;
}

/* An RLE mode's table: every state the one symbol, reading nothing. */
FUNNEL_ZS void funnel__zs_fse_rle(struct funnel__zs_fse *t, unsigned symbol, int which,
                                  unsigned lane) {
  FUNNEL_ZS_SET(t[0].symbol, (uint8_t)symbol);
  FUNNEL_ZS_SET(t[0].bits, 0);
  FUNNEL_ZS_SET(t[0].base, (uint16_t)(funnel__zs_extra(which, symbol) << 9));
  FUNNEL_ZS_SYNC();
}

/* The predefined distributions (RFC 8878, 3.1.1.3.2.2): literals lengths
 * (36 symbols, accuracy 6), match lengths (53, 6), offsets (29, 5). */
FUNNEL_ZS_TABLE int8_t funnel__zs_default_ll[36] = {
    4, 3, 2, 2, 2, 2, 2, 2, 2, 2, 2, 2, 2, 1, 1, 1, 2, 2,
    2, 2, 2, 2, 2, 2, 2, 3, 2, 1, 1, 1, 1, 1, -1, -1, -1, -1};
FUNNEL_ZS_TABLE int8_t funnel__zs_default_ml[53] = {
    1, 4, 3, 2, 2, 2, 2, 2, 2, 1, 1, 1, 1, 1, 1, 1, 1, 1, 1, 1, 1, 1, 1, 1, 1, 1, 1,
    1, 1, 1, 1, 1, 1, 1, 1, 1, 1, 1, 1, 1, 1, 1, 1, 1, 1, 1, -1, -1, -1, -1, -1, -1, -1};
FUNNEL_ZS_TABLE int8_t funnel__zs_default_of[29] = {
    1, 1, 1, 1, 1, 1, 2, 2, 2, 1, 1, 1, 1, 1, 1, 1, 1, 1, 1, 1, 1, 1, 1, 1, -1, -1, -1, -1, -1};

FUNNEL_ZS int16_t funnel__zs_default(int which, int s) {
  return which == 0   ? funnel__zs_default_ll[s]
         : which == 1 ? funnel__zs_default_of[s]
                      : funnel__zs_default_ml[s];
}

/* A sequences table (which: 0 literals lengths, 1 offsets, 2 match
 * lengths) by its mode, from z (n bytes): the bytes it took, or -1. */
FUNNEL_ZS int64_t funnel__zs_seq_table(struct funnel__zstd_scratch *sc, int which, unsigned mode,
                                       const uint8_t *z, int64_t n, unsigned lane,
                                       unsigned lanes) {
  FUNNEL_ZS_SYNC(); /* the last block's readers of the tables */
  struct funnel__zs_fse *t = which == 0 ? sc->ll : which == 1 ? sc->of : sc->ml;
  int *log = which == 0 ? &sc->ll_log : which == 1 ? &sc->of_log : &sc->ml_log;
  const int max_symbol = which == 0 ? 35 : which == 1 ? 31 : 52;
  const int max_log = which == 0   ? FUNNEL_ZS_LL_LOG
                      : which == 1 ? FUNNEL_ZS_OF_LOG
                                   : FUNNEL_ZS_ML_LOG;
  if (mode == 0) { /* predefined */
    const int last = which == 0 ? 35 : which == 1 ? 28 : 52;
    for (int s = (int)lane; s <= last; s += (int)lanes) sc->norm[s] = funnel__zs_default(which, s);
    FUNNEL_ZS_SYNC();
    const int al = which == 1 ? 5 : 6;
    FUNNEL_ZS_SET(*log, al);
    return funnel__zs_fse_build(t, sc->nexts, sc->norm, last, al, which, lane, lanes) == 0 ? 0
                                                                                        : -1;
  }
  if (mode == 1) { /* RLE: one byte, the symbol */
    if (n < 1) return -1;
    const unsigned s = FUNNEL_ZS_LD(z);
    if ((int)s > max_symbol) return -1;
    funnel__zs_fse_rle(t, s, which, lane);
    FUNNEL_ZS_SET(*log, 0);
    return 1;
  }
  if (mode == 3) return *log < 0 ? -1 : 0; /* repeat: the last one */
  int last = max_symbol, al = 0;
  const int64_t took = funnel__zs_counts(z, n, max_log, &last, &al, sc->norm, lane);
  FUNNEL_ZS_SYNC();
  if (took < 0 ||
      funnel__zs_fse_build(t, sc->nexts, sc->norm, last, al, which, lane, lanes) != 0)
    return -1;
  FUNNEL_ZS_SET(*log, al);
  return took;
}

/* ----------------------------------------------------------- Huffman */

/* A Huffman tree description (RFC 8878, 4.2.1) at z (n bytes) into
 * sc->huf: the bytes it took, or -1. */
FUNNEL_ZS int64_t funnel__zs_huf_table(struct funnel__zstd_scratch *sc, const uint8_t *z,
                                       int64_t n, struct funnel__zs_span span, unsigned lane,
                                       unsigned lanes) {
  FUNNEL_ZS_SYNC(); /* the last block's readers of the table */
  if (n < 1) return -1;
  const unsigned h = FUNNEL_ZS_LD(z);
  int k = 0; /* the weights described (the last is implied) */
  int64_t took;
  if (h >= 128) { /* direct: 4 bits a weight */
    k = (int)h - 127;
    took = 1 + (k + 1) / 2;
    if (took > n) return -1;
    for (int i = 0; i < k; i++) {
      const unsigned byte = FUNNEL_ZS_LD(z + 1 + i / 2);
      FUNNEL_ZS_SET(sc->w[i], (uint8_t)(i % 2 == 0 ? byte >> 4 : byte & 15));
    }
  } else { /* FSE-compressed, two states in turn */
    took = 1 + (int64_t)h;
    if (h == 0 || took > n) return -1;
    int last = 255, al = 0;
    const int64_t d =
        funnel__zs_counts(z + 1, h, FUNNEL_ZS_WEIGHT_LOG, &last, &al, sc->norm, lane);
    FUNNEL_ZS_SYNC();
    if (d < 0 ||
        funnel__zs_fse_build(sc->weights, sc->nexts, sc->norm, last, al, -1, lane, lanes) != 0)
      return -1;
    struct funnel__zs_bits b;
    if (funnel__zs_bits_init(&b, z + 1 + d, (int64_t)h - d, span) != 0) return -1;
    funnel__zs_fill(&b);
    uint32_t s1 = funnel__zs_take(&b, al), s2 = funnel__zs_take(&b, al);
    if (b.bit < 0) return -1;
    const struct funnel__zs_fse *t = sc->weights;
    for (;;) {
      if (k > 253) return -1;
      FUNNEL_ZS_SET(sc->w[k], t[s1].symbol);
      k++;
      funnel__zs_fill(&b); /* (bit >= 0 here: the loop ends once below) */
      s1 = t[s1].base + funnel__zs_take(&b, t[s1].bits);
      if (b.bit < 0) {
        FUNNEL_ZS_SET(sc->w[k], t[s2].symbol);
        k++;
        break;
      }
      FUNNEL_ZS_SET(sc->w[k], t[s2].symbol);
      k++;
      funnel__zs_fill(&b);
      s2 = t[s2].base + funnel__zs_take(&b, t[s2].bits);
      if (b.bit < 0) {
        FUNNEL_ZS_SET(sc->w[k], t[s1].symbol);
        k++;
        break;
      }
    }
  }
  FUNNEL_ZS_SYNC(); /* the weights, read by every lane */
  /* the weights' sum, the code's length, the last weight: the lanes split
   * the weights */
  uint32_t total = 0, ones = 0;
  bool over = false;
  for (int i0 = 0; i0 < k; i0 += (int)lanes) {
    const int i = i0 + (int)lane;
    const unsigned wi = i < k ? sc->w[i] : 0u;
    over |= wi > FUNNEL_ZS_HUF_LOG;
    if (wi > 0 && wi <= FUNNEL_ZS_HUF_LOG) total += 1u << (wi - 1);
    ones += FUNNEL_ZS_POPC(FUNNEL_ZS_BALLOT(wi == 1));
  }
  if (FUNNEL_ZS_ANY(over)) return -1;
  total = funnel__zs_sum(total);
  if (total == 0) return -1;
  const int log = funnel__zs_high(total) + 1;
  if (log > FUNNEL_ZS_HUF_LOG) return -1;
  const uint32_t rest = (1u << log) - total;
  if ((rest & (rest - 1)) != 0) return -1; /* not a power of 2 */
  const int lastw = funnel__zs_high(rest) + 1;
  FUNNEL_ZS_SET(sc->w[k], (uint8_t)lastw);
  k++;
  ones += lastw == 1;
  if (ones < 2 || (ones & 1)) return -1; /* as libzstd: weight 1 an even count, at least 2 */
  /* the codes: the weights' symbols in turn from weight 1 up, each
   * 2^(weight - 1) entries. A symbol's first entry follows those of the
   * lighter weights and those of its own weight's earlier symbols: its
   * rank among the latter into nexts[s], the symbols of each weight
   * counted in norm[weight] */
  for (int wt = (int)lane; wt <= FUNNEL_ZS_HUF_LOG; wt += (int)lanes) sc->norm[wt] = 0;
  FUNNEL_ZS_SYNC();
  for (int s0 = 0; s0 < k; s0 += (int)lanes) {
    const int s = s0 + (int)lane;
    const int rank = funnel__zs_rank(sc->norm, s < k ? sc->w[s] : 0u, s < k, lane);
    if (s < k) sc->nexts[s] = (uint16_t)rank;
  }
  /* the entries: a symbol's by its lane when they are fewer than the
   * lanes, else by every lane, one such symbol after another */
  for (int s0 = 0; s0 < k; s0 += (int)lanes) {
    const int s = s0 + (int)lane;
    const unsigned ws = s < k ? sc->w[s] : 0u;
    uint32_t start = 0, len = 0;
    if (ws > 0) {
      for (unsigned wt = 1; wt < ws; wt++) start += (uint32_t)sc->norm[wt] << (wt - 1);
      len = 1u << (ws - 1);
      start += (uint32_t)sc->nexts[s] << (ws - 1);
    }
    const uint32_t e = (uint32_t)s << 8 | (uint32_t)(log + 1 - (int)ws);
    if (len < lanes)
      for (uint32_t i = 0; i < len; i++) sc->huf[start + i] = (uint16_t)e;
    for (unsigned big = FUNNEL_ZS_BALLOT(len >= lanes); big != 0; big &= big - 1) {
      const int q = FUNNEL_ZS_FFS(big) - 1;
      const uint32_t qs = FUNNEL_ZS_FROM(start, q), ql = FUNNEL_ZS_FROM(len, q),
                     qe = FUNNEL_ZS_FROM(e, q);
      for (uint32_t i = lane; i < ql; i += lanes) sc->huf[qs + i] = (uint16_t)qe;
    }
  }
  FUNNEL_ZS_SET(sc->huf_log, log);
  FUNNEL_ZS_SYNC();
  return took;
}

/* Decodes `count` literals of the Huffman stream at z (n bytes) into out:
 * 0, or -1 when the stream does not hold exactly them. A fill makes 56
 * bits readable, as many codes of the table's longest as those hold. */
FUNNEL_ZS int funnel__zs_huf_stream(const struct funnel__zstd_scratch *sc, const uint8_t *z,
                                    int64_t n, struct funnel__zs_span span, uint8_t *out,
                                    int64_t count) {
  struct funnel__zs_bits b;
  if (funnel__zs_bits_init(&b, z, n, span) != 0) return -1;
  const int log = sc->huf_log, per = 56 / log;
  for (int64_t i = 0; i < count;) {
    if (b.bit < 0) return -1;
    funnel__zs_fill(&b);
    for (const int64_t end = count - i < per ? count : i + per; i < end; i++) {
      const unsigned e = sc->huf[funnel__zs_look(&b, log)];
      b.bit -= (int32_t)(e & 0xFF);
      out[i] = (uint8_t)(e >> 8);
    }
  }
  return b.bit == 0 ? 0 : -1;
}

/* ---------------------------------------------------------- checksum */

#define FUNNEL_XXH64_P1 0x9E3779B185EBCA87ull
#define FUNNEL_XXH64_P2 0xC2B2AE3D27D4EB4Full
#define FUNNEL_XXH64_P3 0x165667B19E3779F9ull
#define FUNNEL_XXH64_P4 0x85EBCA77C2B2AE63ull
#define FUNNEL_XXH64_P5 0x27D4EB2F165667C5ull

FUNNEL_ZS uint64_t funnel__xxh64_rotl(uint64_t x, int r) { return x << r | x >> (64 - r); }
FUNNEL_ZS uint64_t funnel__xxh64_round(uint64_t acc, uint64_t v) {
  return funnel__xxh64_rotl(acc + v * FUNNEL_XXH64_P2, 31) * FUNNEL_XXH64_P1;
}
FUNNEL_ZS uint64_t funnel__xxh64_merge(uint64_t h, uint64_t v) {
  return (h ^ funnel__xxh64_round(0, v)) * FUNNEL_XXH64_P1 + FUNNEL_XXH64_P4;
}
FUNNEL_ZS uint64_t funnel__xxh64_ld(const uint8_t *p, int k) {
  uint64_t v = 0;
  for (int i = k - 1; i >= 0; i--) v = v << 8 | p[i];
  return v;
}

/* XXH64 with seed 0 of the n bytes at p (xxHash's doc/xxhash_spec.md),
 * by one thread: the content checksum's low 32 bits are the frame's. */
FUNNEL_ZS uint64_t funnel__xxh64(const uint8_t *p, int64_t n) {
  int64_t i = 0;
  uint64_t h;
  if (n >= 32) {
    uint64_t v1 = FUNNEL_XXH64_P1 + FUNNEL_XXH64_P2, v2 = FUNNEL_XXH64_P2, v3 = 0,
             v4 = 0 - FUNNEL_XXH64_P1;
    for (; i + 32 <= n; i += 32) {
      v1 = funnel__xxh64_round(v1, funnel__xxh64_ld(p + i, 8));
      v2 = funnel__xxh64_round(v2, funnel__xxh64_ld(p + i + 8, 8));
      v3 = funnel__xxh64_round(v3, funnel__xxh64_ld(p + i + 16, 8));
      v4 = funnel__xxh64_round(v4, funnel__xxh64_ld(p + i + 24, 8));
    }
    h = funnel__xxh64_rotl(v1, 1) + funnel__xxh64_rotl(v2, 7) + funnel__xxh64_rotl(v3, 12) +
        funnel__xxh64_rotl(v4, 18);
    h = funnel__xxh64_merge(h, v1);
    h = funnel__xxh64_merge(h, v2);
    h = funnel__xxh64_merge(h, v3);
    h = funnel__xxh64_merge(h, v4);
  } else {
    h = FUNNEL_XXH64_P5;
  }
  h += (uint64_t)n;
  for (; i + 8 <= n; i += 8)
    h = funnel__xxh64_rotl(h ^ funnel__xxh64_round(0, funnel__xxh64_ld(p + i, 8)), 27) *
            FUNNEL_XXH64_P1 +
        FUNNEL_XXH64_P4;
  if (i + 4 <= n) {
    h = funnel__xxh64_rotl(h ^ funnel__xxh64_ld(p + i, 4) * FUNNEL_XXH64_P1, 23) *
            FUNNEL_XXH64_P2 +
        FUNNEL_XXH64_P3;
    i += 4;
  }
  for (; i < n; i++)
    h = funnel__xxh64_rotl(h ^ p[i] * FUNNEL_XXH64_P5, 11) * FUNNEL_XXH64_P1;
  h ^= h >> 33;
  h *= FUNNEL_XXH64_P2;
  h ^= h >> 29;
  h *= FUNNEL_XXH64_P3;
  h ^= h >> 32;
  return h;
}

/* ------------------------------------------------------------ blocks */

/* n bytes from s to d by the lanes (d never after s within n bytes: a
 * byte written is one read before it). Every lane reads its byte of a
 * round before any lane writes, whatever order the lanes run in: a write
 * may land on a byte another lane of the same round reads. */
FUNNEL_ZS void funnel__zs_copy(uint8_t *d, const uint8_t *s, uint32_t n, unsigned lane,
                               unsigned lanes) {
  for (uint32_t i0 = 0; i0 < n; i0 += lanes) {
    const uint32_t i = i0 + lane;
    const uint8_t v = i < n ? s[i] : 0;
    FUNNEL_ZS_SYNC();
    if (i < n) d[i] = v;
  }
}

/* The last q in [0, n) with a[q] <= v (a[0] <= v; a non-decreasing). */
FUNNEL_ZS int funnel__zs_find(const uint32_t *a, int n, int64_t v) {
  int lo = 0, hi = n - 1;
  while (lo < hi) {
    const int mid = (lo + hi + 1) >> 1;
    if ((int64_t)a[mid] <= v) lo = mid;
    else hi = mid - 1;
  }
  return lo;
}

/* The byte that byte s of sequence q's match repeats (s at or past the
 * match's first byte, sc->m[q]): `off` bytes back, or for a byte at least
 * one offset into a match that overlaps itself, the same byte of its
 * first `off` (the division only then). Below 0: before the batch. */
FUNNEL_ZS int64_t funnel__zs_repeated(const struct funnel__zstd_scratch *sc, int q, uint32_t s) {
  const uint32_t m = sc->m[q], o = sc->off[q], r = s - m;
  return r < o ? (int64_t)s - o : (int64_t)m - o + (int64_t)(r % o);
}

/* Runs a batch of nb sequences (sc->lo ...) whose output starts at out
 * and whose la literals lie at lit: every lane copies literals, each byte
 * to its place, then every lane writes match bytes, each from its source:
 * the byte a match copies is traced back through the batch's earlier
 * matches (a match repeating its last `off` bytes taken modulo) to a
 * byte before the batch or one of its literals, which are all in place.
 * So a batch waits on memory twice, not twice a sequence. */
FUNNEL_ZS void funnel__zs_batch(const struct funnel__zstd_scratch *sc, int nb, uint32_t la,
                                uint32_t ma, uint8_t *out, const uint8_t *lit, unsigned lane,
                                unsigned lanes) {
  /* (the literals may lie in the buffer's last bytes, where the output
   * comes within 3 bytes of them: each lane reads its literal of a round
   * before any lane writes, as funnel__zs_copy) */
  for (uint32_t j0 = 0; j0 < la; j0 += lanes) {
    const uint32_t j = j0 + lane;
    const int q = j < la ? funnel__zs_find(sc->lpre, nb, j) : 0;
    const uint8_t v = j < la ? lit[j] : 0;
    FUNNEL_ZS_SYNC();
    if (j < la) out[sc->lo[q] + (j - sc->lpre[q])] = v;
  }
  FUNNEL_ZS_SYNC();
  for (uint32_t k = lane; k < ma; k += lanes) {
    int q = funnel__zs_find(sc->mpre, nb, k);
    const int64_t x = (int64_t)sc->m[q] + (k - sc->mpre[q]);
    int64_t s = x;
    for (;;) { /* s lies in sequence q's match */
      s = funnel__zs_repeated(sc, q, (uint32_t)s);
      if (s < 0) break; /* before the batch */
      q = funnel__zs_find(sc->lo, nb, s);
      if (s < (int64_t)sc->m[q]) break; /* one of its literals */
    }
    out[x] = out[s];
  }
}

/* Where byte x of a batch's output comes from (funnel__zs_batch_mapped):
 * traced back through the batch's matches (funnel__zs_repeated) to one of
 * the batch's literals or a byte before the batch. */
FUNNEL_ZS const uint8_t *funnel__zs_source(const struct funnel__zstd_scratch *sc, uint32_t x,
                                           const uint8_t *out, const uint8_t *lit) {
  uint32_t s = x;
  int q = sc->own[x];
  for (;;) { /* s lies in sequence q */
    const uint32_t m = sc->m[q];
    if (s < m) return lit + sc->lpre[q] + (s - sc->lo[q]); /* one of its literals */
    const int64_t t = funnel__zs_repeated(sc, q, s);
    if (t < 0) return out + t; /* before the batch */
    s = (uint32_t)t;
    q = sc->own[s];
  }
}

/* Runs a batch as funnel__zs_batch does, in one pass over its `total`
 * bytes of output, each mapped to its sequence (sc->own) and read where
 * funnel__zs_source finds it. The batch's output must not reach its
 * literals (they are read while it is written); no byte it writes is
 * read, so its lanes need no sync, and a lane loads four bytes before it
 * stores them (a warp's loads wait on memory once for 128 bytes, not four
 * times). */
FUNNEL_ZS void funnel__zs_batch_mapped(const struct funnel__zstd_scratch *sc, uint32_t total,
                                       uint8_t *out, const uint8_t *lit, unsigned lane,
                                       unsigned lanes) {
  uint32_t x = lane;
  for (; x + 3 * lanes < total; x += 4 * lanes) {
    const uint8_t *f0 = funnel__zs_source(sc, x, out, lit),
                  *f1 = funnel__zs_source(sc, x + lanes, out, lit),
                  *f2 = funnel__zs_source(sc, x + 2 * lanes, out, lit),
                  *f3 = funnel__zs_source(sc, x + 3 * lanes, out, lit);
    const uint8_t v0 = *f0, v1 = *f1, v2 = *f2, v3 = *f3;
    out[x] = v0;
    out[x + lanes] = v1;
    out[x + 2 * lanes] = v2;
    out[x + 3 * lanes] = v3;
  }
  for (; x < total; x += lanes) out[x] = *funnel__zs_source(sc, x, out, lit);
}

/* Entry s of t as one word: symbol | bits << 8 | base << 16 (the host and
 * the device are both little-endian). */
FUNNEL_ZS uint32_t funnel__zs_entry(const struct funnel__zs_fse *t, uint32_t s) {
  uint32_t e;
  memcpy(&e, &t[s], sizeof e);
  return e;
}

/* A batch's nb sequences (RFC 8878, 3.1.1.3.2.1), in three passes. First
 * the chain of the three states, which every lane follows alike: a
 * sequence's codes come from its states, its extra bits (offset, match
 * length, literals length) are only counted, and the next states read
 * (all three at once), unless `last` (the block's last sequence is the
 * batch's). Sequence q's codes and where its extra bits begin are kept
 * (sc->scode, sc->sbit, by lane q). -1 when the stream runs out before
 * a field, the reader past its start. */
FUNNEL_ZS int funnel__zs_chain(struct funnel__zstd_scratch *sc, struct funnel__zs_bits *b,
                               uint32_t *state, int nb, bool last, unsigned lane,
                               unsigned lanes) {
  uint32_t sll = state[0], sof = state[1], sml = state[2];
  for (int q = 0; q < nb; q++) {
    /* (an offset code is at most 31: the tables take no other) */
    const uint32_t el = funnel__zs_entry(sc->ll, sll), eo = funnel__zs_entry(sc->of, sof),
                   em = funnel__zs_entry(sc->ml, sml);
    if (lane == (unsigned)q % lanes) {
      sc->sbit[q] = b->bit;
      sc->scode[q] = (eo & 0xFF) | (el & 0xFF) << 8 | (em & 0xFF) << 16;
    }
    b->bit -= (int)((el >> 25) + (eo >> 25) + (em >> 25)); /* the extra bits */
    if (b->bit < 0) return -1;
    if (last && q == nb - 1) break;
    funnel__zs_fill(b);
    const int lb = (el >> 8) & 0xFF, ob = (eo >> 8) & 0xFF, mb = (em >> 8) & 0xFF;
    const uint32_t v = funnel__zs_take(b, lb + mb + ob);
    if (b->bit < 0) return -1;
    sof = ((eo >> 16) & 0x1FF) + (v & ((1u << ob) - 1));
    sml = ((em >> 16) & 0x1FF) + ((v >> ob) & ((1u << mb) - 1));
    sll = ((el >> 16) & 0x1FF) + (v >> (ob + mb));
  }
  state[0] = sll;
  state[1] = sof;
  state[2] = sml;
  return 0;
}

/* Then each sequence's extra bits, read by its own lane from where the
 * chain left them: its offset's value (sc->sov: 3 and below repeat an
 * offset), its literals' length (sc->sll) and its match's (sc->sml). */
FUNNEL_ZS void funnel__zs_values(struct funnel__zstd_scratch *sc, const struct funnel__zs_bits *b,
                                 int nb, unsigned lane, unsigned lanes) {
  for (int q = (int)lane; q < nb; q += (int)lanes) {
    const uint32_t code = sc->scode[q];
    const unsigned ofc = code & 0xFF, llc = (code >> 8) & 0xFF, mlc = code >> 16;
    const int mlb = funnel__zs_ml_bits(mlc), llb = funnel__zs_ll_bits(llc);
    struct funnel__zs_bits r = *b;
    funnel__zs_seek(&r, sc->sbit[q]);
    sc->sov[q] = (1u << ofc) + funnel__zs_take(&r, (int)ofc);
    if ((int)ofc + mlb + llb > 56) funnel__zs_fill(&r);
    sc->sml[q] = funnel__zs_ml_base(mlc) + funnel__zs_take(&r, mlb);
    sc->sll[q] = funnel__zs_ll_base(llc) + funnel__zs_take(&r, llb);
  }
}

/* Then each sequence's offset (new, or one of the three repeated: `rep`,
 * the frame's, kept up to date) and place in the batch's output (sc->lo,
 * sc->m, sc->off, sc->lpre, sc->mpre; the map sc->own), and the batch's
 * bytes, literals and match bytes in all. Whether some offset is 0 or
 * reaches further back than the batch's first byte and the `back` bytes
 * of the frame before it (the batch's other bounds are checked after
 * this: each grows with every sequence). Lengths are below 2^18: a
 * batch's sums of them fit 32 bits. */
#if defined(__CUDACC__)
/* (a warp: lane q places sequence q, the offsets repeated by every lane
 * alike, the places scanned) */
#if FUNNEL_ZS_BATCH != 32
#error "a batch is a warp's sequences"
#endif
FUNNEL_ZS bool funnel__zs_place(struct funnel__zstd_scratch *sc, int nb, uint32_t back,
                                uint32_t *rep, uint32_t *bytes, uint32_t *lits,
                                uint32_t *matches, unsigned lane, unsigned lanes) {
  (void)lanes; /* 32 */
  const bool live = (int)lane < nb;
  const uint32_t ov = live ? sc->sov[lane] : 4, ll = live ? sc->sll[lane] : 0,
                 ml = live ? sc->sml[lane] : 0;
  /* 0 to 3: a repeat (0: rep0; 1, 2; 3: rep0 - 1); 4 and up: a new
   * offset, 3 more */
  const uint32_t code = ov > 3 || ll == 0 ? ov : ov - 1;
  uint32_t r0 = rep[0], r1 = rep[1], r2 = rep[2], off = 0;
  for (int q = 0; q < nb; q++) {
    const uint32_t k = FUNNEL_ZS_FROM(code, q);
    uint32_t o = r0;
    if (k != 0) {
      o = k > 3 ? k - 3 : k == 3 ? r0 - 1 : k == 1 ? r1 : r2;
      if (k != 1) r2 = r1;
      r1 = r0;
      r0 = o;
    }
    if ((int)lane == q) off = o;
  }
  rep[0] = r0;
  rep[1] = r1;
  rep[2] = r2;
  const uint32_t len = ll + ml, end = funnel__zs_scan(len, lane), at = end - len,
                 la = funnel__zs_scan(ll, lane) - ll, ma = funnel__zs_scan(ml, lane) - ml;
  const bool bad = live && (off == 0 || (off > at + ll && off - (at + ll) > back));
  if (live) {
    sc->lo[lane] = at;
    sc->m[lane] = at + ll;
    sc->off[lane] = off;
    sc->lpre[lane] = la;
    sc->mpre[lane] = ma;
  }
  /* the batch's map: each lane the bytes [x, x + r) of its first `mapped`,
   * from the last sequence that starts at or before x (a search over the
   * lanes' starts: they rise, a sequence being 3 bytes at least, and the
   * lanes past nb start at the batch's end), a sequence's bytes at a time */
  *lits = FUNNEL_ZS_FROM(la + ll, 31);
  *matches = FUNNEL_ZS_FROM(ma + ml, 31);
  const uint32_t total = FUNNEL_ZS_FROM(end, 31),
                 mapped = total < FUNNEL_ZS_MAP ? total : FUNNEL_ZS_MAP, r = (mapped + 31) / 32;
  uint32_t x = lane * r;
  const uint32_t stop = x + r < mapped ? x + r : mapped;
  unsigned q = 0;
  for (unsigned step = 16; step > 0; step >>= 1)
    if (FUNNEL_ZS_FROM(at, q + step) <= x) q += step;
  FUNNEL_ZS_SYNC(); /* the starts (sc->lo), read by other lanes */
  while (x < stop) {
    const uint32_t next = (int)q + 1 < nb ? sc->lo[q + 1] : total, e = next < stop ? next : stop;
    for (; x < e; x++) sc->own[x] = (uint8_t)q;
    q++;
  }
  *bytes = total;
  return FUNNEL_ZS_ANY(bad);
}
#else
/* (one lane, a sequence at a time) */
FUNNEL_ZS bool funnel__zs_place(struct funnel__zstd_scratch *sc, int nb, uint32_t back,
                                uint32_t *rep, uint32_t *bytes, uint32_t *lits,
                                uint32_t *matches, unsigned lane, unsigned lanes) {
  (void)lane;
  (void)lanes; /* 1 */
  uint32_t bat = 0, bla = 0, bma = 0;
  bool bad = false;
  for (int q = 0; q < nb; q++) {
    const uint32_t ov = sc->sov[q], ll = sc->sll[q], ml = sc->sml[q];
    uint32_t off;
    if (ov > 3) {
      off = ov - 3;
      rep[2] = rep[1];
      rep[1] = rep[0];
      rep[0] = off;
    } else {
      const unsigned k = ll == 0 ? ov : ov - 1; /* 0: rep0; 1, 2; 3: rep0 - 1 */
      if (k == 0) {
        off = rep[0];
      } else {
        off = k == 3 ? rep[0] - 1 : k == 1 ? rep[1] : rep[2];
        bad |= off == 0;
        if (k != 1) rep[2] = rep[1];
        rep[1] = rep[0];
        rep[0] = off;
      }
    }
    bad |= off > bat + ll && off - (bat + ll) > back;
    sc->lo[q] = bat;
    sc->m[q] = bat + ll;
    sc->off[q] = off;
    sc->lpre[q] = bla;
    sc->mpre[q] = bma;
    const uint32_t end = bat + ll + ml < FUNNEL_ZS_MAP ? bat + ll + ml : FUNNEL_ZS_MAP;
    for (uint32_t x = bat; x < end; x++) sc->own[x] = (uint8_t)q;
    bat += ll + ml;
    bla += ll;
    bma += ml;
  }
  *bytes = bat;
  *lits = bla;
  *matches = bma;
  return bad;
}
#endif

/* A compressed block (RFC 8878, 3.1.1.3) of n bytes at z, decoded to
 * dst[*op ...), where the frame began at dst[frame] and the buffer ends
 * at dst[cap]; rep: the frame's repeated offsets. */
FUNNEL_ZS int funnel__zs_block(struct funnel__zstd_scratch *sc, const uint8_t *z, int64_t n,
                               struct funnel__zs_span span, uint8_t *dst, int64_t *op_io,
                               int64_t frame, int64_t cap, uint32_t *rep, unsigned lane,
                               unsigned lanes) {
  if (n < 1) return FUNNEL__LZ4_CORRUPT;
  /* the literals section */
  const unsigned h0 = FUNNEL_ZS_LD(z), type = h0 & 3, sf = (h0 >> 2) & 3;
  int64_t regen, at, lsize = 0;
  int streams = 1;
  if (type < 2) { /* raw or RLE */
    if (sf == 0 || sf == 2) {
      regen = h0 >> 3;
      at = 1;
    } else if (sf == 1) {
      if (n < 2) return FUNNEL__LZ4_CORRUPT;
      regen = (h0 >> 4) + ((int64_t)FUNNEL_ZS_LD(z + 1) << 4);
      at = 2;
    } else {
      if (n < 3) return FUNNEL__LZ4_CORRUPT;
      regen = (h0 >> 4) + ((int64_t)FUNNEL_ZS_LD(z + 1) << 4) +
              ((int64_t)FUNNEL_ZS_LD(z + 2) << 12);
      at = 3;
    }
  } else {
    const int hb = sf < 2 ? 3 : sf == 2 ? 4 : 5;
    if (n < hb) return FUNNEL__LZ4_CORRUPT;
    uint64_t hv = 0;
    for (int k = hb - 1; k >= 0; k--) hv = hv << 8 | FUNNEL_ZS_LD(z + k);
    const int sbits = sf < 2 ? 10 : sf == 2 ? 14 : 18;
    regen = (int64_t)((hv >> 4) & ((1u << sbits) - 1));
    lsize = (int64_t)((hv >> (4 + sbits)) & ((1u << sbits) - 1));
    streams = sf == 0 ? 1 : 4;
    at = hb;
  }
  if (regen > (int64_t)FUNNEL_ZS_BLOCK_MAX) return FUNNEL__LZ4_CORRUPT;
  int64_t op = *op_io;
  /* where the literals are read from */
  const uint8_t *lit;
  if (type == 0) {
    if (n - at < regen) return FUNNEL__LZ4_CORRUPT;
    lit = z + at;
    at += regen;
  } else {
    if (regen > cap - op) return FUNNEL__LZ4_CORRUPT; /* no room for them at the end */
    uint8_t *tail = dst + (cap - regen);
    if (type == 1) {
      if (n - at < 1) return FUNNEL__LZ4_CORRUPT;
      const uint8_t v = (uint8_t)FUNNEL_ZS_LD(z + at);
      for (int64_t i = lane; i < regen; i += lanes) tail[i] = v;
      at += 1;
    } else {
      if (lsize > n - at) return FUNNEL__LZ4_CORRUPT;
      const uint8_t *lz = z + at;
      int64_t ln = lsize;
      if (type == 2) {
        const int64_t t = funnel__zs_huf_table(sc, lz, ln, span, lane, lanes);
        if (t < 0) return FUNNEL__LZ4_CORRUPT;
        lz += t;
        ln -= t;
      } else if (sc->huf_log == 0) {
        return FUNNEL__LZ4_CORRUPT; /* treeless, no tree before */
      }
      int bad = 0;
      if (streams == 1) {
        if (lane == 0) bad = funnel__zs_huf_stream(sc, lz, ln, span, tail, regen);
      } else {
        if (ln < 6) return FUNNEL__LZ4_CORRUPT;
        const int64_t s1 = FUNNEL_ZS_LD(lz) | FUNNEL_ZS_LD(lz + 1) << 8,
                      s2 = FUNNEL_ZS_LD(lz + 2) | FUNNEL_ZS_LD(lz + 3) << 8,
                      s3 = FUNNEL_ZS_LD(lz + 4) | FUNNEL_ZS_LD(lz + 5) << 8;
        const int64_t s4 = ln - 6 - s1 - s2 - s3, seg = (regen + 3) / 4;
        /* (libzstd refuses four streams of fewer than 6 literals) */
        if (s4 < 1 || regen < 6) return FUNNEL__LZ4_CORRUPT;
        /* a lane a stream */
        for (unsigned s = lane; s < 4; s += lanes) {
          const int64_t from = 6 + (s > 0 ? s1 : 0) + (s > 1 ? s2 : 0) + (s > 2 ? s3 : 0);
          const int64_t len = s == 0 ? s1 : s == 1 ? s2 : s == 2 ? s3 : s4;
          bad |= funnel__zs_huf_stream(sc, lz + from, len, span, tail + s * seg,
                                       s < 3 ? seg : regen - 3 * seg);
        }
      }
      if (FUNNEL_ZS_ANY(bad != 0)) return FUNNEL__LZ4_CORRUPT;
      at += lsize;
    }
    FUNNEL_ZS_SYNC();
    lit = tail;
  }
  /* the sequences section */
  if (at >= n) return FUNNEL__LZ4_CORRUPT;
  int64_t nseq = FUNNEL_ZS_LD(z + at);
  if (nseq >= 128) {
    if (nseq < 255) {
      if (n - at < 2) return FUNNEL__LZ4_CORRUPT;
      nseq = ((nseq - 128) << 8) + FUNNEL_ZS_LD(z + at + 1);
      at += 2;
    } else {
      if (n - at < 3) return FUNNEL__LZ4_CORRUPT;
      nseq = FUNNEL_ZS_LD(z + at + 1) + ((int64_t)FUNNEL_ZS_LD(z + at + 2) << 8) + 0x7F00;
      at += 3;
    }
  } else {
    at += 1;
  }
  const int64_t block_start = op;
  int64_t lp = 0; /* literals read */
  if (nseq > 0) {
    if (at >= n) return FUNNEL__LZ4_CORRUPT;
    const unsigned modes = FUNNEL_ZS_LD(z + at++);
    if (modes & 3) return FUNNEL__LZ4_CORRUPT;
    const unsigned m[3] = {modes >> 6, (modes >> 4) & 3, (modes >> 2) & 3}; /* LL, OF, ML */
    for (int which = 0; which < 3; which++) {
      const int64_t t = funnel__zs_seq_table(sc, which, m[which], z + at, n - at, lane, lanes);
      if (t < 0) return FUNNEL__LZ4_CORRUPT;
      at += t;
    }
    FUNNEL_ZS_SYNC(); /* the tables' logs, read by every lane */
    struct funnel__zs_bits b;
    if (funnel__zs_bits_init(&b, z + at, n - at, span) != 0) return FUNNEL__LZ4_CORRUPT;
    funnel__zs_fill(&b);
    uint32_t state[3]; /* literals length, offset, match length */
    state[0] = funnel__zs_take(&b, sc->ll_log);
    state[1] = funnel__zs_take(&b, sc->of_log);
    state[2] = funnel__zs_take(&b, sc->ml_log);
    if (b.bit < 0) return FUNNEL__LZ4_CORRUPT;
    /* the repeated offsets, in registers */
    uint32_t reps[3] = {rep[0], rep[1], rep[2]};
    for (int64_t i = 0; i < nseq;) {
      /* a batch: its sequences decoded (the chain by every lane alike,
       * then each one's values by its lane, then its offset and place by
       * every lane alike, lane q keeping sequence q's), checked, then run */
      const int nb = nseq - i < FUNNEL_ZS_BATCH ? (int)(nseq - i) : FUNNEL_ZS_BATCH;
      /* the frame's bytes before the batch, which its matches may reach
       * (counted to 2^32 - 1: an offset is below 2^32) */
      const uint32_t back = op - frame < (int64_t)UINT32_MAX ? (uint32_t)(op - frame) : UINT32_MAX;
      FUNNEL_ZS_SYNC(); /* the last batch's readers of sc->lo ... */
      if (funnel__zs_chain(sc, &b, state, nb, i + nb == nseq, lane, lanes) != 0)
        return FUNNEL__LZ4_CORRUPT;
      /* (no sync: sequence q's entries are lane q % lanes's alone, until
       * funnel__zs_place writes its place) */
      funnel__zs_values(sc, &b, nb, lane, lanes);
      uint32_t bat, bla, bma;
      const bool bad = funnel__zs_place(sc, nb, back, reps, &bat, &bla, &bma, lane, lanes);
      i += nb;
      /* its literals within the block's, its output within the buffer
       * and short of the literals still to read (the output never reaches
       * them: the block would then decode to more than the buffer holds),
       * and within a block's size. (Lengths are below 2^18: a batch's sum
       * of them fits 32 bits.) */
      const int64_t b0 = op, lp0 = lp;
      op += bat;
      lp += bla;
      if (bad || lp > regen || op > cap - (regen - lp) ||
          op - block_start > (int64_t)FUNNEL_ZS_BLOCK_MAX)
        return FUNNEL__LZ4_CORRUPT;
      if (lane == (unsigned)nb % lanes) {
        sc->lo[nb] = bat;
        sc->lpre[nb] = bla;
        sc->mpre[nb] = bma;
      }
      FUNNEL_ZS_SYNC();
      /* one pass where the batch's bytes are mapped and its output does
       * not reach its literals (those at the buffer's end, which the last
       * block's output comes up to) */
      if (bat <= FUNNEL_ZS_MAP && (type == 0 || b0 + bat <= cap - regen + lp0))
        funnel__zs_batch_mapped(sc, bat, dst + b0, lit + lp0, lane, lanes);
      else
        funnel__zs_batch(sc, nb, bla, bma, dst + b0, lit + lp0, lane, lanes);
      FUNNEL_ZS_SYNC();
    }
    if (b.bit != 0) return FUNNEL__LZ4_CORRUPT; /* the bitstream not used up exactly */
    rep[0] = reps[0];
    rep[1] = reps[1];
    rep[2] = reps[2];
  } else if (at != n) {
    return FUNNEL__LZ4_CORRUPT;
  }
  /* the literals left */
  const int64_t rest = regen - lp;
  if (rest > cap - op || op + rest - block_start > (int64_t)FUNNEL_ZS_BLOCK_MAX)
    return FUNNEL__LZ4_CORRUPT;
  funnel__zs_copy(dst + op, lit + lp, (uint32_t)rest, lane, lanes);
  op += rest;
  FUNNEL_ZS_SYNC();
  *op_io = op;
  return FUNNEL__LZ4_OK;
}

/* Decodes the frames of `n` bytes at `src` into exactly `cap` bytes at
 * `dst`: a FUNNEL__LZ4_* status. */
FUNNEL_ZS int funnel__zstd_frames(const uint8_t *src, int64_t n, uint8_t *dst, int64_t cap,
                                  unsigned lane, unsigned lanes, struct funnel__zstd_scratch *sc) {
  int64_t ip = 0, op = 0;
  if (n < 1) return FUNNEL__LZ4_CORRUPT;
  const struct funnel__zs_span span = {src, src + n};
  while (ip < n) {
    if (n - ip < 8) return FUNNEL__LZ4_CORRUPT;
    const uint32_t magic = (uint32_t)funnel__zs_ld8(src, ip, n, span);
    if ((magic & 0xFFFFFFF0u) == 0x184D2A50u) { /* skippable */
      const int64_t size = (int64_t)(funnel__zs_ld8(src, ip + 4, n, span) & 0xFFFFFFFFu);
      if (size > n - ip - 8) return FUNNEL__LZ4_CORRUPT;
      ip += 8 + size;
      continue;
    }
    if (magic != 0xFD2FB528u) return FUNNEL__LZ4_CORRUPT;
    const unsigned fhd = FUNNEL_ZS_LD(src + ip + 4);
    ip += 5;
    const unsigned fcs_flag = fhd >> 6, single = (fhd >> 5) & 1, sum = (fhd >> 2) & 1,
                   did = fhd & 3;
    if (fhd & 8) return FUNNEL__LZ4_CORRUPT; /* the reserved bit */
    const int fcs_bytes = fcs_flag == 0 ? (single ? 1 : 0) : 1 << fcs_flag;
    const int did_bytes = did == 0 ? 0 : 1 << (did - 1);
    const int64_t hdr = (single ? 0 : 1) + did_bytes + fcs_bytes;
    if (n - ip < hdr) return FUNNEL__LZ4_CORRUPT;
    /* the window: the output is whole and every offset is checked within
     * the frame, but a frame libzstd would refuse for its window (over its
     * default limit, 2^27) is refused, for the host to name. A block
     * holds at most the window's bytes and 128 KiB (RFC 8878, 3.1.1.2.4,
     * Block_Maximum_Size; libzstd from 1.5.6 refuses larger ones) */
    int64_t block_max = (int64_t)FUNNEL_ZS_BLOCK_MAX;
    if (!single) {
      const unsigned wd = FUNNEL_ZS_LD(src + ip);
      if ((wd >> 3) + 10 > 27 || ((wd >> 3) + 10 == 27 && (wd & 7) != 0))
        return FUNNEL__LZ4_CORRUPT;
      const int64_t base = (int64_t)1 << ((wd >> 3) + 10), window = base + base / 8 * (wd & 7);
      if (window < block_max) block_max = window;
      ip++;
    }
    uint64_t dict = 0;
    for (int k = did_bytes - 1; k >= 0; k--) dict = dict << 8 | FUNNEL_ZS_LD(src + ip + k);
    if (dict != 0) return FUNNEL__LZ4_DICTIONARY;
    ip += did_bytes;
    int64_t content = -1;
    if (fcs_bytes > 0) {
      uint64_t v = 0;
      for (int k = fcs_bytes - 1; k >= 0; k--) v = v << 8 | FUNNEL_ZS_LD(src + ip + k);
      if (fcs_bytes == 2) v += 256;
      if (v > (uint64_t)(cap - op)) return FUNNEL__LZ4_LENGTH;
      content = (int64_t)v;
      if (single && content > ((int64_t)1 << 27)) return FUNNEL__LZ4_CORRUPT; /* its window */
      if (single && content < block_max) block_max = content;
      ip += fcs_bytes;
    }
    /* the frame's state */
    const int64_t frame = op;
    uint32_t rep[3] = {1, 4, 8};
    FUNNEL_ZS_SYNC();
    FUNNEL_ZS_SET(sc->huf_log, 0);
    FUNNEL_ZS_SET(sc->ll_log, -1);
    FUNNEL_ZS_SET(sc->ml_log, -1);
    FUNNEL_ZS_SET(sc->of_log, -1);
    FUNNEL_ZS_SYNC();
    int last = 0;
    while (!last) {
      if (n - ip < 3) return FUNNEL__LZ4_CORRUPT;
      const uint32_t bh = FUNNEL_ZS_LD(src + ip) | FUNNEL_ZS_LD(src + ip + 1) << 8 |
                          FUNNEL_ZS_LD(src + ip + 2) << 16;
      ip += 3;
      last = (int)(bh & 1);
      const unsigned btype = (bh >> 1) & 3;
      const int64_t bsize = bh >> 3;
      if (btype == 3) return FUNNEL__LZ4_CORRUPT;
      if (btype == 1) { /* RLE: one byte, bsize times */
        if (n - ip < 1 || bsize > block_max) return FUNNEL__LZ4_CORRUPT;
        if (bsize > cap - op) return FUNNEL__LZ4_LENGTH;
        const uint8_t v = (uint8_t)FUNNEL_ZS_LD(src + ip);
        for (int64_t i = lane; i < bsize; i += lanes) dst[op + i] = v;
        op += bsize;
        ip += 1;
      } else {
        if (bsize > n - ip || bsize > block_max) return FUNNEL__LZ4_CORRUPT;
        if (btype == 0) {
          if (bsize > cap - op) return FUNNEL__LZ4_LENGTH;
          funnel__zs_copy(dst + op, src + ip, (uint32_t)bsize, lane, lanes);
          op += bsize;
        } else {
          const int64_t before = op;
          const int st = funnel__zs_block(sc, src + ip, bsize, span, dst, &op, frame, cap, rep,
                                          lane, lanes);
          if (st != FUNNEL__LZ4_OK) return st;
          if (op - before > block_max) return FUNNEL__LZ4_CORRUPT;
        }
        ip += bsize;
      }
      FUNNEL_ZS_SYNC();
    }
    if (content >= 0 && op - frame != content) return FUNNEL__LZ4_LENGTH;
    if (sum) {
      if (n - ip < 4) return FUNNEL__LZ4_CORRUPT;
      const uint32_t want = (uint32_t)(funnel__zs_ld8(src, ip, n, span) & 0xFFFFFFFFu);
      if ((uint32_t)funnel__xxh64(dst + frame, op - frame) != want) return FUNNEL__LZ4_CORRUPT;
      ip += 4;
    }
  }
  return op == cap ? FUNNEL__LZ4_OK : FUNNEL__LZ4_LENGTH;
}

/* Decodes job `j` if it is a ZSTD one, its dst `base` more: its status,
 * or -1 (another decoder's job, left alone). */
FUNNEL_ZS int funnel__zstd_job_run(const struct funnel__lz4_job *j, uint64_t base, unsigned lane,
                                   unsigned lanes, struct funnel__zstd_scratch *sc) {
  if (j->kind != FUNNEL__ZSTD_FRAMES) return -1;
  return funnel__zstd_frames((const uint8_t *)(uintptr_t)j->src, j->src_length,
                             (uint8_t *)(uintptr_t)(j->dst + base), j->dst_length, lane, lanes,
                             sc);
}

#if !defined(__CUDACC__)
/* Runs the ZSTD jobs on this thread, leaving the others alone (the cpu
 * backend's FUNNEL_DP_STAGE_ZSTD runs funnel__lz4_run_jobs too). */
FUNNEL_ZS void funnel__zstd_run_jobs(struct funnel__lz4_job *jobs, int64_t n, uint64_t base) {
  struct funnel__zstd_scratch sc;
  for (int64_t j = 0; j < n; j++) {
    const int st = funnel__zstd_job_run(&jobs[j], base, 0, 1, &sc);
    if (st >= 0) jobs[j].status = st;
  }
}
#endif

#endif
