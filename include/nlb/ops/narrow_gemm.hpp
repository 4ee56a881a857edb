// Matrix products with weights stored narrower than float — 16-bit (HalfMatrix: storage::f16 /
// storage::bf16) and 8-bit blocks (Q8Matrix: storage::q8), DESIGN.md §4 — the overloads of
// ops::gemm / ops::gemm_bias that components with such weights call.
//
// - One-row products (batch-1 decoding, memory-bound): the row kernels
//   (nlb/kernels/half_weights.hpp, nlb/kernels/q8_weights.hpp) read each weight once and widen it
//   in registers, split by output entries over the context's threads like the float vector
//   products.
// - Larger products (prefill, compute-bound): the weights are widened panel by panel into the
//   scratch (a block of columns of W, or of rows of Wᵀ, of about widened_panel_values floats)
//   and each panel is multiplied by Backend's float GEMM provider. The widening runs on the
//   calling thread (OpenMP threads that wait spinning would take the cores from the provider's
//   own threads) and costs O(k·n) per product against the product's O(m·k·n).
// Activations and accumulation are float: the weights' rounding is the only change against the
// float model (the tolerance table bounds the logits' difference).
//
// A storage joins by specialising detail::narrow_weights for its matrix type (below).
#pragma once

#include <algorithm>
#include <type_traits>
#include <utility>

#include "nlb/core/half_matrix.hpp"
#include "nlb/core/q8_matrix.hpp"
#include "nlb/kernels/half_weights.hpp"
#include "nlb/kernels/q8_weights.hpp"
#include "nlb/ops/gemm.hpp"

