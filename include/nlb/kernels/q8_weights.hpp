// Products of a float row vector with 8-bit weights in blocks (Q8Matrix,
// nlb/core/q8_matrix.hpp), widened to float in registers and accumulated in float: batch-1
// decoding reads each weight once per token, so one byte (plus a float scale per q8_block values)
// instead of four is what makes it faster.
//
// The weights are given as pointers into a Q8Matrix: q at the first value of a block (a column
// that is a multiple of q8_block), ldq the 8-bit values' row stride, scales at that block's scale
// and lds the scales' row stride (blocks per row). s(i, j) is the scale of value (i, j): the
// scale of column j's block in row i, counted from the pointers.
//
//   q8_vecmat:            y[j] (+)= Σ_i x[i] · s(i, j) · q[i·ldq + j]       (x · W,  W [k, n])
//   q8_vecmat_transposed: y[j] (+)= Σ_b s(j, b) · Σ_{i ∈ b} x[i] · q[j·ldq + i]  (x · Wᵀ, W [n, k])
//   q8_dequantize:        dst[i] = s(0, i) · q[i]                           (exact)
//
// The scalar overloads are the reference (one float sum per output, in order). The SIMD overloads
// widen W lanes at a time (AVX-512 / AVX2 / SSE4.1 sign extension and conversion; value by value
// elsewhere). x · W streams vecmat_rows rows of W side by side into float
// sums held in the L1 cache, one factor x[i] · s per block of each row; x · Wᵀ takes
// transposed_rows rows at a time, one partial dot product per block scaled into lane sums, then
// one horizontal sum per row (another order than the scalar overload's, so results agree with
// it to the float summation bound). Cost: 2·k·n FLOPs, k·n bytes of weights and 4·k·n / q8_block
// bytes of scales read.
#pragma once

// First, so xsimd is included under the GCC 12 diagnostic guard (nlb/core/xsimd.hpp).
#include "nlb/core/xsimd.hpp"

#include <algorithm>
#include <cstdint>
#include <cstring>

#if defined(__SSE4_1__) || defined(__AVX2__) || defined(__AVX512F__)
#include <immintrin.h>
#endif

#include "nlb/core.hpp"
#include "nlb/core/q8_matrix.hpp"
#include "nlb/kernels/detail/row_checks.hpp"
#include "nlb/kernels/detail/simd_row.hpp"
#include "nlb/kernels/detail/unroll.hpp"
#include "nlb/kernels/half_weights.hpp"

NLB_XSIMD_GUARD_BEGIN

