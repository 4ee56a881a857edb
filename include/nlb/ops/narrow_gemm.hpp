// Matrix products with 16-bit weights (HalfMatrix: storage::f16 / storage::bf16, DESIGN.md §4),
// the overloads of ops::gemm / ops::gemm_bias that components with half-precision weights call.
//
// - One-row products (batch-1 decoding, memory-bound): the kernels of
//   nlb/kernels/half_weights.hpp read each 16-bit weight once and widen it in registers, split by
//   output entries over the context's threads like the float vector products.
// - Larger products (prefill, compute-bound): the weights are widened panel by panel into the
//   scratch (a block of columns of W, or of rows of Wᵀ, of about widened_panel_values floats)
//   and each panel is multiplied by Backend's float GEMM provider. The widening runs on the
//   calling thread (OpenMP threads that wait spinning would take the cores from the provider's
//   own threads) and costs O(k·n) per product against the product's O(m·k·n).
// Activations and accumulation are float: the weights' rounding to 16 bits is the only change
// against the float model (the tolerance table bounds the logits' difference).
#pragma once

#include <algorithm>
#include <type_traits>
#include <utility>

#include "nlb/core/half_matrix.hpp"
#include "nlb/kernels/half_weights.hpp"
#include "nlb/ops/gemm.hpp"

