// Filtering D >= 0 of S–D attention (PAPERS.md §B2; docs/attention.md): the symmetric,
// positive semi-definite part of a head's bilinear form, subtracted from the routing scores,
// so that every eigenvalue of S − D has a non-positive real part.
//   DiagonalFilter: D = diag(softplus θ), θ [d], one weight per feature.
//   ScalarFilter:   D = softplus(θ) I, θ one scalar per head (the "inversion" experiment).
// Both expose the same interface: the filter term x_i D x_jᵀ = f_i · x_j with the query-side
// features f = X D (query_features), so it can be fused with the routing features into one
// GEMM (SDAttention), or subtracted from given scores (subtract_scores).
#pragma once

#include <cmath>
#include <string>
#include <string_view>

#include "nlb/attention/detail/causal_product.hpp"
#include "nlb/core.hpp"
#include "nlb/kernels/elementwise.hpp"
#include "nlb/ops/elementwise.hpp"

namespace nlb {

/// D = diag(softplus θ) with θ [d] (D fixed at compile time or Dynamic). The diagonal is
/// computed once, at construction, with the backend's softplus kernel.
template <class T, int D = Dynamic, class Backend = backend::cpu>
class DiagonalFilter {
  static_assert(backend::is_host<Backend>,
                "DiagonalFilter: a host component: Backend must be backend::scalar or "
                "backend::simd<Arch> (backend::cuda runs its own components)");

 public:
  using Scalar = T;
  using backend_type = Backend;
  static constexpr int size = D;

  DiagonalFilter() = default;

  /// θ [d]. ShapeError when d differs from a fixed D or is 0 (checked before θ is copied: a
  /// fixed-size copy of the wrong size would be undefined behaviour in release builds).
  explicit DiagonalFilter(const Eigen::Ref<const RowVector<T>>& theta) : theta_(checked(theta)) {
    diagonal_ = theta_;
    ops::transform(Backend{}, diagonal_.data(), diagonal_.size(), kernels::SoftplusOp{});
  }

  Index features() const { return theta_.size(); }
  /// The free parameters θ [d].
  const RowVector<T, D>& theta() const { return theta_; }
  /// softplus(θ) [d], every entry >= 0 (> 0 unless θ_k < about −745 in double / −104 in float).
  const RowVector<T, D>& diagonal() const { return diagonal_; }
  /// D = diag(softplus θ) [d, d].
  RowMatrix<T> dense() const { return diagonal_.transpose().asDiagonal(); }

  /// Free parameters: d.
  Index parameter_count() const { return theta_.size(); }

  /// ShapeError unless d equals this filter's width (`what` names the caller). The message is
  /// built only on a mismatch: forward passes call this per head.
  void check_width(std::string_view what, Index d) const {
    if (d != features())
      check_dim(std::string(what) + ": filter width (d)", features(), d);
  }

  /// f = X D [T, d] for X [T, d]: x_i D x_jᵀ = f_i · x_j. O(T·d).
  void query_features(const Eigen::Ref<const Activations<T>>& X,
                      Eigen::Ref<RowMatrix<T>> out) const {
    check_width("DiagonalFilter::query_features: input", X.cols());
    check_dim("DiagonalFilter::query_features: output rows (T)", X.rows(), out.rows());
    check_dim("DiagonalFilter::query_features: output cols (d)", X.cols(), out.cols());
    out = X.array().rowwise() * diagonal_.array();
  }

  /// scores(i, j) −= xq_i D xk_jᵀ for the causal entries j <= past + i, with Xq [T, d] the
  /// queries at positions [past, past + T), Xk [past + T, d] every key, scores [T, >= past + T];
  /// other entries untouched. O(T·(past + T/2)·d). ShapeError on mismatched shapes.
  void subtract_scores(const Eigen::Ref<const Activations<T>>& Xq,
                       const Eigen::Ref<const Activations<T>>& Xk, Eigen::Ref<RowMatrix<T>> scores,
                       Index past) const {
    check_subtract("DiagonalFilter::subtract_scores", features(), Xq, Xk, scores, past);
    const RowMatrix<T> f = -(Xq.array().rowwise() * diagonal_.array()).matrix();
    detail::causal_product<T>(f, Xk, scores, past, true);
  }

  /// scores(i, j) −= x_i D x_jᵀ for X [T, d], scores [T, T]: only j <= i when causal, else all.
  void subtract_scores(const Eigen::Ref<const Activations<T>>& X, Eigen::Ref<RowMatrix<T>> scores,
                       bool causal) const {
    if (causal) {
      subtract_scores(X, X, scores, 0);
      return;
    }
    check_subtract("DiagonalFilter::subtract_scores", features(), X, X, scores, 0);
    scores.noalias() -= (X.array().rowwise() * diagonal_.array()).matrix() * X.transpose();
  }

