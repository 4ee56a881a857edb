// Filtering D >= 0 of S–D attention (PAPERS.md §B2; docs/attention.md): the symmetric,
// positive semi-definite part of a head's bilinear form, subtracted from the routing scores,
// so that every eigenvalue of S − D has a non-positive real part.
//   DiagonalFilter: D = diag(softplus θ), θ [d], one weight per feature.
//   ScalarFilter:   D = softplus(θ) I, θ one scalar per head (the "inversion" experiment).
// Both expose the same interface: the filter term x_i D x_jᵀ = f_i · x_j with the query-side
// features f = X D (query_features), so it can be fused with the routing features into one
// GEMM (SDAttention), or subtracted from given scores (subtract_scores). The query features
// are the ops layer's, so both run on every backend; subtract_scores and the dense forms are
// host members.
#pragma once

// Calls the ops by qualified name: nlb/cuda.cuh must come first (nlb/cuda/ops.cuh checks).
#define NLB_OPS_CALLERS_INCLUDED

#include <cmath>
#include <string>
#include <string_view>
#include <type_traits>

#include "nlb/attention/detail/causal_product.hpp"
#include "nlb/core.hpp"
#include "nlb/core/component_types.hpp"
#include "nlb/core/context.hpp"
#include "nlb/core/storage.hpp"
#include "nlb/kernels/elementwise.hpp"
#include "nlb/kernels/transform.hpp"
#include "nlb/ops/elementwise.hpp"
#include "nlb/ops/rows.hpp"

namespace nlb {

namespace detail {
/// scores −= (Xq D) Xkᵀ, where `times_d` maps Xq [T, d] to Xq D: on the causal entries
/// j <= past + i when `causal` (Xk [past + T, d], scores [T, >= past + T]), on every entry
/// otherwise (Xk = Xq, past = 0, scores [T, T]); other entries untouched. The shapes are checked
/// first (`width` 0 accepts any d), naming `what`. Both filters' subtract_scores.
template <class T, class TimesD>
void subtract_filter_scores(const std::string& what, Index width,
                            const Eigen::Ref<const Activations<T>>& Xq,
                            const Eigen::Ref<const Activations<T>>& Xk,
                            Eigen::Ref<RowMatrix<T>> scores, Index past, bool causal,
                            const TimesD& times_d) {
  if (width > 0)
    check_dim(what + ": query width (d)", width, Xq.cols());
  check_dim(what + ": key width (d)", Xq.cols(), Xk.cols());
  if (past < 0)
    throw ArgumentError(expected_found(what + ": past", "a value >= 0", past));
  check_dim(what + ": key rows (past + T)", past + Xq.rows(), Xk.rows());
  check_dim(what + ": score rows (T)", Xq.rows(), scores.rows());
  if (scores.cols() < Xk.rows()) {
    throw ShapeError(expected_found(
        what + ": score cols", "at least past + T = " + std::to_string(Xk.rows()), scores.cols()));
  }
  if (causal) {
    RowMatrix<T> f = times_d(Xq);  // [T, d]
    f = -f;                        // in place: one [T, d] buffer per call
    causal_product<T>(f, Xk, scores, past, true);
  } else {
    scores.noalias() -= times_d(Xq) * Xk.transpose();
  }
}
}  // namespace detail

/// D = diag(softplus θ) with θ [d] (D fixed at compile time or Dynamic). The diagonal is
/// computed once, at construction on the host, with the backend's softplus kernel; θ and the
/// diagonal are kept as the backend's vectors [1, d] (storage_traits<Backend, T>::vector).
template <class T, int D = Dynamic, class Backend = backend::cpu>
class DiagonalFilter : public ComponentTypes<T, Backend> {
  using Storage = storage_traits<Backend, T>;
  using Types = ComponentTypes<T, Backend>;

 public:
  using typename Types::ConstView, typename Types::View;
  static constexpr int size = D;
  using Vector = typename Storage::template vector<D>;
  template <class B>
  using on_backend = DiagonalFilter<T, D, B>;

  DiagonalFilter() = default;

  /// θ [d]. ShapeError when d differs from a fixed D or is 0 (checked before θ is copied: a
  /// fixed-size copy of the wrong size would be undefined behaviour in release builds).
  explicit DiagonalFilter(
      const Eigen::Ref<const RowVector<T>>& theta) requires backend::is_host<Backend>
      : theta_(checked(theta)) {
    diagonal_ = theta_;
    kernels::transform(Backend{}, diagonal_.data(), diagonal_.size(), kernels::SoftplusOp{});
  }

