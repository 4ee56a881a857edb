// The hyperplane gate of PAPERS.md §A3: d + 1 parameters that send a token to the MLP's linear
// surrogate iff x·w' + b' > threshold, trained by L2 logistic regression on z-scored inputs.
// Math, solver and calibration: docs/hyperplane_gate.md. Scoring and routing are written once for
// every backend (DESIGN.md §4); fitting and calibration run on the host, in double.
#pragma once

// Calls the ops by qualified name: nlb/cuda.cuh must come first (nlb/cuda/ops.cuh checks).
#define NLB_OPS_CALLERS_INCLUDED

#include <Eigen/Core>
#include <cmath>
#include <cstdint>
#include <span>
#include <string>
#include <type_traits>
#include <utility>
#include <vector>

#include "nlb/core.hpp"
#include "nlb/core/component_types.hpp"
#include "nlb/core/context.hpp"
#include "nlb/core/host_device.hpp"
#include "nlb/core/storage.hpp"
#include "nlb/mlp/detail/fitted_storage.hpp"
#include "nlb/mlp/detail/gate_calibration.hpp"
#include "nlb/mlp/detail/gate_newton.hpp"
#include "nlb/mlp/gate_labels.hpp"
#include "nlb/mlp/row_parts.hpp"
#include "nlb/ops/elementwise.hpp"
#include "nlb/ops/gemm.hpp"
#include "nlb/ops/rows.hpp"
#include "nlb/ops/scratch.hpp"

namespace nlb {

/// Options of HyperplaneGate::fit.
struct GateFitOptions {
  double C = 1.0;                    ///< inverse regularisation strength (sklearn's C), > 0
  double gradient_tolerance = 1e-8;  ///< stop when ‖∇f‖∞ <= this, > 0
  int max_iterations = 100;          ///< Newton steps at most, >= 0
};

/// How a fit went. The fit converged iff gradient_norm <= options.gradient_tolerance.
struct GateFitReport {
  int iterations;        ///< Newton steps taken
  double gradient_norm;  ///< ‖∇f‖∞ of the regularised objective at the solution
  double objective;      ///< f = ½‖w‖² + C Σ log(1 + exp(−y (w·z + b))) at the solution
  double
      training_accuracy;  ///< share of training rows whose (unfolded) score sign matches the label
};

namespace mlp::detail {
/// x + shift elementwise, as a host/device functor (nlb/kernels/elementwise.hpp's form): the
/// gate's folded bias added to its scores by ops::transform on any backend, the same one
/// rounding per value as `scores.array() += shift`.
template <class T>
struct AddConstant {
  T shift;
  NLB_EXEC_CHECK_DISABLE
  template <class V>
  NLB_HOST_DEVICE V operator()(V x) const {
    return x + V(shift);
  }
};
}  // namespace mlp::detail

/// A linear gate over token activations (PAPERS.md §A3). After fitting, the z-score is folded into
/// the weights (w' = w ⊘ σ, b' = b − w'·μ), so a score costs one length-d dot product per token:
/// `score(x) = x·w' + b'`, and the token takes the linear path iff score(x) > threshold (default 0,
/// i.e. p = σ(score) > 0.5). The unfolded (w, b, μ, σ) are kept, in double, for reference and
/// tests. Bigger gates did no better in the paper (§A3), so this is the one the library offers.
///
/// T: scalar of activations and of the folded parameters (float, double). D: width, compile-time
/// or Dynamic. Backend: any; scoring and routing are written once for every backend (one
/// ops::gemm, one ops::transform, one ops::partition_rows), the folded weight kept in T in the
/// backend's memory (mlp/detail/fitted_storage.hpp), the folded bias and the threshold on the
/// host. Fitting, calibration and the host conveniences run on host backends, in double; a
/// device gate is a copy of a fitted host gate (to_backend).
template <class T, int D = Dynamic, class Backend = backend::cpu>
class HyperplaneGate : public ComponentTypes<T, Backend> {
  static_assert(std::is_floating_point_v<T>, "HyperplaneGate<T, ...>: T must be float or double");
  using Storage = storage_traits<Backend, T>;
  using Types = ComponentTypes<T, Backend>;

