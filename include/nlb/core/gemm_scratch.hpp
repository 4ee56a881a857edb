// Matrix products whose packing buffers are caller-owned, so a forward pass held in a workspace
// allocates nothing (DESIGN.md §3).
//
// Eigen's blocked GEMM packs blocks of both operands into two buffers per call: on the stack
// when each is at most EIGEN_STACK_ALLOCATION_LIMIT bytes (128 KiB by default), otherwise on
// the heap (malloc and free inside the call). At d = 128 the QKV projection [T, 128] x [128, 384]
// and both MLP products already exceed that for T ≥ 48, so an eval window would allocate in every
// layer. gemm() runs the same Eigen kernel with the same blocking sizes, but hands it buffers
// that live in a GemmScratch: the arithmetic is Eigen's `dst.noalias() = lhs * rhs`, bit for bit
// (tests/core/test_core.cpp checks it), and only the memory is different.
#pragma once

#include <Eigen/Core>
#include <algorithm>
#include <cstddef>
#include <type_traits>

#include "nlb/core/aligned_buffer.hpp"
#include "nlb/core/matrix.hpp"

namespace nlb {

/// Grow-only packing buffers for gemm(); hold one per component workspace and reuse it.
template <class T>
struct GemmScratch {
  AlignedBuffer<T> lhs_block, rhs_block;
  AlignedBuffer<T> widened;  // a panel of 16- or 8-bit weights in T (ops/narrow_gemm.hpp)
};

namespace detail {

// Eigen's blocking object for a dynamic-size GEMM, with its two packing buffers pointed at the
// scratch instead of left null (null makes Eigen's kernel allocate them per call). The sizes are
// computed by the base constructor exactly as Eigen's own product does it (one thread, full
// L3 blocking), so the kernel sees the same kc, mc and nc.
template <class Base, class LhsScalar, class RhsScalar>
class ScratchBlocking : public Base {
 public:
  ScratchBlocking(Index rows, Index cols, Index depth, AlignedBuffer<LhsScalar>& a,
                  AlignedBuffer<RhsScalar>& b)
      : Base(rows, cols, depth, 1, true) {
    const auto size_a = static_cast<std::size_t>(this->m_mc * this->m_kc);
    const auto size_b = static_cast<std::size_t>(this->m_kc * this->m_nc);
    if (a.size() < size_a)
      a.resize(size_a);
    if (b.size() < size_b)
      b.resize(size_b);
    this->m_blockA = a.data();
    this->m_blockB = b.data();
  }
  ScratchBlocking(const ScratchBlocking&) = delete;
  ScratchBlocking& operator=(const ScratchBlocking&) = delete;
  // The base destructor frees its buffers: hand it none (the scratch owns them).
  ~ScratchBlocking() {
    this->m_blockA = nullptr;
    this->m_blockB = nullptr;
  }
};

}  // namespace detail

/// Grows `scratch` so that every product [m, cols] = [m, depth] · [depth, cols] with m ≤ max_rows
/// runs through gemm() without allocating, for a row- or column-major result: the packing sizes
/// Eigen's blocking picks for each m (they need not grow monotonically with m). For products
/// whose row count grows call by call, such as features of every cached key while decoding.
/// Cost: 2 · max_rows blocking-size computations, no products.
template <class T>
void reserve_gemm(GemmScratch<T>& scratch, Index max_rows, Index cols, Index depth) {
  using namespace Eigen::internal;
  std::size_t size_a = scratch.lhs_block.size(), size_b = scratch.rhs_block.size();
  for (Index m = 1; m <= max_rows; ++m) {
    // The blocking objects of gemm() for a row-major and a column-major result.
    gemm_blocking_space<Eigen::RowMajor, T, T, Dynamic, Dynamic, Dynamic> row(m, cols, depth, 1,
                                                                              true);
    gemm_blocking_space<Eigen::ColMajor, T, T, Dynamic, Dynamic, Dynamic> col(m, cols, depth, 1,
                                                                              true);
    for (const auto* b : {static_cast<const level3_blocking<T, T>*>(&row),
                          static_cast<const level3_blocking<T, T>*>(&col)}) {
      size_a = std::max(size_a, static_cast<std::size_t>(b->mc() * b->kc()));
      size_b = std::max(size_b, static_cast<std::size_t>(b->kc() * b->nc()));
    }
  }
  scratch.lhs_block.resize(size_a);
  scratch.rhs_block.resize(size_b);
}

/// dst = lhs · rhs, the same arithmetic as Eigen's `dst.noalias() = lhs * rhs` (dst must not
/// alias an operand). Products that Eigen evaluates without heap memory — a vector operand
/// (GEMV), a tiny product (coefficient-based), an empty one, or a blocked GEMM whose packing
/// buffers fit on the stack — go to Eigen unchanged; the other blocked GEMMs get their packing
/// buffers from `scratch`, which grows to the largest product seen and then no longer
/// allocates. Operands: dense matrices, blocks, maps, Refs and their transposes, of one real
/// scalar type. With Eigen's GEMM threads above 1 (OpenMP) this is Eigen's parallel product
/// itself, which allocates.
///
/// With `accumulate` the product is added to dst instead (`dst.noalias() += lhs * rhs`).
template <class Dst, class Lhs, class Rhs, class T>
void gemm(Dst&& dst, const Eigen::MatrixBase<Lhs>& lhs_expr, const Eigen::MatrixBase<Rhs>& rhs_expr,
          GemmScratch<T>& scratch, bool accumulate = false) {
  using namespace Eigen::internal;  // the kernel's types: Eigen's own product uses these
  using Dest = std::remove_reference_t<Dst>;
  const Lhs& a_lhs = lhs_expr.derived();
  const Rhs& a_rhs = rhs_expr.derived();
  static_assert(std::is_same_v<typename Lhs::Scalar, T> &&
                    std::is_same_v<typename Rhs::Scalar, T> &&
                    std::is_same_v<typename Dest::Scalar, T>,
                "gemm: operands, result and scratch must share one scalar type");
  using Impl =
      generic_product_impl<Lhs, Rhs, Eigen::DenseShape, Eigen::DenseShape, Eigen::GemmProduct>;
  const bool blocked = a_lhs.rows() > 0 && a_lhs.cols() > 0 && a_rhs.cols() > 0 && dst.rows() > 1 &&
                       dst.cols() > 1 &&
                       a_rhs.rows() + dst.rows() + dst.cols() >= EIGEN_GEMM_TO_COEFFBASED_THRESHOLD;
  using Blocking =
      gemm_blocking_space<(Dest::Flags & Eigen::RowMajorBit) ? Eigen::RowMajor : Eigen::ColMajor, T,
                          T, Dest::MaxRowsAtCompileTime, Dest::MaxColsAtCompileTime,
                          Impl::MaxDepthAtCompileTime>;
  constexpr bool dynamic_blocking = Dest::MaxRowsAtCompileTime == Eigen::Dynamic ||
                                    Dest::MaxColsAtCompileTime == Eigen::Dynamic ||
                                    Impl::MaxDepthAtCompileTime == Eigen::Dynamic;
  const auto eigen_product = [&] {
    if (accumulate)
      dst.noalias() += a_lhs * a_rhs;
    else
      dst.noalias() = a_lhs * a_rhs;
  };
  if constexpr (!dynamic_blocking) {
    // Compile-time bounded sizes: Eigen's packing buffers are members of its blocking object.
    eigen_product();
  } else {
    // More than one GEMM thread (Eigen with OpenMP, Eigen::setNbThreads): Eigen's own product
    // runs the product in parallel, which the single-threaded kernel call below would not
    // (a 2-thread GPT-2-small forward was 1.5x slower); it allocates its packing buffers per
    // call, so the no-allocation guarantee is a single-thread one.
    if (!blocked || Eigen::nbThreads() > 1) {
      eigen_product();
      return;
    }
#if defined(EIGEN_ALLOCA)
    {
      // Packing buffers that fit Eigen's stack limit stay on the stack, as in Eigen's own
      // product: one hot region shared by every product (measured: per-component heap buffers
      // made the joint calibration ~4% slower through cache misses in packing).
      const Blocking sizes(dst.rows(), dst.cols(), a_lhs.cols(), 1, true);
      const auto bytes = [](Index n) { return static_cast<std::size_t>(n) * sizeof(T); };
      if (bytes(sizes.mc() * sizes.kc()) <= EIGEN_STACK_ALLOCATION_LIMIT &&
          bytes(sizes.kc() * sizes.nc()) <= EIGEN_STACK_ALLOCATION_LIMIT) {
        eigen_product();
        return;
      }
    }
#endif
    // What Eigen's GEMM product does for `noalias() = lhs * rhs`: zero, then accumulate with
    // alpha 1 (scaled by any scalar factors folded into the operands).
    if (!accumulate)
      dst.setZero();
    using LhsTraits = typename Impl::LhsBlasTraits;
    using RhsTraits = typename Impl::RhsBlasTraits;
    using ActualLhs = typename Impl::ActualLhsTypeCleaned;
    using ActualRhs = typename Impl::ActualRhsTypeCleaned;
    typename add_const_on_value_type<typename Impl::ActualLhsType>::type lhs =
        LhsTraits::extract(a_lhs);
    typename add_const_on_value_type<typename Impl::ActualRhsType>::type rhs =
        RhsTraits::extract(a_rhs);
    const T alpha = combine_scalar_factors(T(1), a_lhs, a_rhs);
    using Kernel = general_matrix_matrix_product<
        Index, T, (ActualLhs::Flags & Eigen::RowMajorBit) ? Eigen::RowMajor : Eigen::ColMajor,
        bool(LhsTraits::NeedToConjugate), T,
        (ActualRhs::Flags & Eigen::RowMajorBit) ? Eigen::RowMajor : Eigen::ColMajor,
        bool(RhsTraits::NeedToConjugate),
        (Dest::Flags & Eigen::RowMajorBit) ? Eigen::RowMajor : Eigen::ColMajor,
        Dest::InnerStrideAtCompileTime>;
    detail::ScratchBlocking<Blocking, T, T> blocking(dst.rows(), dst.cols(), lhs.cols(),
                                                     scratch.lhs_block, scratch.rhs_block);
    using Functor = gemm_functor<T, Index, Kernel, ActualLhs, ActualRhs, Dest, Blocking>;
    Functor(lhs, rhs, dst, alpha, blocking)(0, a_lhs.rows(), 0, a_rhs.cols());
  }
}

}  // namespace nlb
