// concat.cu: the partition-map concat on the device. One launch runs a
// whole segment table (segment.h): block b takes segment b and its threads
// stride over it. Bit segments share boundary words with their neighbours,
// so those two words are written with atomics that change only the
// segment's own bits; every other word belongs to one segment.
#include <stdint.h>

extern "C" {
#include "segment.h"
}

namespace {

__device__ __forceinline__ uint32_t load_bits32(const uint8_t *src, uint64_t bit) {
  // 32 bits starting at any bit: up to 5 bytes, read one by one because
  // sources sit at any byte alignment
  const uint8_t *p = src + (bit >> 3);
  const unsigned shift = (unsigned)(bit & 7);
  uint64_t v = (uint64_t)p[0] | (uint64_t)p[1] << 8 | (uint64_t)p[2] << 16 |
               (uint64_t)p[3] << 24;
  if (shift) v |= (uint64_t)p[4] << 32;
  return (uint32_t)(v >> shift);
}

// Bits [lo, hi) of a segment that lands in 32-bit output word w. Reads of
// the source stay inside its count bits, rounded up to whole bytes.
__device__ void write_word(uint32_t *dst, uint64_t w, uint64_t dst_bit, uint64_t count,
                           const uint8_t *src, uint64_t src_bit, int kind) {
  const uint64_t word_first = w * 32;
  const uint64_t lo = word_first > dst_bit ? word_first : dst_bit;
  const uint64_t end = dst_bit + count;
  const uint64_t hi = word_first + 32 < end ? word_first + 32 : end;
  const unsigned n = (unsigned)(hi - lo);
  const unsigned at = (unsigned)(lo - word_first);
  const uint32_t mask = (n == 32 ? 0xFFFFFFFFu : ((1u << n) - 1u)) << at;
  uint32_t bits;
  if (kind == FUNNEL_SEG_BITS) {
    const uint64_t from = src_bit + (lo - dst_bit);
    // never read past the source's last byte
    const uint64_t src_end_byte = (src_bit + count + 7) >> 3;
    uint32_t v;
    if (((from >> 3) + 5) <= src_end_byte) {
      v = load_bits32(src, from);
    } else {
      v = 0;
      for (unsigned k = 0; k < n; k++) {
        const uint64_t b = from + k;
        v |= (uint32_t)((src[b >> 3] >> (b & 7)) & 1u) << k;
      }
    }
    bits = (v << at) & mask;
  } else {
    bits = kind == FUNNEL_SEG_ONES ? mask : 0u;
  }
  if (mask == 0xFFFFFFFFu) {
    dst[w] = bits;
  } else {
    atomicAnd(&dst[w], ~mask);
    atomicOr(&dst[w], bits);
  }
}

__device__ void run_bits(const funnel__segment &s) {
  if (s.count == 0) return;
  // dst is 64-byte aligned (the plan carves every output buffer so)
  uint32_t *dst = (uint32_t *)(uintptr_t)s.dst;
  const uint8_t *src = (const uint8_t *)(uintptr_t)s.src;
  const uint64_t first = s.dst_bit / 32, last = (s.dst_bit + s.count - 1) / 32;
  for (uint64_t w = first + threadIdx.x; w <= last; w += blockDim.x)
    write_word(dst, w, s.dst_bit, s.count, src, s.src_bit, (int)s.kind);
}

// Copies n bytes with words of type W once src and dst are both W-aligned
// (the caller checked they can be: same alignment mod sizeof(W)).
template <typename W>
__device__ void copy_words(uint8_t *dst, const uint8_t *src, uint64_t n) {
  const uint64_t head = (sizeof(W) - ((uintptr_t)dst & (sizeof(W) - 1))) & (sizeof(W) - 1);
  const uint64_t h = head < n ? head : n;
  for (uint64_t i = threadIdx.x; i < h; i += blockDim.x) dst[i] = src[i];
  const uint64_t words = (n - h) / sizeof(W);
  const W *sw = (const W *)(src + h);
  W *dw = (W *)(dst + h);
  for (uint64_t i = threadIdx.x; i < words; i += blockDim.x) dw[i] = sw[i];
  for (uint64_t i = h + words * sizeof(W) + threadIdx.x; i < n; i += blockDim.x) dst[i] = src[i];
}

// Copies n bytes whose source and destination differ in alignment mod 8
// (string characters land at any byte; callers with a skew of 0 mod 8 use
// copy_words): every thread writes aligned 8-byte
// words of dst, each joined from the two aligned source words it straddles,
// so no thread moves single bytes but at the two ends. Both source words
// hold at least one byte of the range, so no read leaves the aligned words
// that hold it.
__device__ void copy_shifted(uint8_t *dst, const uint8_t *src, uint64_t n) {
  const uint64_t head = (8 - ((uintptr_t)dst & 7)) & 7;
  const uint64_t h = head < n ? head : n;
  for (uint64_t i = threadIdx.x; i < h; i += blockDim.x) dst[i] = src[i];
  const uint64_t words = (n - h) / 8;
  const uint8_t *s = src + h;
  // dst + h is 8-aligned and the caller's skew is not a multiple of 8, so
  // the source is off by r in 1..7
  const unsigned r = (unsigned)((uintptr_t)s & 7);
  uint64_t *dw = (uint64_t *)(dst + h);
  const uint64_t *sa = (const uint64_t *)(s - r);
  const unsigned lo_shift = 8 * r, hi_shift = 64 - 8 * r;
  for (uint64_t i = threadIdx.x; i < words; i += blockDim.x)
    dw[i] = (sa[i] >> lo_shift) | (sa[i + 1] << hi_shift);
  for (uint64_t i = h + words * 8 + threadIdx.x; i < n; i += blockDim.x) dst[i] = src[i];
}

__device__ void run_bytes(const funnel__segment &s) {
  const uint8_t *src = (const uint8_t *)(uintptr_t)s.src;
  uint8_t *dst = (uint8_t *)(uintptr_t)s.dst;
  // the widest word both sides can be aligned to: IPC buffers are 8-aligned
  // in their partition, outputs 64-aligned, so fixed-width data mostly
  // goes by 8 or 16 bytes; string bytes start anywhere
  const uint64_t skew = s.src ^ s.dst;
  if ((skew & 15) == 0) copy_words<uint4>(dst, src, s.count);
  else if ((skew & 7) == 0) copy_words<uint2>(dst, src, s.count);
  else copy_shifted(dst, src, s.count);
}

// T is unsigned: offsets are rebased before the host has checked them (a
// read with a bad one is dropped), so the sum may wrap.
template <typename T>
__device__ void run_offsets(const funnel__segment &s) {
  const uint8_t *src = (const uint8_t *)(uintptr_t)s.src;
  T *dst = (T *)(uintptr_t)s.dst;  // output offsets are aligned
  const T delta = (T)s.value;
  if ((s.src & (sizeof(T) - 1)) == 0) {
    const T *in = (const T *)src;
    for (uint64_t i = threadIdx.x; i < s.count; i += blockDim.x) dst[i] = in[i] + delta;
  } else {
    for (uint64_t i = threadIdx.x; i < s.count; i += blockDim.x) {
      T v = 0;
      for (unsigned k = 0; k < sizeof(T); k++) v |= (T)src[i * sizeof(T) + k] << (8 * k);
      dst[i] = v + delta;
    }
  }
}

}  // namespace