 public:
  using typename Types::ConstView, typename Types::View;
  static constexpr int size = D;
  /// The folded weight w' [d, 1]: ColVector<T, D> on the host.
  using Weight = mlp::detail::fitted_matrix<Backend, T, D, 1>;
  /// A list of row indices in the backend's memory (route()'s output).
  using IndexVector = typename Storage::index_vector;
  template <class B>
  using on_backend = HyperplaneGate<T, D, B>;

  /// An unfitted gate: zero weight and bias (every score 0, so nothing exceeds threshold 0).
  /// features() is D for a fixed width, 0 for Dynamic.
  HyperplaneGate()
      : folded_weight_(mlp::detail::to_fitted<Weight, Backend>(
            ColVector<T, D>(ColVector<T, D>::Zero(D == Dynamic ? 0 : D)))),
        weight_(ColVector<double, D>::Zero(D == Dynamic ? 0 : D)),
        mean_(ColVector<double, D>::Zero(D == Dynamic ? 0 : D)),
        scale_(ColVector<double, D>::Ones(D == Dynamic ? 0 : D)) {}

  /// A gate built from already folded parameters: folded_weight [d], folded_bias, threshold.
  /// The unfolded view is then w = folded_weight, b = folded_bias, μ = 0, σ = 1.
  /// Throws NumericError for a non-finite weight or bias, ArgumentError for a NaN threshold.
  HyperplaneGate(ColVector<T, D> folded_weight, T folded_bias, T threshold = 0)
      : folded_bias_(folded_bias) {
    check_finite("HyperplaneGate folded weight", folded_weight);
    if (!std::isfinite(static_cast<double>(folded_bias_))) {
      throw NumericError(
          detail::expected_found("HyperplaneGate folded bias", "a finite value", folded_bias_));
    }
    set_threshold(threshold);
    weight_ = folded_weight.template cast<double>();
    bias_ = static_cast<double>(folded_bias_);
    mean_ = ColVector<double, D>::Zero(folded_weight.size());
    scale_ = ColVector<double, D>::Ones(folded_weight.size());
    folded_weight_ = mlp::detail::to_fitted<Weight, Backend>(std::move(folded_weight));
  }

  /// The same gate on another (host) backend: the folded weight copied into this backend's
  /// memory (uploaded once for backend::cuda); bias, threshold and the unfolded parameters kept.
  /// O(d).
  template <class From>
  requires(!std::is_same_v<From, Backend> &&
           backend::is_host<From>) explicit HyperplaneGate(const HyperplaneGate<T, D, From>& from)
      : folded_weight_(mlp::detail::to_fitted<Weight, Backend>(from.folded_weight())),
        folded_bias_(from.folded_bias()),
        threshold_(from.threshold()),
        weight_(from.unfolded_weight()),
        bias_(from.unfolded_bias()),
        mean_(from.feature_mean()),
        scale_(from.feature_scale()),
        constant_features_(from.constant_features()) {}

