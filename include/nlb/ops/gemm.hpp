// Matrix products of the CPU backends, from the backend's GEMM provider (DESIGN.md §4).
//
// Every component spells its matrix products as ops::gemm / ops::gemm_bias / ops::gemm_nt with
// its context (Context<Backend>, nlb/core/context.hpp), inputs first and the output last, as
// nlb/cuda/ops.cuh spells them for the device; the backend's provider
// (nlb/core/gemm_provider.hpp) decides which library runs them on the CPU:
// - gemm_provider::eigen: nlb::gemm (nlb/core/gemm_scratch.hpp), i.e. Eigen's own kernel with
//   caller-owned packing buffers, bit for bit `dst.noalias() = lhs * rhs`;
// - gemm_provider::openblas / blis / onednn / libxsmm: one cblas_?gemm / bli_?gemm / dnnl_sgemm /
//   libxsmm_?gemm call on the operands where they lie (row- and column-major operands and
//   transposes pass as BLAS transposes or strides, never copied). Products a BLAS call does not
//   suit go to Eigen instead: a vector result (one row or one column: GEMV, memory-bound, Eigen's
//   is as fast), tiny products that Eigen evaluates coefficient by coefficient, empty ones,
//   operands whose strides BLAS cannot take, and every product when the library found no kernels
//   for this CPU newer than the build's ISA (see provider_usable in ops/detail/: OpenBLAS 0.3.21
//   runs SSE3 kernels on CPUs it does not know).
// - gemm_provider::measured: per product, one of the above, the one measured fastest at the
//   nearest recorded shape on this kind of CPU (ops/detail/gemm_measured.hpp), or Eigen.
// The context's thread count goes to the provider's pool; vector results (batch-1 decoding's
// products) are split by output entries over that many threads in a program built with OpenMP
// (otherwise they run on the calling thread), for products of at least parallel_vector_min_work
// multiply-adds.
// Results of different providers differ by rounding only (summation order); the tests hold
// every provider to the same tolerance table (docs/testing.md).
#pragma once

#include <Eigen/Core>
#include <algorithm>
#include <atomic>
#include <type_traits>
#include <utility>
#if defined(_OPENMP)
#include <omp.h>
#endif

#include "nlb/core/backend.hpp"
#include "nlb/core/context.hpp"
#include "nlb/core/gemm_provider.hpp"
#include "nlb/core/gemm_scratch.hpp"
#include "nlb/core/mapped_matrix.hpp"
#include "nlb/core/matrix.hpp"
#include "nlb/kernels/small_gemm.hpp"
#include "nlb/ops/detail/blas_operand.hpp"
#include "nlb/ops/detail/gemm_providers.hpp"
#if defined(NLB_HAVE_MEASURED)
#include "nlb/ops/detail/gemm_measured.hpp"
#endif