  /// Shared shape checks of subtract_scores (also used by ScalarFilter; width 0 = any).
  static void check_subtract(const std::string& what, Index width,
                             const Eigen::Ref<const Activations<T>>& Xq,
                             const Eigen::Ref<const Activations<T>>& Xk,
                             const Eigen::Ref<RowMatrix<T>>& scores, Index past) {
    if (width > 0)
      check_dim(what + ": query width (d)", width, Xq.cols());
    check_dim(what + ": key width (d)", Xq.cols(), Xk.cols());
    if (past < 0)
      throw ArgumentError(detail::expected_found(what + ": past", "a value >= 0", past));
    check_dim(what + ": key rows (past + T)", past + Xq.rows(), Xk.rows());
    check_dim(what + ": score rows (T)", Xq.rows(), scores.rows());
    if (scores.cols() < Xk.rows()) {
      throw ShapeError(detail::expected_found(what + ": score cols",
                                              "at least past + T = " + std::to_string(Xk.rows()),
                                              scores.cols()));
    }
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

  RowVector<T, D> theta_;
  RowVector<T, D> diagonal_;
};

/// D = softplus(θ) I with one scalar θ (per head), for any width d.
template <class T, class Backend = backend::cpu>
class ScalarFilter {
  static_assert(backend::is_host<Backend>,
                "ScalarFilter: a host component: Backend must be backend::scalar or "
                "backend::simd<Arch> (backend::cuda runs its own components)");

 public:
  using Scalar = T;
  using backend_type = Backend;
  static constexpr int size = Dynamic;

  /// θ = 0: D = log(2) I.
  ScalarFilter() : ScalarFilter(T(0)) {}
  explicit ScalarFilter(T theta) : theta_(theta) {
    value_ = theta;
    ops::transform(Backend{}, &value_, 1, kernels::SoftplusOp{});
  }

  /// The filter whose value is `value` (finite, > 0), kept as given, with θ = softplus⁻¹(value)
  /// = value + log(1 − e^(−value)) in double (e.g. an S–D head's diagonal replaced by its mean).
  /// Computed on the host without the SIMD kernels. ArgumentError for another value.
  static ScalarFilter from_value(T value) {
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
  RowVector<T> diagonal(Index d) const { return RowVector<T>::Constant(d, value_); }
  /// D = softplus(θ) I [d, d].
  RowMatrix<T> dense(Index d) const { return value_ * RowMatrix<T>::Identity(d, d); }
  /// Free parameters: 1.
  Index parameter_count() const { return 1; }
  /// Any width fits: no check.
  void check_width(std::string_view, Index) const {}

  /// f = softplus(θ) X [T, d]: x_i D x_jᵀ = f_i · x_j. O(T·d).
  void query_features(const Eigen::Ref<const Activations<T>>& X,
                      Eigen::Ref<RowMatrix<T>> out) const {
    check_dim("ScalarFilter::query_features: output rows (T)", X.rows(), out.rows());
    check_dim("ScalarFilter::query_features: output cols (d)", X.cols(), out.cols());
    out = value_ * X;
  }

  /// scores(i, j) −= softplus(θ) xq_i·xk_j for j <= past + i (see DiagonalFilter).
  void subtract_scores(const Eigen::Ref<const Activations<T>>& Xq,
                       const Eigen::Ref<const Activations<T>>& Xk, Eigen::Ref<RowMatrix<T>> scores,
                       Index past) const {
    DiagonalFilter<T, Dynamic, Backend>::check_subtract("ScalarFilter::subtract_scores", 0, Xq, Xk,
                                                        scores, past);
    const RowMatrix<T> f = -value_ * Xq;
    detail::causal_product<T>(f, Xk, scores, past, true);
  }

  /// scores(i, j) −= softplus(θ) x_i·x_j for X [T, d]: only j <= i when causal, else all.
  void subtract_scores(const Eigen::Ref<const Activations<T>>& X, Eigen::Ref<RowMatrix<T>> scores,
                       bool causal) const {
    if (causal) {
      subtract_scores(X, X, scores, 0);
      return;
    }
    DiagonalFilter<T, Dynamic, Backend>::check_subtract("ScalarFilter::subtract_scores", 0, X, X,
                                                        scores, 0);
    scores.noalias() -= (value_ * X) * X.transpose();
  }

 private:
  ScalarFilter(T theta, T value) : theta_(theta), value_(value) {}

  T theta_ = T(0);
  T value_ = T(0);
};

}  // namespace nlb