  /// Fits the gate to activations X [N, d] and labels [N] (1 = "linear OK", the positive class;
  /// 0 = needs the MLP), PAPERS.md §A3:
  ///  1. z-score each feature with μ, σ over the rows of X (σ = population std). A feature with
  ///     σ = 0 is constant: its scale is taken as 1 and its index listed in constant_features().
  ///  2. minimise ½‖w‖² + C Σ_i log(1 + exp(−y_i (w·z_i + b))), y_i = ±1, b not penalised
  ///  (sklearn's
  ///     convention), by Newton's method with LDLT and a backtracking line search, from w = 0,
  ///     b = 0 (deterministic), until ‖∇‖∞ <= gradient_tolerance (or max_iterations / a stalled
  ///     line search: check the report's gradient_norm).
  ///  3. fold: w' = w ⊘ σ, b' = b − w'·μ (with w' already rounded to T, so the rounding of w'
  ///     cancels at x = μ), and reset the threshold to 0.
  /// Throws ShapeError (labels.size() != N, no rows, no features), NumericError (NaN/Inf in X),
  /// ArgumentError (a label other than 0/1, only one class present, C <= 0, tolerance <= 0,
  /// max_iterations < 0). Cost: O(N d²) per Newton step (Hessian) + O(d³) (LDLT); memory
  /// O(d² + 256 d) beside X. The gate is unchanged if it throws.
  ///
  /// With `parts` (nlb/mlp/row_parts.hpp; e.g. nlb::distributed::row_parts over MPI ranks) X and
  /// labels are this part's rows — a part may hold none — and the fit is the one over all parts'
  /// rows: the standardization and every Newton sum are reduced over the parts, so all parts end
  /// with the same gate; it equals the one-part fit up to the order of those sums. Every part calls
  /// it together; the errors about rows and classes count all parts' rows.
  GateFitReport fit(const Eigen::Ref<const Activations<T>>& X, std::span<const std::uint8_t> labels,
                    const GateFitOptions& options = {},
                    const RowParts& parts = {}) requires backend::is_host<Backend> {
    check_options(options);
    double rows = static_cast<double>(X.rows());
    parts.add_up(std::span(&rows, 1));
    if (rows == 0) {
      throw ShapeError(
          detail::expected_found("HyperplaneGate::fit activation rows", "at least 1", 0));
    }
    if (X.cols() == 0) {
      throw ShapeError(
          detail::expected_found("HyperplaneGate::fit activation columns", "at least 1", 0));
    }
    check_dim("HyperplaneGate::fit labels (one per activation row)", X.rows(),
              static_cast<long long>(labels.size()));
    check_finite("HyperplaneGate::fit activations", X);
    check_labels(labels, parts);

    const mlp::detail::FeatureStandardization standardization =
        mlp::detail::standardize_features(X, parts);
    const mlp::detail::LogisticSolution solution = mlp::detail::solve_logistic_newton(
        X, standardization, labels, options.C, options.gradient_tolerance, options.max_iterations,
        parts);

    weight_ = solution.weight;
    bias_ = solution.bias;
    mean_ = standardization.mean;
    scale_ = standardization.scale;
    constant_features_ = standardization.constant_features;
    fold();
    threshold_ = T(0);
    return GateFitReport{solution.iterations, solution.gradient_norm, solution.objective,
                         solution.training_accuracy};
  }

  /// scores[i] = X[i]·w' + b' for X [N, d] into scores [N, 1] (a column of the backend's
  /// memory; on the host also a ColVector), the product's scratch in `scratch`. Throws
  /// ShapeError if X has other than features() columns or scores other than [N, 1]. NaN rows
  /// give NaN scores, which never exceed a threshold (so route() keeps them on the MLP path).
  /// Cost: 2·N·d FLOPs (one matrix-vector product) and one pass over the scores.
  void score(Context<Backend>& ctx, const ConstView& X, View scores,
             ops::Scratch<Backend, T>& scratch) const {
    check_dim("HyperplaneGate::score activation columns", features(), X.cols());
    check_dim("HyperplaneGate::score output rows", X.rows(), scores.rows());
    check_dim("HyperplaneGate::score output columns", 1, scores.cols());
    if (X.rows() == 0)
      return;
    ops::gemm(ctx, X, folded_weight_, scores, scratch);  // [N, 1]
    // The bias after the product, as its own rounding (not folded into an accumulating GEMM):
    // the scores, and so the routing, are the same bits on every GEMM provider.
    ops::transform(ctx, scores, mlp::detail::AddConstant<T>{folded_bias_});
  }

  /// Routes X [N, d]: writes its scores to `scores` [N, 1] (as score()) and the row indices
  /// 0 … N−1 to `rows` (resized to N): first the rows with score > threshold() (the linear
  /// path), then the others, each group ascending. Returns how many took the linear path.
  /// Throws ShapeError as score(). Cost: score() + O(N) (on a device: one partition, and the
  /// count read back).
  Index route(Context<Backend>& ctx, const ConstView& X, View scores, IndexVector& rows,
              ops::Scratch<Backend, T>& scratch) const {
    score(ctx, X, scores, scratch);
    return ops::partition_rows(ctx, scores, rows, threshold_);
  }

  /// Scores of X [N, d] as a new vector [N] (host backends; score() with a context of one
  /// thread and a temporary scratch). O(N d).
  ColVector<T> score(const ConstView& X) const requires backend::is_host<Backend> {
    check_dim("HyperplaneGate::score activation columns", features(), X.cols());
    ColVector<T> scores(X.rows());
    Context<Backend> ctx;
    ops::Scratch<Backend, T> scratch;
    score(ctx, X, scores, scratch);
    return scores;
  }