namespace nlb::ops {

namespace detail {

/// Floats in one widened panel of a prefill product: 8 MiB, most of a GPT-2-small matrix. Few
/// wide panels keep the provider's threads busy; panels of an L2's size (2^18 floats) cost
/// 14–40% more time on 2 threads at T = 128 (docs/benchmarks.md).
inline constexpr Index widened_panel_values = Index{1} << 21;

// Columns per panel for a product with k-long columns: a multiple of 64, at least 64.
inline Index widened_panel_width(Index k, Index n) {
  const Index fit = widened_panel_values / std::max<Index>(k, 1) / 64 * 64;
  return std::min(n, std::max<Index>(64, fit));
}

template <class Lhs, class Dst>
void check_half_product(const Lhs& lhs, Index k, Index n, const Dst& dst) {
  static_assert(std::is_same_v<typename Lhs::Scalar, float>,
                "ops::gemm with 16-bit weights: the activations are float");
  eigen_assert(lhs.cols() == k && dst.rows() == lhs.rows() && dst.cols() == n);
  (void)lhs, (void)k, (void)n, (void)dst;
}

/// The prefill path's widening, on its own: the columns of w [k, n] (Transposed = false), or the
/// rows of w [n, k] (true), widened panel by panel into `scratch.widened`, and for each panel
/// on_panel(j, panel) with j its first output column and panel the float [k, cols] block (or
/// [cols, k]). Every weight is widened once, on the calling thread. O(k·n).
template <bool Transposed, class Backend, class H, class OnPanel>
void for_each_widened_panel(Backend backend, const HalfMatrix<H>& w, GemmScratch<float>& scratch,
                            OnPanel&& on_panel) {
  const Index k = Transposed ? w.cols() : w.rows(), n = Transposed ? w.rows() : w.cols();
  const Index width = widened_panel_width(k, n);
  if (scratch.widened.size() < static_cast<std::size_t>(k * width))
    scratch.widened.resize(static_cast<std::size_t>(k * width));
  for (Index j = 0; j < n; j += width) {
    const Index cols = std::min(width, n - j);
    if constexpr (Transposed) {
      Eigen::Map<RowMatrix<float>> panel(scratch.widened.data(), cols, k);  // [cols, k]
      kernels::widen(backend, w.row(j), panel.data(), cols * k);
      on_panel(j, panel);
    } else {
      Eigen::Map<RowMatrix<float>> panel(scratch.widened.data(), k, cols);  // [k, cols]
      for (Index i = 0; i < k; ++i)
        kernels::widen(backend, w.row(i) + j, panel.row(i).data(), cols);
      on_panel(j, panel);
    }
  }
}

// dst (+)= lhs · w (Transposed = false; w [k, n]) or lhs · wᵀ (true; w [n, k]): one row through
// the row kernels, split by output entries over threads; more rows by widened panels of
// columns of w (or rows, transposed) and the float provider.
template <bool Transposed, class Backend, class Dst, class Lhs, class H>
void half_product(const Context<Backend>& ctx, Dst&& dst, const Lhs& lhs, const HalfMatrix<H>& w,
                  GemmScratch<float>& scratch, bool accumulate) {
  const Backend backend;
  const Index k = Transposed ? w.cols() : w.rows(), n = Transposed ? w.rows() : w.cols();
  check_half_product(lhs, k, n, dst);
  if (lhs.rows() == 1) {
    const Eigen::Ref<const RowVector<float>> x = lhs.row(0);  // [1, k]
    Eigen::Ref<RowVector<float>> y = dst.row(0);              // [1, n]
    const auto run = [&](Index begin, Index end) {
      if constexpr (Transposed)
        kernels::half_vecmat_transposed(backend, x.data(), w.row(begin), k, k, y.data() + begin,
                                        end - begin, accumulate);
      else
        kernels::half_vecmat(backend, x.data(), w.data() + begin, k, n, y.data() + begin,
                             end - begin, accumulate);
    };
    if (!split_output_ranges(ctx.threads(), n, k * n, 16, run))
      run(0, n);
    return;
  }
  for_each_widened_panel<Transposed>(backend, w, scratch, [&](Index j, const auto& panel) {
    if constexpr (Transposed)
      ops::gemm(ctx, lhs, panel.transpose(), dst.middleCols(j, panel.rows()), scratch, accumulate);
    else
      ops::gemm(ctx, lhs, panel, dst.middleCols(j, panel.cols()), scratch, accumulate);
  });
}

}  // namespace detail

/// dst (+ with `accumulate`)= lhs · rhs for 16-bit weights rhs [k, n]; lhs [m, k] and dst
/// [m, n] float (dst must not alias lhs). m = 1: rhs read once, widened in registers; m > 1:
/// panels widened into `scratch` and multiplied by the backend's GEMM provider. Cost 2·m·k·n
/// flops.
template <class Backend, class Lhs, class H, class Dst>
requires backend::is_host<Backend>
void gemm(const Context<Backend>& ctx, const Eigen::MatrixBase<Lhs>& lhs, const HalfMatrix<H>& rhs,
          Dst&& dst, GemmScratch<float>& scratch, bool accumulate = false) {
  detail::half_product<false>(ctx, dst, lhs.derived(), rhs, scratch, accumulate);
}

/// dst (+ with `accumulate`)= lhs · rhsᵀ for 16-bit weights rhs [n, k] (`w.transpose()`), e.g.
/// the logits of tied embeddings. m = 1: one dot product per row of rhs; m > 1: rows of rhs
/// widened panel by panel. Shapes and cost as above.
template <class Backend, class Lhs, class H, class Dst>
requires backend::is_host<Backend>
void gemm(const Context<Backend>& ctx, const Eigen::MatrixBase<Lhs>& lhs,
          const HalfTransposed<H>& rhs, Dst&& dst, GemmScratch<float>& scratch,
          bool accumulate = false) {
  detail::half_product<true>(ctx, dst, lhs.derived(), rhs.matrix, scratch, accumulate);
}

/// dst (+)= lhs · rhsᵀ for 16-bit weights rhs [n, k] (ops::gemm_nt with a HalfMatrix: the tied
/// unembedding of a model with 16-bit weights). Shapes and cost as gemm.
template <class Backend, class Lhs, class H, class Dst>
requires backend::is_host<Backend>
void gemm_nt(const Context<Backend>& ctx, const Lhs& lhs, const HalfMatrix<H>& rhs, Dst&& dst,
             GemmScratch<float>& scratch, bool accumulate = false) {
  gemm(ctx, lhs, rhs.transpose(), std::forward<Dst>(dst), scratch, accumulate);
}

/// dst = lhs · rhs + bias (the row vector `bias` in every row) for 16-bit weights rhs [k, n]:
/// the bias broadcast into dst, then one accumulating product. Shapes as gemm, bias [1, n].
template <class Backend, class Lhs, class H, class Bias, class Dst>
requires backend::is_host<Backend>
void gemm_bias(const Context<Backend>& ctx, const Eigen::MatrixBase<Lhs>& lhs,
               const HalfMatrix<H>& rhs, const Eigen::MatrixBase<Bias>& bias, Dst&& dst,
               GemmScratch<float>& scratch) {
  eigen_assert(bias.rows() == 1 && bias.cols() == rhs.cols());
  dst.rowwise() = bias.derived().row(0);
  gemm(ctx, lhs, rhs, dst, scratch, /*accumulate=*/true);
}

}  // namespace nlb::ops