  /// The same filter on another backend: θ and the diagonal copied into this backend's vectors
  /// (uploaded once for backend::cuda; the diagonal is not recomputed). O(d).
  template <class From>
  requires(!std::is_same_v<From, Backend>) explicit DiagonalFilter(
      const DiagonalFilter<T, D, From>& from)
      : theta_(Storage::template vector_from_host<D>(from.theta())),
        diagonal_(Storage::template vector_from_host<D>(from.diagonal())) {}

  Index features() const { return theta_.size(); }
  /// The free parameters θ [d].
  const Vector& theta() const { return theta_; }
  /// softplus(θ) [d], every entry >= 0 (> 0 unless θ_k < about −745 in double / −104 in float).
  const Vector& diagonal() const { return diagonal_; }
  /// D = diag(softplus θ) [d, d].
  RowMatrix<T> dense() const requires backend::is_host<Backend> {
    return diagonal_.transpose().asDiagonal();
  }

  /// Free parameters: d.
  Index parameter_count() const { return theta_.size(); }

  /// ShapeError unless d equals this filter's width (`what` names the caller). The message is
  /// built only on a mismatch: forward passes call this per head.
  void check_width(std::string_view what, Index d) const {
    if (d != features())
      check_dim(std::string(what) + ": filter width (d)", features(), d);
  }

  /// f = (X D)·factor [T, d] for X [T, d]: x_i D x_jᵀ = f_i · x_j for factor 1 (ops::
  /// scale_columns: each product rounded, then scaled, as S–D attention's logits scale it).
  /// ShapeError on a width or output-size mismatch. O(T·d).
  void query_features(Context<Backend>& ctx, const ConstView& X, View out, T factor = T(1)) const {
    check_width("DiagonalFilter::query_features: input", X.cols());
    if (out.rows() != X.rows() || out.cols() != X.cols()) {
      check_dim("DiagonalFilter::query_features: output rows (T)", X.rows(), out.rows());
      check_dim("DiagonalFilter::query_features: output cols (d)", X.cols(), out.cols());
    }
    ops::scale_columns(ctx, X, diagonal_, out, factor);
  }

  /// scores(i, j) −= xq_i D xk_jᵀ for the causal entries j <= past + i, with Xq [T, d] the
  /// queries at positions [past, past + T), Xk [past + T, d] every key, scores [T, >= past + T];
  /// other entries untouched. O(T·(past + T/2)·d). ShapeError on mismatched shapes.
  void subtract_scores(const Eigen::Ref<const Activations<T>>& Xq,
                       const Eigen::Ref<const Activations<T>>& Xk, Eigen::Ref<RowMatrix<T>> scores,
                       Index past) const requires backend::is_host<Backend> {
    detail::subtract_filter_scores<T>("DiagonalFilter::subtract_scores", features(), Xq, Xk, scores,
                                      past, true, [this](const auto& x) { return times_d(x); });
  }

  /// scores(i, j) −= x_i D x_jᵀ for X [T, d], scores [T, T]: only j <= i when causal, else all.
  void subtract_scores(const Eigen::Ref<const Activations<T>>& X, Eigen::Ref<RowMatrix<T>> scores,
                       bool causal) const requires backend::is_host<Backend> {
    detail::subtract_filter_scores<T>("DiagonalFilter::subtract_scores", features(), X, X, scores,
                                      0, causal, [this](const auto& x) { return times_d(x); });
  }

 private:
  static const Eigen::Ref<const RowVector<T>>& checked(
      const Eigen::Ref<const RowVector<T>>& theta) {
    if constexpr (D != Dynamic)
      check_dim("DiagonalFilter: theta size (compile-time d)", D, theta.size());
    if (theta.size() == 0)
      throw ShapeError(detail::expected_found("DiagonalFilter: theta size", "d >= 1", 0));
    return theta;
  }

  /// X D [T, d] (X's width checked by the caller).
  RowMatrix<T> times_d(const Eigen::Ref<const Activations<T>>& X) const {
    return (X.array().rowwise() * diagonal_.array()).matrix();
  }

  Vector theta_;
  Vector diagonal_;
};

/// D = softplus(θ) I with one scalar θ (per head), for any width d. θ and softplus(θ) are
/// host scalars on every backend.
template <class T, class Backend = backend::cpu>
class ScalarFilter : public ComponentTypes<T, Backend> {
  using Types = ComponentTypes<T, Backend>;