  /// The unfolded reference score ((x − μ) ⊘ σ)·w + b per row of X [N, d], in double, for tests of
  /// the folding (host backends). Throws ShapeError on a column mismatch. O(N d).
  ColVector<double> score_unfolded(const ConstView& X) const requires backend::is_host<Backend> {
    check_dim("HyperplaneGate::score_unfolded activation columns", features(), X.cols());
    ColVector<double> scores(X.rows());
    for (Index i = 0; i < X.rows(); ++i) {
      double sum = bias_;
      for (Index j = 0; j < X.cols(); ++j) {
        sum += (static_cast<double>(X(i, j)) - mean_(j)) / scale_(j) * weight_(j);
      }
      scores(i) = sum;
    }
    return scores;
  }

  /// Per-row labels of X [N, d] (host backends): linear[i] = 1 iff score(X[i]) > threshold();
  /// `linear` is resized to N. Throws ShapeError on a column mismatch. O(N d).
  void route(const ConstView& X,
             std::vector<std::uint8_t>& linear) const requires backend::is_host<Backend> {
    const ColVector<T> scores = score(X);
    linear.resize(static_cast<std::size_t>(X.rows()));
    for (Index i = 0; i < X.rows(); ++i) {
      linear[static_cast<std::size_t>(i)] = scores(i) > threshold_ ? 1 : 0;
    }
  }

  /// Sets (and returns) the threshold so that round(fraction·N) rows of X [N, d] score above it
  /// (round half away from zero). Without tied scores the count is exact. Equal scores cannot be
  /// split, so if a group of g equal scores straddles the cut the count becomes the nearer of
  /// "whole group in" and "whole group out", an exact draw going to the smaller count: off by at
  /// most floor(g / 2) rows (so within one row while no score occurs more than 3 times). The
  /// threshold lies midway between the last score let through and the first kept out (where T
  /// can represent a value strictly between them, else on the lower one); a count of 0 gives
  /// the maximum score, a count of N the largest T below the minimum score.
  /// Throws ArgumentError (fraction NaN or outside [0, 1]), ShapeError (no rows, column
  /// mismatch), NumericError (a NaN score). O(N d + N log N).
  T calibrate_linear_fraction(const ConstView& X,
                              double fraction) requires backend::is_host<Backend> {
    check_fraction(fraction);
    if (X.rows() == 0) {
      throw ShapeError(detail::expected_found(
          "HyperplaneGate::calibrate_linear_fraction activation rows", "at least 1", 0));
    }
    const ColVector<T> scores = score(X);
    return calibrate_linear_fraction_of_scores(
        std::vector<T>(scores.data(), scores.data() + scores.size()), fraction);
  }

  /// calibrate_linear_fraction over scores already computed with this gate (score()): the rows
  /// of several processes gathered, for one threshold over all of them (docs/scaling.md). Same
  /// rule, same errors (ShapeError: no scores). O(N log N).
  T calibrate_linear_fraction_of_scores(std::vector<T> scores,
                                        double fraction) requires backend::is_host<Backend> {
    check_fraction(fraction);
    if (scores.empty()) {
      throw ShapeError(detail::expected_found(
          "HyperplaneGate::calibrate_linear_fraction activation rows", "at least 1", 0));
    }
    for (std::size_t i = 0; i < scores.size(); ++i) {
      if (std::isnan(scores[i])) {
        throw NumericError(detail::expected_found(
            "HyperplaneGate::calibrate_linear_fraction score of row " + std::to_string(i),
            "a number", "NaN"));
      }
    }
    const auto wanted =
        static_cast<Index>(std::llround(fraction * static_cast<double>(scores.size())));
    threshold_ = mlp::detail::threshold_for_count(scores, wanted);
    return threshold_;
  }

  /// Routing threshold on the score: linear iff score > threshold.
  T threshold() const { return threshold_; }
  /// Sets the routing threshold; ±Inf are allowed (route nothing / everything). ArgumentError on
  /// NaN.
  void set_threshold(T threshold) {
    if (std::isnan(threshold)) {
      throw ArgumentError(
          detail::expected_found("HyperplaneGate threshold", "a number or ±Inf", "NaN"));
    }
    threshold_ = threshold;
  }