extern "C" __global__ void funnel_concat(const funnel__segment *segments, int64_t count) {
  for (int64_t i = blockIdx.x; i < count; i += gridDim.x) {
    const funnel__segment s = segments[i];
    switch (s.kind) {
      case FUNNEL_SEG_BYTES: run_bytes(s); break;
      case FUNNEL_SEG_BITS:
      case FUNNEL_SEG_ONES:
      case FUNNEL_SEG_ZEROS: run_bits(s); break;
      case FUNNEL_SEG_OFFSETS32: run_offsets<uint32_t>(s); break;
      case FUNNEL_SEG_OFFSETS64: run_offsets<uint64_t>(s); break;
      case FUNNEL_SEG_PUT32:
        if (threadIdx.x == 0) *(int32_t *)(uintptr_t)s.dst = (int32_t)s.value;
        break;
      case FUNNEL_SEG_PUT64:
        if (threadIdx.x == 0) *(int64_t *)(uintptr_t)s.dst = s.value;
        break;
      default: break;
    }
  }
}

// ------------------------------------------------------------ device path
// The stages of dpath.h (launched by cuda_backend.c with the block sizes
// of tuning.h, which the launch bounds repeat): the parse a group of lanes
// a partition (funnel__dp_parse_lanes; its lanes split the loops over bytes
// and rows; a warp walks the flatbuffer in shared memory), the pieces a
// group of m lanes a piece (m from the pieces' mean size), the bits a group
// a word (funnel__dp_bit_lanes), the scan a block an array.

// The flat kernels: dpath.h without its nested code. (Each compilation in
// a namespace of its own: a call on the flatbuffer reader's types would
// otherwise find both by argument-dependent lookup.)
#include <stdbool.h>