namespace nlb::ops {

namespace detail {

/// What the products need of a narrow weight matrix W: `granule`, the column multiple at which
/// a vector product may be split over threads; `widen(backend, w, r, c, count, dst)`, values
/// [c, c + count) of row r in float (c a multiple of the granule); `vecmat` / `vecmat_transposed`
/// (backend, x, w, begin, end, y): y[begin, end) (+)= entries [begin, end) of x · W (or x · Wᵀ).
template <class W>
struct narrow_weights;

template <class H>
struct narrow_weights<HalfMatrix<H>> {
  static constexpr Index granule = 16;
  template <class Backend>
  static void widen(Backend b, const HalfMatrix<H>& w, Index r, Index c, Index count, float* dst) {
    kernels::widen(b, w.row(r) + c, dst, count);
  }
  template <class Backend>
  static void vecmat(Backend b, const float* x, const HalfMatrix<H>& w, Index begin, Index end,
                     float* y, bool accumulate) {
    kernels::half_vecmat(b, x, w.data() + begin, w.rows(), w.cols(), y + begin, end - begin,
                         accumulate);
  }
  template <class Backend>
  static void vecmat_transposed(Backend b, const float* x, const HalfMatrix<H>& w, Index begin,
                                Index end, float* y, bool accumulate) {
    kernels::half_vecmat_transposed(b, x, w.row(begin), w.cols(), w.cols(), y + begin, end - begin,
                                    accumulate);
  }
};

template <>
struct narrow_weights<Q8Matrix> {
  static constexpr Index granule = q8_block;
  template <class Backend>
  static void widen(Backend b, const Q8Matrix& w, Index r, Index c, Index count, float* dst) {
    kernels::q8_dequantize(b, w.row(r) + c, w.row_scales(r) + c / q8_block, dst, count);
  }
  template <class Backend>
  static void vecmat(Backend b, const float* x, const Q8Matrix& w, Index begin, Index end, float* y,
                     bool accumulate) {
    kernels::q8_vecmat(b, x, w.data() + begin, w.scales() + begin / q8_block, w.rows(), w.cols(),
                       w.blocks_per_row(), y + begin, end - begin, accumulate);
  }
  template <class Backend>
  static void vecmat_transposed(Backend b, const float* x, const Q8Matrix& w, Index begin,
                                Index end, float* y, bool accumulate) {
    kernels::q8_vecmat_transposed(b, x, w.row(begin), w.row_scales(begin), w.cols(), w.cols(),
                                  w.blocks_per_row(), y + begin, end - begin, accumulate);
  }
};

template <class W>
concept narrow_weight_matrix = requires {
  narrow_weights<W>::granule;
};

/// Floats in one widened panel of a prefill product: 8 MiB, most of a GPT-2-small matrix. Few
/// wide panels keep the provider's threads busy; panels of an L2's size (2^18 floats) cost
/// 14–40% more time on 2 threads at T = 128 (docs/benchmarks.md).
inline constexpr Index widened_panel_values = Index{1} << 21;

// Columns per panel for a product with k-long columns: a multiple of 64 (so of every granule), at
// least 64.
inline Index widened_panel_width(Index k, Index n) {
  const Index fit = widened_panel_values / std::max<Index>(k, 1) / 64 * 64;
  return std::min(n, std::max<Index>(64, fit));
}

template <class Lhs, class Dst>
void check_narrow_product(const Lhs& lhs, Index k, Index n, const Dst& dst) {
  static_assert(std::is_same_v<typename Lhs::Scalar, float>,
                "ops::gemm with narrow weights: the activations are float");
  eigen_assert(lhs.cols() == k && dst.rows() == lhs.rows() && dst.cols() == n);
  (void)lhs, (void)k, (void)n, (void)dst;
}

/// The prefill path's widening, on its own: the columns of w [k, n] (Transposed = false), or the
/// rows of w [n, k] (true), widened panel by panel into `scratch.widened`, and for each panel
/// on_panel(j, panel) with j its first output column and panel the float [k, cols] block (or
/// [cols, k]). Every weight is widened once, on the calling thread. O(k·n).
template <bool Transposed, class Backend, class W, class OnPanel>
void for_each_widened_panel(Backend backend, const W& w, GemmScratch<float>& scratch,
                            OnPanel&& on_panel) {
  using narrow = narrow_weights<W>;
  const Index k = Transposed ? w.cols() : w.rows(), n = Transposed ? w.rows() : w.cols();
  const Index width = widened_panel_width(k, n);
  if (scratch.widened.size() < static_cast<std::size_t>(k * width))
    scratch.widened.resize(static_cast<std::size_t>(k * width));
  for (Index j = 0; j < n; j += width) {
    const Index cols = std::min(width, n - j);
    if constexpr (Transposed) {
      Eigen::Map<RowMatrix<float>> panel(scratch.widened.data(), cols, k);  // [cols, k]
      for (Index r = 0; r < cols; ++r)
        narrow::widen(backend, w, j + r, 0, k, panel.row(r).data());
      on_panel(j, panel);
    } else {
      Eigen::Map<RowMatrix<float>> panel(scratch.widened.data(), k, cols);  // [k, cols]
      for (Index i = 0; i < k; ++i)
        narrow::widen(backend, w, i, j, cols, panel.row(i).data());
      on_panel(j, panel);
    }
  }
}

// dst (+)= lhs · w (Transposed = false; w [k, n]) or lhs · wᵀ (true; w [n, k]): one row through
// the row kernels, split by output entries over threads; more rows by widened panels of
// columns of w (or rows, transposed) and the float provider.
template <bool Transposed, class Backend, class Dst, class Lhs, class W>
void narrow_product(const Context<Backend>& ctx, Dst&& dst, const Lhs& lhs, const W& w,
                    GemmScratch<float>& scratch, bool accumulate) {
  using narrow = narrow_weights<W>;
  const Backend backend;
  const Index k = Transposed ? w.cols() : w.rows(), n = Transposed ? w.rows() : w.cols();
  check_narrow_product(lhs, k, n, dst);
  if (lhs.rows() == 1) {
    const Eigen::Ref<const RowVector<float>> x = lhs.row(0);  // [1, k]
    Eigen::Ref<RowVector<float>> y = dst.row(0);              // [1, n]
    const auto run = [&](Index begin, Index end) {
      if constexpr (Transposed)
        narrow::vecmat_transposed(backend, x.data(), w, begin, end, y.data(), accumulate);
      else
        narrow::vecmat(backend, x.data(), w, begin, end, y.data(), accumulate);
    };
    if (!split_output_ranges(ctx.threads(), n, k * n, narrow::granule, run))
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

/// dst (+ with `accumulate`)= lhs · rhs for narrow weights rhs [k, n] (HalfMatrix or Q8Matrix);
/// lhs [m, k] and dst [m, n] float (dst must not alias lhs). m = 1: rhs read once, widened in
/// registers; m > 1: panels widened into `scratch` and multiplied by the backend's GEMM
/// provider. Cost 2·m·k·n flops.
template <class Backend, class Lhs, class W, class Dst>
requires backend::is_host<Backend> && detail::narrow_weight_matrix<W>
void gemm(const Context<Backend>& ctx, const Eigen::MatrixBase<Lhs>& lhs, const W& rhs, Dst&& dst,
          GemmScratch<float>& scratch, bool accumulate = false) {
  detail::narrow_product<false>(ctx, dst, lhs.derived(), rhs, scratch, accumulate);
}

/// dst (+ with `accumulate`)= lhs · rhsᵀ for narrow weights rhs [n, k] (`w.transpose()`), e.g.
/// the logits of tied embeddings. m = 1: one dot product per row of rhs; m > 1: rows of rhs
/// widened panel by panel. Shapes and cost as above.
template <class Backend, class Lhs, class H, class Dst>
requires backend::is_host<Backend>
void gemm(const Context<Backend>& ctx, const Eigen::MatrixBase<Lhs>& lhs,
          const HalfTransposed<H>& rhs, Dst&& dst, GemmScratch<float>& scratch,
          bool accumulate = false) {
  detail::narrow_product<true>(ctx, dst, lhs.derived(), rhs.matrix, scratch, accumulate);
}
template <class Backend, class Lhs, class Dst>
requires backend::is_host<Backend>
void gemm(const Context<Backend>& ctx, const Eigen::MatrixBase<Lhs>& lhs, const Q8Transposed& rhs,
          Dst&& dst, GemmScratch<float>& scratch, bool accumulate = false) {
  detail::narrow_product<true>(ctx, dst, lhs.derived(), rhs.matrix, scratch, accumulate);
}

/// dst (+)= lhs · rhsᵀ for narrow weights rhs [n, k] (ops::gemm_nt with a HalfMatrix or
/// Q8Matrix: the tied unembedding of a model with such weights). Shapes and cost as gemm.
template <class Backend, class Lhs, class W, class Dst>
requires backend::is_host<Backend> && detail::narrow_weight_matrix<W>
void gemm_nt(const Context<Backend>& ctx, const Lhs& lhs, const W& rhs, Dst&& dst,
             GemmScratch<float>& scratch, bool accumulate = false) {
  gemm(ctx, lhs, rhs.transpose(), std::forward<Dst>(dst), scratch, accumulate);
}

/// dst = lhs · rhs + bias (the row vector `bias` in every row) for narrow weights rhs [k, n]:
/// the bias broadcast into dst, then one accumulating product. Shapes as gemm, bias [1, n].
template <class Backend, class Lhs, class W, class Bias, class Dst>
requires backend::is_host<Backend> && detail::narrow_weight_matrix<W>
void gemm_bias(const Context<Backend>& ctx, const Eigen::MatrixBase<Lhs>& lhs, const W& rhs,
               const Eigen::MatrixBase<Bias>& bias, Dst&& dst, GemmScratch<float>& scratch) {
  eigen_assert(bias.rows() == 1 && bias.cols() == rhs.cols());
  dst.rowwise() = bias.derived().row(0);
  gemm(ctx, lhs, rhs, dst, scratch, /*accumulate=*/true);
}

}  // namespace nlb::ops