  /// Folded weight w' = w ⊘ σ [d, 1] in this backend's memory (a ColVector<T, D> on the host).
  const Weight& folded_weight() const { return folded_weight_; }
  /// Folded bias b' = b − w'·μ.
  T folded_bias() const { return folded_bias_; }
  /// Width d the gate scores.
  Index features() const { return folded_weight_.rows(); }

  /// Unfolded weight w [d] of the z-scored features (double).
  const ColVector<double, D>& unfolded_weight() const requires backend::is_host<Backend> {
    return weight_;
  }
  /// Unfolded intercept b (double).
  double unfolded_bias() const { return bias_; }
  /// Per-feature mean μ [d] of the training rows.
  const ColVector<double, D>& feature_mean() const requires backend::is_host<Backend> {
    return mean_;
  }
  /// Per-feature scale σ [d] of the training rows (population std; 1 for constant features).
  const ColVector<double, D>& feature_scale() const requires backend::is_host<Backend> {
    return scale_;
  }
  /// Indices of features that were constant in the last fit (their scale was taken as 1).
  const std::vector<Index>& constant_features() const { return constant_features_; }

 private:
  static void check_options(const GateFitOptions& options) {
    if (!(options.C > 0.0) || !std::isfinite(options.C)) {
      throw ArgumentError(
          detail::expected_found("GateFitOptions::C", "a finite value > 0", options.C));
    }
    if (!(options.gradient_tolerance > 0.0)) {
      throw ArgumentError(detail::expected_found("GateFitOptions::gradient_tolerance",
                                                 "a value > 0", options.gradient_tolerance));
    }
    if (options.max_iterations < 0) {
      throw ArgumentError(detail::expected_found("GateFitOptions::max_iterations", "a value >= 0",
                                                 options.max_iterations));
    }
  }

  static void check_fraction(double fraction) {
    if (!(fraction >= 0.0 && fraction <= 1.0)) {
      throw ArgumentError(detail::expected_found(
          "HyperplaneGate::calibrate_linear_fraction fraction", "a value in [0, 1]", fraction));
    }
  }
  static void check_labels(std::span<const std::uint8_t> labels, const RowParts& parts) {
    double counts[2] = {0.0, static_cast<double>(labels.size())};  // linear, all (every part)
    for (std::size_t i = 0; i < labels.size(); ++i) {
      if (labels[i] > 1) {
        throw ArgumentError(detail::expected_found("HyperplaneGate::fit label " + std::to_string(i),
                                                   "0 or 1", static_cast<int>(labels[i])));
      }
      counts[0] += labels[i];
    }
    parts.add_up(counts);
    const auto linear = static_cast<long long>(counts[0]);
    const auto nonlinear = static_cast<long long>(counts[1]) - linear;
    if (linear == 0 || nonlinear == 0) {
      throw ArgumentError(detail::expected_found(
          "HyperplaneGate::fit labels", "both classes (1 = linear OK, 0 = needs the MLP) present",
          "only class " + std::string(linear == 0 ? "0" : "1") + " (" + std::to_string(linear) +
              " rows labelled 1, " + std::to_string(nonlinear) + " rows labelled 0)"));
    }
  }

  // w' = w ⊘ σ rounded to T; b' = b − ŵ'·μ with the rounded ŵ', so that at x = μ the folded score
  // is b up to the rounding of b' and of the dot product, whatever the rounding of w' was.
  void fold() requires backend::is_host<Backend> {
    const Index d = weight_.size();
    folded_weight_.resize(d);
    double shifted = bias_;
    for (Index j = 0; j < d; ++j) {
      folded_weight_(j) = static_cast<T>(weight_(j) / scale_(j));
      shifted -= static_cast<double>(folded_weight_(j)) * mean_(j);
    }
    folded_bias_ = static_cast<T>(shifted);
  }

  Weight folded_weight_;  // [d, 1]
  T folded_bias_ = T(0);
  T threshold_ = T(0);
  ColVector<double, D> weight_;  // [d] unfolded w
  double bias_ = 0.0;
  ColVector<double, D> mean_;   // [d] μ
  ColVector<double, D> scale_;  // [d] σ
  std::vector<Index> constant_features_;
};

}  // namespace nlb
