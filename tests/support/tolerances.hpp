// The one table of test tolerances (DESIGN.md §7). Every comparison in tests/ takes its
// bound from here, with the reason it is what it is. A bound is never loosened to pass.
#pragma once

namespace nlb::test::tol {

// ---- core / kernels: SIMD against the scalar reference, per element ----------------
// xsimd's exp/tanh/erf are within a few ulp of std::; a row kernel adds O(n) rounding
// in its reductions (mean, variance, sum of exponentials) where the SIMD lanes sum in
// a different order. Bound: mixed |a-b| <= abs + rel*|b|.
inline constexpr double kernel_float_rel = 2e-6;   // ~16 ulp of float
inline constexpr double kernel_float_abs = 1e-6;
inline constexpr double kernel_double_rel = 1e-13;  // ~500 ulp of double, reductions up to 4*8+3
inline constexpr double kernel_double_abs = 1e-14;
// math::fast tanh approximation, relative to the exact GELU (documented in kernels.md).
inline constexpr double gelu_fast_rel = 1e-4;
inline constexpr double gelu_fast_abs = 1e-5;

// ---- ridge (PAPERS.md §A1), double --------------------------------------------------
// fit (eigendecomposition of the Gram matrix) vs fit_svd (SVD of the data) with
// cond(X) ~ 1e6: both are backward stable; the difference is bounded by ~cond * eps
// relative to ||W|| for this lambda. Issue #2 fixes it at 1e-8.
inline constexpr double ridge_fit_vs_svd_rel = 1e-8;
// Recovering an exact affine map from noise-free data with tiny lambda (bias of O(lambda)).
inline constexpr double ridge_exact_map_abs = 1e-10;
// Pairwise merge of shards vs one pass: only summation order differs.
inline constexpr double ridge_merge_rel = 1e-12;

// ---- hyperplane gate (PAPERS.md §A3) -------------------------------------------------
// Gradient of the regularized logistic objective at the solution.
inline constexpr double gate_gradient_abs = 1e-6;

// ---- MLP and GatedMLP ----------------------------------------------------------------
// Same arithmetic in a different order (blocked GEMM on a gathered block vs the whole
// batch; fixed vs Dynamic instantiations pick different GEMM kernels): float rounding of
// length-4d dot products, relative to the output scale.
inline constexpr double mlp_float_rel = 1e-5;
inline constexpr double mlp_double_rel = 1e-12;

// ---- FLOP accounting ------------------------------------------------------------------
// Closed forms evaluated in a different order: a few double roundings.
inline constexpr double flops_rel = 1e-14;

}  // namespace nlb::test::tol
