// Products of a float row vector with 16-bit weights (HalfMatrix, nlb/core/half_matrix.hpp),
// widened to float in registers and accumulated in float: batch-1 decoding reads each weight
// once per token, so reading 2 bytes instead of 4 is what makes it faster (the memory bound).
//
//   half_vecmat:            y[j] (+)= Σ_i x[i] · w[i·ldw + j]   (x · W,  W [k, n] row-major)
//   half_vecmat_transposed: y[j] (+)= Σ_i x[i] · w[j·ldw + i]   (x · Wᵀ, W [n, k] row-major)
//   widen:                  dst[i] = float(src[i])              (exact)
//
// The scalar overloads are the reference: one float sum per output in the order i = 0, 1, ….
// The SIMD overloads widen W lanes at a time — F16 with the F16C / AVX-512 conversion
// instruction, BF16 by a 16-bit shift into the top half of a float (bfloat16 is that top half) —
// and fall back to Eigen's per-value conversion on instruction sets without them. x · W keeps a
// block of 8 batches of outputs in registers and streams W's rows through it; x · Wᵀ takes four
// rows of W at a time as dot products. Sums are in another order than the scalar overloads'
// (lanes, then a horizontal sum), so results agree to the float summation bound.
// Cost: 2·k·n FLOPs, 2·k·n bytes of weights read.
#pragma once

// First, so xsimd is included under the GCC 12 diagnostic guard (detail/xsimd_include.hpp).
#include "nlb/core/detail/xsimd_include.hpp"

#if defined(__AVX2__) || defined(__AVX512F__)
#include <immintrin.h>
#endif

#include "nlb/core.hpp"
#include "nlb/kernels/detail/row_checks.hpp"
#include "nlb/kernels/detail/simd_row.hpp"

NLB_XSIMD_GUARD_BEGIN

