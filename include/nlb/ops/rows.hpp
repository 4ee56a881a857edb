// Row and elementwise operations of the CPU backends (DESIGN.md §4): residual adds, copies,
// scaling, row gathers and scatters, the partition of rows by a gate's scores, and the embedding
// lookup. nlb/cuda/ops.cuh has the same operations, with the same arguments, for backend::cuda.
//
// Every operation takes the context first, then what it reads, then what it writes, then scalar
// parameters; operands are Eigen expressions (matrices, blocks, maps, Refs) of one scalar type.
#pragma once

#include <Eigen/Core>
#include <algorithm>
#include <cstdint>
#include <numeric>
#include <span>
#include <string>
#include <vector>

#include "nlb/core/backend.hpp"
#include "nlb/core/checks.hpp"
#include "nlb/core/context.hpp"
#include "nlb/core/errors.hpp"
#include "nlb/core/half_matrix.hpp"
#include "nlb/core/mapped_matrix.hpp"
#include "nlb/core/matrix.hpp"
#include "nlb/core/weight_storage.hpp"

namespace nlb::ops {

/// y += a, elementwise. a, y [m, n]. O(m n).
template <class Backend, class A, class Y>
requires backend::is_host<Backend>
void add(const Context<Backend>&, const A& a, Y&& y) {
  eigen_assert(a.rows() == y.rows() && a.cols() == y.cols());
  y += a;
}

/// y += a + b, elementwise (a + b first, as the parallel-residual block adds). O(m n).
template <class Backend, class A, class B, class Y>
requires backend::is_host<Backend>
void add(const Context<Backend>&, const A& a, const B& b, Y&& y) {
  eigen_assert(a.rows() == y.rows() && b.rows() == y.rows() && a.cols() == y.cols() &&
               b.cols() == y.cols());
  y += a + b;
}

/// y ⊙= a, elementwise (the SwiGLU MLP's gate times its up projection). a, y [m, n]; they must
/// not overlap. O(m n).
template <class Backend, class A, class Y>
requires backend::is_host<Backend>
void multiply(const Context<Backend>&, const A& a, Y&& y) {
  eigen_assert(a.rows() == y.rows() && a.cols() == y.cols());
  y.array() *= a.array();
}

/// to = from (same shape; they must not overlap). O(m n).
template <class Backend, class From, class To>
requires backend::is_host<Backend>
void copy(const Context<Backend>&, const From& from, To&& to) {
  eigen_assert(from.rows() == to.rows() && from.cols() == to.cols());
  to = from;
}

/// y *= factor, elementwise. O(m n).
template <class Backend, class Y, class T>
requires backend::is_host<Backend>
void scale(const Context<Backend>&, Y&& y, T factor) {
  y *= factor;
}

/// out = (x · diag(diagonal)) · factor: column j of x times diagonal[j], then times factor (a
/// diagonal filter's query features, PAPERS.md §B2). x, out [m, n]; diagonal [1, n]. O(m n).
template <class Backend, class X, class Diagonal, class Out, class T>
requires backend::is_host<Backend>
void scale_columns(const Context<Backend>&, const X& x, const Diagonal& diagonal, Out&& out,
                   T factor) {
  eigen_assert(diagonal.size() == x.cols() && out.rows() == x.rows() && out.cols() == x.cols());
  out = (x.array().rowwise() * diagonal.array()) * factor;
}

/// out[r, :] = x[rows[r], :] for r < rows.size(): the listed rows packed into a contiguous block.
/// out [rows.size(), n] must not alias x. O(rows · n).
template <class Backend, class X, class Out>
requires backend::is_host<Backend>
void gather_rows(const Context<Backend>&, const X& x, std::span<const Index> rows, Out&& out) {
  eigen_assert(out.rows() == static_cast<Index>(rows.size()) && out.cols() == x.cols());
  // Indexed through a span: an Eigen IndexedView keeps its index container by value, and a
  // std::vector there would be copied (allocated) on every gather and scatter.
  out = x(rows, Eigen::all);
}

/// y[rows[r], :] = block[r, :] for r < rows.size(): the inverse of gather_rows. Rows of y not
/// listed are left as they are; `rows` must not repeat an index. O(rows · n).
template <class Backend, class Block, class Y>
requires backend::is_host<Backend>
void scatter_rows(const Context<Backend>&, const Block& block, std::span<const Index> rows, Y&& y) {
  eigen_assert(block.rows() == static_cast<Index>(rows.size()) && block.cols() == y.cols());
  y(rows, Eigen::all) = block;
}

/// Writes the row indices 0 … n−1 of scores [n, 1] to rows (resized to n): the rows with
/// score > threshold first, then the others, each group in ascending order (a stable
/// partition); returns how many scored above. NaN scores count as not above. O(n).
template <class Backend, class Scores, class T>
requires backend::is_host<Backend> Index partition_rows(const Context<Backend>&,
                                                        const Scores& scores,
                                                        std::vector<Index>& rows, T threshold) {
  const Index n = scores.rows();
  eigen_assert(scores.cols() == 1);
  rows.resize(static_cast<std::size_t>(n));
  Index above = 0;
  for (Index t = 0; t < n; ++t)
    above += scores(t, 0) > threshold ? 1 : 0;
  Index linear = 0, full = above;
  for (Index t = 0; t < n; ++t)
    rows[static_cast<std::size_t>(scores(t, 0) > threshold ? linear++ : full++)] = t;
  return above;
}

namespace detail {
// Row r of a weight matrix of any storage as an Eigen expression of T values.
template <class T, class W>
auto weight_row(const W& w, Index r) {
  if constexpr (requires { w.template row_as<T>(r); })
    return w.template row_as<T>(r);  // HalfMatrix, Q8Matrix: widened as it is read
  else
    return w.row(r);
}
}  // namespace detail

/// x[t, :] = token[ids[t], :] (+ position[past + t, :] when `position` has rows): the residual
/// stream at a model's first layer. token [vocab, d], position [n_positions, d] in any weight
/// storage; ids already checked to lie in [0, vocab) and past + T <= n_positions. x [T, d]. The
/// scratch is unused on the CPU (the device copies the ids into its own). O(T d).
template <class Backend, class Token, class Position, class X, class Scratch>
requires backend::is_host<Backend>
void embed_rows(const Context<Backend>&, const Token& token, const Position& position,
                std::span<const std::int32_t> ids, X&& x, Index past, Scratch&) {
  using T = typename std::remove_cvref_t<X>::Scalar;
  eigen_assert(x.rows() == static_cast<Index>(ids.size()) && x.cols() == token.cols());
  const bool positions = position.size() > 0;
  for (Index t = 0; t < x.rows(); ++t) {
    x.row(t) = detail::weight_row<T>(token, ids[static_cast<std::size_t>(t)]);
    if (positions)
      x.row(t) += detail::weight_row<T>(position, past + t);
  }
}

/// A host copy of a matrix of this backend (on the CPU: a plain copy). O(m n).
template <class Backend, class M>
requires backend::is_host<Backend> RowMatrix<typename M::Scalar> to_host(const Context<Backend>&,
                                                                         const M& m) {
  return m;
}

}  // namespace nlb::ops