 public:
  using typename Types::ConstView, typename Types::View;
  static constexpr int size = Dynamic;
  template <class B>
  using on_backend = ScalarFilter<T, B>;

  /// θ = 0: D = log(2) I.
  ScalarFilter() requires backend::is_host<Backend> : ScalarFilter(T(0)) {}
  /// softplus(θ) by the backend's kernel, on the host.
  explicit ScalarFilter(T theta) requires backend::is_host<Backend> : theta_(theta) {
    value_ = theta;
    kernels::transform(Backend{}, &value_, 1, kernels::SoftplusOp{});
  }

  /// The same filter on another backend (θ and its value copied, not recomputed).
  template <class From>
  requires(!std::is_same_v<From, Backend>) explicit ScalarFilter(const ScalarFilter<T, From>& from)
      : ScalarFilter(from.theta(), from.value()) {}

  /// The filter whose value is `value` (finite, > 0), kept as given, with θ = softplus⁻¹(value)
  /// = value + log(1 − e^(−value)) in double (e.g. an S–D head's diagonal replaced by its mean).
  /// Computed on the host without the SIMD kernels. ArgumentError for another value.
  static ScalarFilter from_value(T value) requires backend::is_host<Backend> {
    const double v = static_cast<double>(value);
    if (!(v > 0.0) || !std::isfinite(v)) {
      throw ArgumentError(
          detail::expected_found("ScalarFilter::from_value: value", "a finite value > 0", v));
    }
    return ScalarFilter(static_cast<T>(v + std::log(-std::expm1(-v))), value);
  }

  T theta() const { return theta_; }
  /// softplus(θ) >= 0.
  T value() const { return value_; }
  /// softplus(θ) repeated d times [d].
  RowVector<T> diagonal(Index d) const requires backend::is_host<Backend> {
    return RowVector<T>::Constant(d, value_);
  }
  /// D = softplus(θ) I [d, d].
  RowMatrix<T> dense(Index d) const requires backend::is_host<Backend> {
    return value_ * RowMatrix<T>::Identity(d, d);
  }
  /// Free parameters: 1.
  Index parameter_count() const { return 1; }
  /// Any width fits: no check.
  void check_width(std::string_view, Index) const {}

  /// f = (softplus(θ) X)·factor [T, d]: x_i D x_jᵀ = f_i · x_j for factor 1 (each product
  /// rounded, then scaled, as DiagonalFilter's). ShapeError on an output-size mismatch. O(T·d).
  void query_features(Context<Backend>& ctx, const ConstView& X, View out, T factor = T(1)) const {
    if (out.rows() != X.rows() || out.cols() != X.cols()) {
      check_dim("ScalarFilter::query_features: output rows (T)", X.rows(), out.rows());
      check_dim("ScalarFilter::query_features: output cols (d)", X.cols(), out.cols());
    }
    ops::copy(ctx, X, out);
    ops::scale(ctx, out, value_);
    if (factor != T(1))
      ops::scale(ctx, out, factor);
  }

  /// scores(i, j) −= softplus(θ) xq_i·xk_j for j <= past + i (see DiagonalFilter).
  void subtract_scores(const Eigen::Ref<const Activations<T>>& Xq,
                       const Eigen::Ref<const Activations<T>>& Xk, Eigen::Ref<RowMatrix<T>> scores,
                       Index past) const requires backend::is_host<Backend> {
    detail::subtract_filter_scores<T>("ScalarFilter::subtract_scores", 0, Xq, Xk, scores, past,
                                      true, [this](const auto& x) { return times_d(x); });
  }

  /// scores(i, j) −= softplus(θ) x_i·x_j for X [T, d]: only j <= i when causal, else all.
  void subtract_scores(const Eigen::Ref<const Activations<T>>& X, Eigen::Ref<RowMatrix<T>> scores,
                       bool causal) const requires backend::is_host<Backend> {
    detail::subtract_filter_scores<T>("ScalarFilter::subtract_scores", 0, X, X, scores, 0, causal,
                                      [this](const auto& x) { return times_d(x); });
  }

 private:
  ScalarFilter(T theta, T value) : theta_(theta), value_(value) {}

  /// softplus(θ) X [T, d].
  RowMatrix<T> times_d(const Eigen::Ref<const Activations<T>>& X) const { return value_ * X; }

  T theta_ = T(0);
  T value_ = T(0);
};

}  // namespace nlb