namespace nlb::kernels {

namespace detail {

// W consecutive 16-bit values at p widened to a float batch.
template <class Arch, class H>
xsimd::batch<float, Arch> load_widened(const H* p) {
  using batch = xsimd::batch<float, Arch>;
  static_assert(sizeof(H) == 2, "load_widened: a 16-bit float type");
  if constexpr (batch::size == 16) {
#if defined(__AVX512F__)
    const __m256i bits = _mm256_loadu_si256(reinterpret_cast<const __m256i*>(p));
    if constexpr (std::is_same_v<H, Eigen::half>)
      return batch(_mm512_cvtph_ps(bits));
    else
      return batch(_mm512_castsi512_ps(_mm512_slli_epi32(_mm512_cvtepu16_epi32(bits), 16)));
#endif
  } else if constexpr (batch::size == 8) {
#if defined(__AVX2__) && defined(__F16C__)
    const __m128i bits = _mm_loadu_si128(reinterpret_cast<const __m128i*>(p));
    if constexpr (std::is_same_v<H, Eigen::half>)
      return batch(_mm256_cvtph_ps(bits));
    else
      return batch(_mm256_castsi256_ps(_mm256_slli_epi32(_mm256_cvtepu16_epi32(bits), 16)));
#endif
  }
  alignas(Arch::alignment()) float values[batch::size];
  for (std::size_t i = 0; i < batch::size; ++i)
    values[i] = static_cast<float>(p[i]);
  return batch::load_aligned(values);
}

inline void check_product(const char* what, Index k, Index n, Index ldw, Index min_ldw) {
  check_row_length(what, k, 0);
  check_row_length(what, n, 0);
  check_row_length(what, ldw, min_ldw);
}

// Rows ahead of the current one whose block the x · W loop asks the cache for: the rows of a
// block are ldw apart, a stride the hardware prefetchers do not follow across pages.
inline constexpr Index vecmat_prefetch_rows = 8;

}  // namespace detail

/// dst[0, n) = float(src[0, n)), exact. Scalar reference. O(n).
template <class H>
void widen(backend::scalar, const H* src, float* dst, Index n) {
  detail::check_row_length("widen: n", n, 0);
  for (Index i = 0; i < n; ++i)
    dst[i] = static_cast<float>(src[i]);
}

/// dst[0, n) = float(src[0, n)), W values per conversion instruction. O(n).
template <class H, class Arch, class Gemm>
void widen(backend::simd<Arch, Gemm>, const H* src, float* dst, Index n) {
  detail::check_row_length("widen: n", n, 0);
  constexpr Index width = detail::batch_width<float, Arch>;
  Index i = 0;
  for (; i + width <= n; i += width)
    detail::load_widened<Arch>(src + i).store_unaligned(dst + i);
  for (; i < n; ++i)
    dst[i] = static_cast<float>(src[i]);
}

/// y[0, n) (+ with `accumulate`)= x[0, k) · W, W [k, ≥ n] row-major with row stride ldw ≥ n.
/// Scalar reference: each y[j] one float sum over i = 0 … k−1. O(k·n).
/// Throws ArgumentError for negative sizes or ldw < n.
template <class H>
void half_vecmat(backend::scalar, const float* x, const H* w, Index k, Index ldw, float* y, Index n,
                 bool accumulate) {
  detail::check_product("half_vecmat: k, n, ldw", k, n, ldw, n);
  for (Index j = 0; j < n; ++j) {
    float sum = accumulate ? y[j] : 0.0f;
    for (Index i = 0; i < k; ++i)
      sum += x[i] * static_cast<float>(w[i * ldw + j]);
    y[j] = sum;
  }
}

/// y[0, n) (+ with `accumulate`)= x[0, k) · W with W widened in registers: blocks of 8·W
/// outputs held in registers while W's k rows stream through. O(k·n).
template <class H, class Arch, class Gemm>
void half_vecmat(backend::simd<Arch, Gemm>, const float* x, const H* w, Index k, Index ldw,
                 float* y, Index n, bool accumulate) {
  detail::check_product("half_vecmat: k, n, ldw", k, n, ldw, n);
  using batch = xsimd::batch<float, Arch>;
  constexpr Index width = detail::batch_width<float, Arch>;
  constexpr Index unroll = 8, block = unroll * width;
  constexpr Index ahead = detail::vecmat_prefetch_rows;
  constexpr Index line = 64 / sizeof(H);  // values per cache line
  Index j = 0;
  for (; j + block <= n; j += block) {
    batch acc[unroll];
    for (Index u = 0; u < unroll; ++u)
      acc[u] = accumulate ? batch::load_unaligned(y + j + u * width) : batch(0.0f);
    for (Index i = 0; i < k; ++i) {
      const H* row = w + i * ldw + j;
      if (i + ahead < k) {
        for (Index c = 0; c < block; c += line)
          __builtin_prefetch(row + ahead * ldw + c);
      }
      const batch xi(x[i]);
      for (Index u = 0; u < unroll; ++u)
        acc[u] = xsimd::fma(xi, detail::load_widened<Arch>(row + u * width), acc[u]);
    }
    for (Index u = 0; u < unroll; ++u)
      acc[u].store_unaligned(y + j + u * width);
  }
  for (; j + width <= n; j += width) {
    batch acc = accumulate ? batch::load_unaligned(y + j) : batch(0.0f);
    for (Index i = 0; i < k; ++i)
      acc = xsimd::fma(batch(x[i]), detail::load_widened<Arch>(w + i * ldw + j), acc);
    acc.store_unaligned(y + j);
  }
  if (j < n)
    half_vecmat(backend::scalar{}, x, w + j, k, ldw, y + j, n - j, accumulate);
}

/// y[0, n) (+ with `accumulate`)= x[0, k) · Wᵀ, W [n, ≥ k] row-major with row stride ldw ≥ k:
/// y[j] is the dot product of x with row j. Scalar reference. O(k·n).
/// Throws ArgumentError for negative sizes or ldw < k.
template <class H>
void half_vecmat_transposed(backend::scalar, const float* x, const H* w, Index k, Index ldw,
                            float* y, Index n, bool accumulate) {
  detail::check_product("half_vecmat_transposed: k, n, ldw", k, n, ldw, k);
  for (Index j = 0; j < n; ++j) {
    float sum = 0.0f;
    const H* row = w + j * ldw;
    for (Index i = 0; i < k; ++i)
      sum += x[i] * static_cast<float>(row[i]);
    y[j] = accumulate ? y[j] + sum : sum;
  }
}

/// y[0, n) (+ with `accumulate`)= x[0, k) · Wᵀ with W widened in registers: four rows' dot
/// products at a time, each over W lanes, then one horizontal sum per row. O(k·n).
template <class H, class Arch, class Gemm>
void half_vecmat_transposed(backend::simd<Arch, Gemm>, const float* x, const H* w, Index k,
                            Index ldw, float* y, Index n, bool accumulate) {
  detail::check_product("half_vecmat_transposed: k, n, ldw", k, n, ldw, k);
  using batch = xsimd::batch<float, Arch>;
  constexpr Index width = detail::batch_width<float, Arch>;
  constexpr Index rows = 4;
  const Index k_full = k / width * width;
  auto finish = [&](Index j, const batch& acc) {
    float sum = detail::reduce_sum<Arch>(acc);
    for (Index i = k_full; i < k; ++i)
      sum += x[i] * static_cast<float>(w[j * ldw + i]);
    y[j] = accumulate ? y[j] + sum : sum;
  };
  Index j = 0;
  for (; j + rows <= n; j += rows) {
    batch acc[rows] = {batch(0.0f), batch(0.0f), batch(0.0f), batch(0.0f)};
    for (Index i = 0; i < k_full; i += width) {
      const batch xi = batch::load_unaligned(x + i);
      for (Index r = 0; r < rows; ++r)
        acc[r] = xsimd::fma(xi, detail::load_widened<Arch>(w + (j + r) * ldw + i), acc[r]);
    }
    for (Index r = 0; r < rows; ++r)
      finish(j + r, acc[r]);
  }
  for (; j < n; ++j) {
    batch acc(0.0f);
    for (Index i = 0; i < k_full; i += width)
      acc = xsimd::fma(batch::load_unaligned(x + i), detail::load_widened<Arch>(w + j * ldw + i),
                       acc);
    finish(j, acc);
  }
}

}  // namespace nlb::kernels

NLB_XSIMD_GUARD_END