namespace nlb::kernels {

namespace detail {

// W consecutive 8-bit integers at p converted to a float batch (exact).
template <class Arch>
xsimd::batch<float, Arch> load_q8(const std::int8_t* p) {
  using batch = xsimd::batch<float, Arch>;
  if constexpr (batch::size == 16) {
#if defined(__AVX512F__)
    const __m128i bytes = _mm_loadu_si128(reinterpret_cast<const __m128i*>(p));
    return batch(_mm512_cvtepi32_ps(_mm512_cvtepi8_epi32(bytes)));
#endif
  } else if constexpr (batch::size == 8) {
#if defined(__AVX2__)
    const __m128i bytes = _mm_loadl_epi64(reinterpret_cast<const __m128i*>(p));
    return batch(_mm256_cvtepi32_ps(_mm256_cvtepi8_epi32(bytes)));
#endif
  } else if constexpr (batch::size == 4) {
#if defined(__SSE4_1__)
    std::int32_t four;
    std::memcpy(&four, p, sizeof four);
    return batch(_mm_cvtepi32_ps(_mm_cvtepi8_epi32(_mm_cvtsi32_si128(four))));
#endif
  }
  alignas(Arch::alignment()) float values[batch::size];
  for (std::size_t i = 0; i < batch::size; ++i)
    values[i] = static_cast<float>(p[i]);
  return batch::load_aligned(values);
}

inline void check_q8_product(const char* what, Index k, Index n, Index ldq, Index lds,
                             Index row_length) {
  check_product(what, k, n, ldq, row_length);
  check_row_length(what, lds, (row_length + q8_block - 1) / q8_block);
}

// y[0, columns) += x[i0 … i0 + R) · W over R rows of W side by side (q, scales at row i0): full
// blocks lanes at a time with one factor x · s per row and block, the shorter last block value by
// value. Each block read asks for the same block of the next group's row: a row's part of a chunk
// is a short stream (≤ 4 KiB of 8-bit values) that the hardware prefetcher has no time to learn
// (measured on GPT-2 small, one thread: 61.8 → 80.4 tokens/s; two groups ahead, 70).
template <Index R, class Arch>
void q8_vecmat_rows(const float* x, const std::int8_t* q, const float* scales, Index ldq, Index lds,
                    float* out, Index columns) {
  using batch = xsimd::batch<float, Arch>;
  constexpr Index width = batch_width<float, Arch>;
  constexpr Index lanes = q8_block / width;
  static_assert(q8_block % width == 0, "q8 kernels: a block is whole batches");
  const Index full_blocks = columns / q8_block;
  for (Index b = 0; b < full_blocks; ++b) {
    float* o = out + b * q8_block;
    batch acc[lanes];
    for (Index l = 0; l < lanes; ++l)
      acc[l] = batch::load_unaligned(o + l * width);
    NLB_UNROLL_LOOP
    for (Index r = 0; r < R; ++r) {
      const batch factor(x[r] * scales[r * lds + b]);
      const std::int8_t* values = q + r * ldq + b * q8_block;
      __builtin_prefetch(values + R * ldq);  // the same block of the next group's row r
      for (Index l = 0; l < lanes; ++l)
        acc[l] = xsimd::fma(factor, load_q8<Arch>(values + l * width), acc[l]);
    }
    for (Index l = 0; l < lanes; ++l)
      acc[l].store_unaligned(o + l * width);
  }
  for (Index j = full_blocks * q8_block; j < columns; ++j)
    for (Index r = 0; r < R; ++r)
      out[j] += x[r] * scales[r * lds + full_blocks] * static_cast<float>(q[r * ldq + j]);
}

// The dot products of x [k] with R rows of W (q, scales at row j0) into sums[0, R), each block
// read asking for the same block of the next group's row (the unembedding's rows are 768 bytes:
// a distance along the row would fall in rows this group reads anyway).
template <Index R, class Arch>
void q8_dot_rows(const float* x, const std::int8_t* q, const float* scales, Index k, Index ldq,
                 Index lds, float* sums) {
  using batch = xsimd::batch<float, Arch>;
  constexpr Index width = batch_width<float, Arch>;
  constexpr Index lanes = q8_block / width;
  const Index full_blocks = k / q8_block;
  batch acc[R];
  for (Index r = 0; r < R; ++r)
    acc[r] = batch(0.0f);
  for (Index b = 0; b < full_blocks; ++b) {
    const Index i = b * q8_block;
    batch xs[lanes];
    for (Index l = 0; l < lanes; ++l)
      xs[l] = batch::load_unaligned(x + i + l * width);
    NLB_UNROLL_LOOP
    for (Index r = 0; r < R; ++r) {
      const std::int8_t* values = q + r * ldq + i;
      __builtin_prefetch(values + R * ldq);  // the same block of the next group's row r
      batch block = xs[0] * load_q8<Arch>(values);
      for (Index l = 1; l < lanes; ++l)
        block = xsimd::fma(xs[l], load_q8<Arch>(values + l * width), block);
      acc[r] = xsimd::fma(block, batch(scales[r * lds + b]), acc[r]);
    }
  }
  for (Index r = 0; r < R; ++r) {
    float partial = 0.0f;
    for (Index i = full_blocks * q8_block; i < k; ++i)
      partial += x[i] * static_cast<float>(q[r * ldq + i]);
    sums[r] = reduce_sum<Arch>(acc[r]) +
              (full_blocks * q8_block < k ? scales[r * lds + full_blocks] * partial : 0.0f);
  }
}

}  // namespace detail

/// dst[0, n) = s · q[0, n) (q at the first value of a block, scales its scale): a row or part of
/// a row of a Q8Matrix in float, exact. Scalar reference. O(n).
inline void q8_dequantize(backend::scalar, const std::int8_t* q, const float* scales, float* dst,
                          Index n) {
  detail::check_row_length("q8_dequantize: n", n, 0);
  for (Index i = 0; i < n; ++i)
    dst[i] = scales[i / q8_block] * static_cast<float>(q[i]);
}

/// dst[0, n) = s · q[0, n), W values at a time. O(n).
template <class Arch, class Gemm>
void q8_dequantize(backend::simd<Arch, Gemm>, const std::int8_t* q, const float* scales, float* dst,
                   Index n) {
  detail::check_row_length("q8_dequantize: n", n, 0);
  using batch = xsimd::batch<float, Arch>;
  constexpr Index width = detail::batch_width<float, Arch>;
  const Index full = n / width * width;
  for (Index i = 0; i < full; i += width)
    (batch(scales[i / q8_block]) * detail::load_q8<Arch>(q + i)).store_unaligned(dst + i);
  for (Index i = full; i < n; ++i)
    dst[i] = scales[i / q8_block] * static_cast<float>(q[i]);
}

/// y[0, n) (+ with `accumulate`)= x[0, k) · W for W [k, ≥ n] in 8-bit blocks (q, scales, strides
/// ldq ≥ n and lds ≥ ⌈n / q8_block⌉ as in the file comment). Scalar reference: each y[j] one
/// float sum over i = 0 … k−1 of (x[i] · s) · q. O(k·n). Throws ArgumentError for negative sizes
/// or short strides.
inline void q8_vecmat(backend::scalar, const float* x, const std::int8_t* q, const float* scales,
                      Index k, Index ldq, Index lds, float* y, Index n, bool accumulate) {
  detail::check_q8_product("q8_vecmat: k, n, ldq, lds", k, n, ldq, lds, n);
  for (Index j = 0; j < n; ++j) {
    float sum = accumulate ? y[j] : 0.0f;
    for (Index i = 0; i < k; ++i)
      sum += x[i] * scales[i * lds + j / q8_block] * static_cast<float>(q[i * ldq + j]);
    y[j] = sum;
  }
}

/// y[0, n) (+ with `accumulate`)= x[0, k) · W with W widened in registers: vecmat_rows rows side
/// by side (sequential streams, as the 16-bit kernel), columns in chunks of vecmat_chunk float
/// sums that stay in the L1 cache; each y[j] is one sum over i in order (with FMA). O(k·n).
template <class Arch, class Gemm>
void q8_vecmat(backend::simd<Arch, Gemm>, const float* x, const std::int8_t* q, const float* scales,
               Index k, Index ldq, Index lds, float* y, Index n, bool accumulate) {
  detail::check_q8_product("q8_vecmat: k, n, ldq, lds", k, n, ldq, lds, n);
  constexpr Index rows = detail::vecmat_rows;
  static_assert(detail::vecmat_chunk % q8_block == 0, "q8_vecmat: chunks of whole blocks");
  for (Index j0 = 0; j0 < n; j0 += detail::vecmat_chunk) {
    const Index columns = std::min(detail::vecmat_chunk, n - j0);
    float* out = y + j0;
    if (!accumulate)
      std::fill(out, out + columns, 0.0f);
    const std::int8_t* q0 = q + j0;
    const float* s0 = scales + j0 / q8_block;
    Index i = 0;
    for (; i + rows <= k; i += rows)
      detail::q8_vecmat_rows<rows, Arch>(x + i, q0 + i * ldq, s0 + i * lds, ldq, lds, out, columns);
    for (; i < k; ++i)
      detail::q8_vecmat_rows<1, Arch>(x + i, q0 + i * ldq, s0 + i * lds, ldq, lds, out, columns);
  }
}

/// y[0, n) (+ with `accumulate`)= x[0, k) · Wᵀ for W [n, ≥ k] in 8-bit blocks (strides ldq ≥ k,
/// lds ≥ ⌈k / q8_block⌉): y[j] is the dot product of x with row j, each block's partial sum
/// times its scale. Scalar reference. O(k·n). Throws ArgumentError as q8_vecmat.
inline void q8_vecmat_transposed(backend::scalar, const float* x, const std::int8_t* q,
                                 const float* scales, Index k, Index ldq, Index lds, float* y,
                                 Index n, bool accumulate) {
  detail::check_q8_product("q8_vecmat_transposed: k, n, ldq, lds", k, n, ldq, lds, k);
  for (Index j = 0; j < n; ++j) {
    float sum = 0.0f;
    for (Index b = 0; b * q8_block < k; ++b) {
      float partial = 0.0f;
      for (Index i = b * q8_block; i < std::min(k, (b + 1) * q8_block); ++i)
        partial += x[i] * static_cast<float>(q[j * ldq + i]);
      sum += scales[j * lds + b] * partial;
    }
    y[j] = accumulate ? y[j] + sum : sum;
  }
}

/// y[0, n) (+ with `accumulate`)= x[0, k) · Wᵀ with W widened in registers: transposed_rows rows'
/// dot products at a time, each block's partial product scaled into the row's lane sums, then
/// one horizontal sum per row. O(k·n).
template <class Arch, class Gemm>
void q8_vecmat_transposed(backend::simd<Arch, Gemm>, const float* x, const std::int8_t* q,
                          const float* scales, Index k, Index ldq, Index lds, float* y, Index n,
                          bool accumulate) {
  detail::check_q8_product("q8_vecmat_transposed: k, n, ldq, lds", k, n, ldq, lds, k);
  constexpr Index rows = detail::transposed_rows;
  float sums[rows];
  const auto store = [&](Index j, Index count) {
    for (Index r = 0; r < count; ++r)
      y[j + r] = accumulate ? y[j + r] + sums[r] : sums[r];
  };
  Index j = 0;
  for (; j + rows <= n; j += rows) {
    detail::q8_dot_rows<rows, Arch>(x, q + j * ldq, scales + j * lds, k, ldq, lds, sums);
    store(j, rows);
  }
  for (; j < n; ++j) {
    detail::q8_dot_rows<1, Arch>(x, q + j * ldq, scales + j * lds, k, ldq, lds, sums);
    store(j, 1);
  }
}

}  // namespace nlb::kernels

NLB_XSIMD_GUARD_END