#include "flatbuf.h" /* dpath.h's headers, at file scope: both compilations use them */
#include "tuning.h"
extern "C" {
#include "zstddec.h"
#include "lz4dec.h" /* dpath.h's too (a compressed read's jobs), and the decoder's below */
}
#define FUNNEL_DP_FLAT_ONLY
namespace flat {
#include "dpath.h"
#define DPK(name) name
#include "dpath_kernels.cuh"
#undef DPK
}  // namespace flat
#undef FUNNEL_DP_FLAT_ONLY

// The nested kernels: dpath.h again, in a namespace of its own, its nested
// code in (a read with nested columns launches these: FUNNEL_DP_STAGE_NESTED).
#undef FUNNEL_DPATH_H
namespace nested {
#include "dpath.h"
#define DPK(name) name##_nested
#include "dpath_kernels.cuh"
#undef DPK
}  // namespace nested

// --------------------------------------------------------- LZ4 decoding
// The buffers a read leaves to the device to decode (lz4dec.h, included
// above): two warps a buffer, a block of them (funnel__lz4_block_pair: one
// walks a round while the other writes the one before), the blocks
// striding over the jobs; thread 0 writes the status. At most 64
// registers, FUNNEL_LZ4_PAIR_BLOCKS blocks an SM: the 2,000 jobs of a read
// of 200x10 buffers at once. Against session 50's decoder (a warp a job,
// 14 blocks of two an SM), large reads of the mixed columns took 0.94 of
// the time in Arrow Java's frames, 0.98 to 0.99 in lz4-java's, those of
// strings 0.97 pinned and 1.04 pageable (bench/RESULTS.md, session 51).
// `gate`: the args of the pass the decoding belongs to when it is gated
// (dpath.h, funnel__dp_shut), else null.

// A job of frames goes in `ways` ways (funnel__lz4_frames_way: a frame of
// independent blocks, its blocks shared by `ways` blocks of two warps,
// each writing the worst status of its own to the job's), so that a read
// of few long buffers fills more of the device (cuda_backend.c picks the
// ways from the jobs and the SMs).

extern "C" __global__ void __launch_bounds__(64, FUNNEL_LZ4_PAIR_BLOCKS)
    funnel_lz4_decode(funnel__lz4_job *jobs, int64_t n, uint64_t base,
                      const flat::funnel__dp_args *gate, unsigned ways) {
  __shared__ funnel__lz4_pair pair;
  // a gated pass's (dpath.h): nothing when its gate is shut
  if (gate != nullptr && flat::funnel__dp_shut(gate)) return;
  const unsigned lane = threadIdx.x & 31, warp = threadIdx.x / 32;
  for (int64_t w = blockIdx.x; w < n * (int64_t)ways; w += gridDim.x) {
    const int64_t j = w / ways;
    const funnel__lz4_job job = jobs[j];
    const int st = funnel__lz4_job_run(&job, base, (unsigned)(w % ways), ways, lane, 64, warp,
                                       nullptr, &pair);
    // the ways' worst (a job of frames starts at -1, below every status; a
    // job relaunched whole after its parts' launches, dread.c, keeps what
    // they wrote, of the same decoding, and only OK is read)
    if (threadIdx.x == 0 && st >= 0) {
      if (ways == 1) jobs[j].status = st;
      else atomicMax((long long *)&jobs[j].status, (long long)st);
    }
    __syncthreads(); // (the pair's scratch is the next job's)
  }
}

// ------------------------------------------------------- ZSTD decoding
// A list of jobs with ZSTD ones among them (zstddec.h): a warp a buffer,
// one a block (its tables and a batch of sequences, about 12 KiB of
// shared memory: 16 blocks an SM, at most 128 registers), the warps
// striding over the jobs; its LZ4 ones too, as funnel_lz4_decode runs them
// (the scratch is either's), so that a read decodes in one launch. `gate`
// as funnel_lz4_decode's.

extern "C" __global__ void __launch_bounds__(32, 16)
    funnel_zstd_decode(funnel__lz4_job *jobs, int64_t n, uint64_t base,
                       const flat::funnel__dp_args *gate) {
  __shared__ union {
    funnel__zstd_scratch z;
    funnel__lz4_scratch l;
  } scratch;
  if (gate != nullptr && flat::funnel__dp_shut(gate)) return;
  const unsigned lane = threadIdx.x & 31;
  for (int64_t j = blockIdx.x; j < n; j += gridDim.x) {
    const funnel__lz4_job job = jobs[j];
    const int st = job.kind == FUNNEL__ZSTD_FRAMES
                       ? funnel__zstd_job_run(&job, base, lane, 32, &scratch.z)
                       : funnel__lz4_job_run(&job, base, 0, 1, lane, 32, 0, &scratch.l, nullptr);
    if (lane == 0 && st >= 0) jobs[j].status = st;
    __syncwarp();
  }
}