namespace nlb::ops {

namespace detail {

// The BLAS call for dst (+)= lhs · rhs, or false when the product is left to Eigen.
template <class Provider, class Dst, class Lhs, class Rhs>
bool try_blas_gemm(Dst& dst, const Lhs& a_lhs, const Rhs& a_rhs, bool accumulate,
                   bool allocation_free) {
  using namespace Eigen::internal;
  using T = typename Lhs::Scalar;
  using LhsTraits = blas_traits<Lhs>;
  using RhsTraits = blas_traits<Rhs>;
  // The operands once scalar factors and transposes are peeled off (what Eigen's GEMM sees).
  using ActualLhs = std::remove_cv_t<typename LhsTraits::_ExtractType>;
  using ActualRhs = std::remove_cv_t<typename RhsTraits::_ExtractType>;
  using Dest = std::remove_cv_t<std::remove_reference_t<Dst>>;
  if constexpr (!(std::is_same_v<T, float> || std::is_same_v<T, double>) ||
                !provider_takes<Provider, T> || !LhsTraits::HasUsableDirectAccess ||
                !RhsTraits::HasUsableDirectAccess || !has_blas_layout<ActualLhs> ||
                !has_blas_layout<ActualRhs> || !has_blas_layout<Dest>) {
    return false;
  } else {
    // Eigen's own choices for this product: vector results and tiny products are not GEMMs.
    if (dst.rows() <= 1 || dst.cols() <= 1 || a_lhs.cols() == 0 ||
        a_rhs.rows() + dst.rows() + dst.cols() < EIGEN_GEMM_TO_COEFFBASED_THRESHOLD)
      return false;
    // A library running kernels older than the build's instruction set is slower than Eigen.
    if (!provider_usable(Provider{}))
      return false;
    typename LhsTraits::ExtractType lhs = LhsTraits::extract(a_lhs);  // a reference or a view
    typename RhsTraits::ExtractType rhs = RhsTraits::extract(a_rhs);
    BlasMatrix<const T> a, b;
    BlasMatrix<T> c;
    if (!blas_view(lhs, a) || !blas_view(rhs, b) || !blas_view(dst, c))
      return false;
    const T alpha = combine_scalar_factors(T(1), a_lhs, a_rhs);
    return run_provider_gemm(Provider{}, a, b, c, alpha, accumulate ? T(1) : T(0), allocation_free);
  }
}

/// Vector products below this many multiply-adds stay on the calling thread: waking a thread
/// costs about a microsecond, as much as 2^16 multiply-adds take from L2.
inline constexpr Index parallel_vector_min_work = Index{1} << 16;

// Runs f(begin, end) on contiguous ranges of [0, n) output entries, one per OpenMP thread of
// `threads` (the context's), each range a multiple of `align` entries (16 floats: 64 bytes, so
// no two threads write one cache line), and returns true; false (nothing run) when the work
// should stay on the calling thread: one thread, n < 2·align·threads, fewer than
// parallel_vector_min_work multiply-adds (`work`), already inside a parallel region, or no
// OpenMP in the build.
template <class F>
bool split_output_ranges(int threads, Index n, Index work, Index align, F&& f) {
#if defined(_OPENMP)
  if (threads <= 1 || n < 2 * align * threads || work < parallel_vector_min_work ||
      omp_in_parallel())
    return false;
#pragma omp parallel num_threads(threads)
  {
    const Index team = omp_get_num_threads(), part = omp_get_thread_num();
    const Index chunk = (n / team + align - 1) / align * align;
    const Index begin = std::min(n, part * chunk);
    const Index end = part + 1 == team ? n : std::min(n, begin + chunk);
    if (end > begin)
      f(begin, end);
  }
  return true;
#else
  (void)threads, (void)n, (void)work, (void)align, (void)f;
  return false;
#endif
}

/// Largest row count whose products go to kernels::small_gemm instead of the BLAS provider, for
/// Arch. Measured (docs/benchmarks.md, "Gated MLP at small batches"): with AVX-512's 16-lane
/// batches the kernel beats OpenBLAS from 16 up to 64 rows at the MLP shapes of GPT-2 sizes; with
/// 8- or 4-lane batches its tile was slower than OpenBLAS's Haswell kernel, so those widths keep
/// the provider (0: never).
template <class Arch>
inline constexpr Index small_gemm_max_rows = xsimd::batch<float, Arch>::size == 16 ? 64 : 0;

// dst (+)= lhs · rhs by kernels::small_gemm: float or double, a row-major lhs and dst and an
// untransposed row-major rhs with unit inner strides, 2 … small_gemm_max_rows rows, at least two
// columns, and a context that allows it. With more than one thread in the context the columns
// are split over the threads in ranges of whole register tiles (split_output_ranges); a program
// without OpenMP leaves such products to the provider's own threads, unless the provider's
// library cannot take them (provider_usable): Eigen would then run them on one thread as well,
// slower than the kernel. False (nothing done) otherwise.
template <class Backend, class Dst, class Lhs, class Rhs>
bool try_small_gemm(const Context<Backend>& ctx, Dst& dst, const Lhs& lhs, const Rhs& rhs,
                    bool accumulate) {
  using T = typename Lhs::Scalar;
  using Dest = std::remove_cv_t<std::remove_reference_t<Dst>>;
  if constexpr (!requires { typename Backend::arch; } ||
                !(std::is_same_v<T, float> || std::is_same_v<T, double>) || !has_blas_layout<Lhs> ||
                !has_blas_layout<Rhs> || !has_blas_layout<Dest> || !Lhs::IsRowMajor ||
                !Rhs::IsRowMajor || !Dest::IsRowMajor) {
    return false;
  } else {
    using Arch = typename Backend::arch;
    if (dst.rows() <= 1 || dst.rows() > small_gemm_max_rows<Arch> || dst.cols() <= 1 ||
        !ctx.small_gemm())
      return false;
#if !defined(_OPENMP)
    if (ctx.threads() > 1 && provider_usable(typename Backend::gemm{}))
      return false;
#endif
    BlasMatrix<const T> a, b;
    BlasMatrix<T> c;
    if (!blas_view(lhs, a) || !blas_view(rhs, b) || !blas_view(dst, c))
      return false;
    const auto columns = [&](Index begin, Index end) {
      kernels::small_gemm<Arch>(c.rows, end - begin, a.cols, a.data, a.ld, b.data + begin, b.ld,
                                c.data + begin, c.ld, accumulate);
    };
    constexpr Index tile_columns =
        kernels::small_gemm_tile_batches<Arch> * static_cast<Index>(xsimd::batch<T, Arch>::size);
    if (!split_output_ranges(ctx.threads(), c.cols, c.rows * c.cols * a.cols, tile_columns,
                             columns))
      columns(0, c.cols);
    return true;
  }
}

// dst (+)= lhs · rhs for a one-row or one-column dst, split by output entries over threads
// (split_output_ranges). Each entry is still one length-k dot product (its terms may be summed
// in another order than on one thread: Eigen blocks a narrower product differently).
// False (nothing done) when it should run on the calling thread.
template <class Dst, class Lhs, class Rhs>
bool try_parallel_vector_product(int threads, Dst& dst, const Lhs& lhs, const Rhs& rhs,
                                 bool accumulate) {
  const bool row = dst.rows() == 1;
  if (!(row || dst.cols() == 1))
    return false;
  return split_output_ranges(threads, dst.size(), lhs.cols() * dst.size(), 16,
                             [&](Index begin, Index end) {
                               if (row) {
                                 auto out = dst.middleCols(begin, end - begin);
                                 if (accumulate)
                                   out.noalias() += lhs * rhs.middleCols(begin, end - begin);
                                 else
                                   out.noalias() = lhs * rhs.middleCols(begin, end - begin);
                               } else {
                                 auto out = dst.middleRows(begin, end - begin);
                                 if (accumulate)
                                   out.noalias() += lhs.middleRows(begin, end - begin) * rhs;
                                 else
                                   out.noalias() = lhs.middleRows(begin, end - begin) * rhs;
                               }
                             });
}

}  // namespace detail

/// Gives the backend's GEMM provider the context's thread count if its pool (one per process)
/// has another one: ops::gemm calls it before every product (one relaxed load when unchanged);
/// a program may call it to size the pool ahead, e.g. back to one thread after a run on two.
template <class Backend>
requires backend::is_host<Backend>
void apply_threads(const Context<Backend>& ctx) {
  using Provider = typename Backend::gemm;
  auto& applied = detail::provider_threads_applied<Provider>();
  if (applied.load(std::memory_order_relaxed) == ctx.threads())
    return;
  if constexpr (std::is_same_v<Provider, gemm_provider::eigen>)
    Eigen::setNbThreads(ctx.threads());
  else
    detail::provider_set_threads(Provider{}, ctx.threads());
  applied.store(ctx.threads(), std::memory_order_relaxed);
}

namespace detail {

// A dynamic-size float or double operand with unit inner stride (a matrix, map, block, Ref or a
// transpose of one): gemm computes on its canonical view below instead of on its own type.
template <class Expr>
inline constexpr bool has_canonical_view =
    has_blas_layout<Expr>&& std::remove_cv_t<Expr>::InnerStrideAtCompileTime == 1 &&
    std::remove_cv_t<Expr>::RowsAtCompileTime ==
        Eigen::Dynamic&& std::remove_cv_t<Expr>::ColsAtCompileTime == Eigen::Dynamic &&
    (std::is_same_v<typename std::remove_cv_t<Expr>::Scalar, float> ||
     std::is_same_v<typename std::remove_cv_t<Expr>::Scalar, double>);

// The same coefficients as `m` seen as a map with a run-time leading dimension, in m's storage
// order (const when m's coefficients are). Why: the provider dispatch below instantiates
// Eigen's product and the vector and small-GEMM paths for every operand type it is given; on
// canonical views that is once per scalar type and storage-order combination instead of once
// per expression type (about 50 types in a model's translation unit, most of its compile time).
// The arithmetic is the same: the BLAS call sees the same pointer and strides, and Eigen's
// kernels read dynamic-size operands through their strides either way.
template <class Expr>
auto canonical_view(Expr& m) {
  using E = std::remove_cv_t<Expr>;
  using Plain = Eigen::Matrix<typename E::Scalar, Eigen::Dynamic, Eigen::Dynamic,
                              E::IsRowMajor ? Eigen::RowMajor : Eigen::ColMajor>;
  using Coefficients = std::remove_pointer_t<decltype(m.data())>;
  using Target = std::conditional_t<std::is_const_v<Coefficients>, const Plain, Plain>;
  return Eigen::Map<Target, Eigen::Unaligned, Eigen::OuterStride<>>(
      m.data(), m.rows(), m.cols(), Eigen::OuterStride<>(m.outerStride()));
}

// ops::gemm's provider dispatch on operands as given (canonical views where gemm made them).
template <class Backend, class Lhs, class Rhs, class Dst, class T>
void gemm_dispatch(const Context<Backend>& ctx, const Lhs& lhs, const Rhs& rhs, Dst& dst,
                   GemmScratch<T>& scratch, bool accumulate) {
  using Provider = typename Backend::gemm;
  apply_threads(ctx);
  if constexpr (!std::is_same_v<Provider, gemm_provider::eigen>) {
    if (try_small_gemm(ctx, dst, lhs, rhs, accumulate))
      return;
    if (try_blas_gemm<Provider>(dst, lhs, rhs, accumulate, ctx.allocation_free()))
      return;
  }
  if (try_parallel_vector_product(ctx.threads(), dst, lhs, rhs, accumulate))
    return;
  nlb::gemm(dst, lhs, rhs, scratch, accumulate);
}

}  // namespace detail

/// dst = lhs · rhs, or dst += lhs · rhs with `accumulate`, by the context's backend's GEMM
/// provider on ctx.threads() threads. Shapes: lhs [m, k], rhs [k, n], dst [m, n] (sized by the
/// caller; it must not alias an operand). Operands: dense matrices, blocks, maps, Refs and their
/// transposes of one real scalar type; `scratch` holds Eigen's packing buffers (BLAS providers
/// keep their own). Cost: 2·m·n·k flops.
template <class Backend, class Lhs, class Rhs, class Dst, class T>
requires backend::is_host<Backend>
void gemm(const Context<Backend>& ctx, const Eigen::MatrixBase<Lhs>& lhs,
          const Eigen::MatrixBase<Rhs>& rhs, Dst&& dst, GemmScratch<T>& scratch,
          bool accumulate = false) {
  static_assert(gemm_provider::is_available<typename Backend::gemm>,
                "ops::gemm: this GEMM provider's library is not part of the build (link "
                "nlbudget::openblas, nlbudget::blis, nlbudget::onednn or nlbudget::libxsmm)");
  using Dest = std::remove_cv_t<std::remove_reference_t<Dst>>;
  if constexpr (detail::has_canonical_view<Lhs> && detail::has_canonical_view<Rhs> &&
                detail::has_canonical_view<Dest>) {
    auto out = detail::canonical_view(dst);
    detail::gemm_dispatch(ctx, detail::canonical_view(lhs.derived()),
                          detail::canonical_view(rhs.derived()), out, scratch, accumulate);
  } else {
    detail::gemm_dispatch(ctx, lhs.derived(), rhs.derived(), dst, scratch, accumulate);
  }
}

/// dst = lhs · rhs + 1 · bias (the row vector `bias` added to every row), by the backend's
/// provider. With Eigen: the product, then the bias (exactly the arithmetic of
/// `dst.noalias() = lhs * rhs; dst.rowwise() += bias`); with BLAS: the bias broadcast into dst,
/// then one accumulating GEMM (no second pass over dst). Shapes as gemm, bias [1, n].
template <class Backend, class Lhs, class Rhs, class Bias, class Dst, class T>
requires backend::is_host<Backend>
void gemm_bias(const Context<Backend>& ctx, const Eigen::MatrixBase<Lhs>& lhs,
               const Eigen::MatrixBase<Rhs>& rhs, const Eigen::MatrixBase<Bias>& bias, Dst&& dst,
               GemmScratch<T>& scratch) {
  eigen_assert(bias.rows() == 1 && bias.cols() == rhs.cols());
  const auto bias_row = bias.derived().row(0);  // a [1, n] matrix or a row vector
  if constexpr (std::is_same_v<typename Backend::gemm, gemm_provider::eigen>) {
    gemm(ctx, lhs, rhs, dst, scratch);
    dst.rowwise() += bias_row;
  } else {
    dst.rowwise() = bias_row;
    gemm(ctx, lhs, rhs, dst, scratch, /*accumulate=*/true);
  }
}

/// gemm and gemm_bias with a MappedMatrix right operand (storage::mapped weights): the same
/// product on its Eigen::Map.
template <class Backend, class Lhs, class T, int Rows, int Cols, class Dst>
requires backend::is_host<Backend>
void gemm(const Context<Backend>& ctx, const Eigen::MatrixBase<Lhs>& lhs,
          const MappedMatrix<T, Rows, Cols>& rhs, Dst&& dst, GemmScratch<T>& scratch,
          bool accumulate = false) {
  gemm(ctx, lhs, rhs.map(), std::forward<Dst>(dst), scratch, accumulate);
}
template <class Backend, class Lhs, class T, int Rows, int Cols, class Bias, class Dst>
requires backend::is_host<Backend>
void gemm_bias(const Context<Backend>& ctx, const Eigen::MatrixBase<Lhs>& lhs,
               const MappedMatrix<T, Rows, Cols>& rhs, const Eigen::MatrixBase<Bias>& bias,
               Dst&& dst, GemmScratch<T>& scratch) {
  gemm_bias(ctx, lhs, rhs.map(), bias, std::forward<Dst>(dst), scratch);
}

/// dst (+)= lhs · rhsᵀ: gemm with the right operand transposed (rhs [n, k]; any right operand
/// gemm takes, e.g. the unembedding's weights or a head's keys).
template <class Backend, class Lhs, class Rhs, class Dst, class T>
requires backend::is_host<Backend>
void gemm_nt(const Context<Backend>& ctx, const Lhs& lhs, const Rhs& rhs, Dst&& dst,
             GemmScratch<T>& scratch, bool accumulate = false) {
  gemm(ctx, lhs, rhs.transpose(), std::forward<Dst>(dst), scratch, accumulate);
}

/// True when the backend's products really run in its provider's library: false for a BLAS
/// provider whose library found no kernels for this CPU (its products then run in Eigen; see
/// above).
template <class Backend>
bool gemm_provider_in_use(Backend) {
  using Provider = typename Backend::gemm;
  if constexpr (std::is_same_v<Provider, gemm_provider::eigen>)
    return true;
  else
    return detail::provider_usable(Provider{});
}

}  // namespace nlb::ops
