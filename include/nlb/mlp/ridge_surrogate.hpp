// The ridge surrogate of one MLP, Y ≈ X W + b (PAPERS.md §A1), its fit from streamed
// statistics, and the paper's SVD closed form as a reference. The surrogate is written once for
// every backend (DESIGN.md §4); fitting runs on the host, in double.
#pragma once

// Calls the ops by qualified name: nlb/cuda.cuh must come first (nlb/cuda/ops.cuh checks).
#define NLB_OPS_CALLERS_INCLUDED

#include <Eigen/Dense>
#include <algorithm>
#include <cmath>
#include <limits>
#include <type_traits>
#include <utility>

#include "nlb/core.hpp"
#include "nlb/core/component_types.hpp"
#include "nlb/core/context.hpp"
#include "nlb/core/storage.hpp"
#include "nlb/mlp/detail/fitted_storage.hpp"
#include "nlb/mlp/detail/ridge_linalg.hpp"
#include "nlb/mlp/ridge_stats.hpp"
#include "nlb/mlp/route_counts.hpp"
#include "nlb/ops/gemm.hpp"
#include "nlb/ops/scratch.hpp"

namespace nlb {

/// A ridge solution in double: weight [d_in, d_out], bias [d_out].
struct RidgeSolution {
  Eigen::MatrixXd weight;
  Eigen::RowVectorXd bias;
};

/// The paper's closed form on a data matrix (PAPERS.md §A1, [paper] + [code]), in double:
/// center X_c = X − x̄, Y_c = Y − ȳ, thin SVD X_c = U S Vᵀ (Eigen::BDCSVD),
/// W = V diag(s / (s² + λ)) Uᵀ Y_c, b = ȳ − x̄ W. λ is absolute (not scaled by N).
///
/// X [N, d_in], Y [N, d_out], float or double, any storage order. The reference the streamed
/// fit is tested against; it holds all N rows in memory. Throws ArgumentError for λ ≤ 0 or
/// non-finite, ShapeError if the row counts differ, NumericError for N = 0 or NaN/Inf data.
/// Cost: O(N d_in min(N, d_in)) for the SVD + 2 min(N, d_in) (N + d_in) d_out.
template <class XDerived, class YDerived>
RidgeSolution fit_svd(const Eigen::MatrixBase<XDerived>& X, const Eigen::MatrixBase<YDerived>& Y,
                      double lambda = 0.01) {
  ridge::detail::check_lambda("fit_svd", lambda);
  check_dim("fit_svd: Y rows (rows of X)", X.rows(), Y.rows());
  if (X.rows() == 0) {
    throw NumericError(nlb::detail::expected_found("fit_svd: rows", "at least 1", 0));
  }
  check_finite("fit_svd: X", X);
  check_finite("fit_svd: Y", Y);
  const Eigen::MatrixXd x = X.template cast<double>();  // [N, d_in]
  const Eigen::MatrixXd y = Y.template cast<double>();  // [N, d_out]
  const Eigen::RowVectorXd mean_x = x.colwise().mean();
  const Eigen::RowVectorXd mean_y = y.colwise().mean();
  const Eigen::MatrixXd x_c = x.rowwise() - mean_x;  // [N, d_in]
  const Eigen::MatrixXd y_c = y.rowwise() - mean_y;  // [N, d_out]
  const Eigen::BDCSVD<Eigen::MatrixXd> svd(x_c, Eigen::ComputeThinU | Eigen::ComputeThinV);
  const Eigen::ArrayXd s = svd.singularValues().array();  // [r], r = min(N, d_in)
  const Eigen::ArrayXd factor = s / (s.square() + lambda);
  Eigen::MatrixXd projected;  // [r, d_out]
  projected.noalias() = svd.matrixU().transpose() * y_c;
  RidgeSolution out;
  out.weight.noalias() = svd.matrixV() * (factor.matrix().asDiagonal() * projected);
  out.bias = mean_y - mean_x * out.weight;
  return out;
}

/// What one RidgeSurrogate::fit computed besides W and b.
///
/// R² is pooled over outputs: `1 − Σ_k SSE_k / Σ_k Syy_k`, SSE_k being output k's residual
/// sum of squares on the fitting rows and Syy_k its centered sum of squares (both from the
/// statistics, no second pass over the data). NaN when Σ Syy = 0 (constant targets).
struct RidgeFitReport {
  Index count = 0;      // n: rows the statistics came from
  double lambda = 0.0;  // the ridge penalty used (absolute, PAPERS.md §A1)
  double r2 = std::numeric_limits<double>::quiet_NaN();  // pooled fit R²
  double sse = 0.0;  // Σ_k SSE_k (rounding can push the co-moment form below 0: clamped at 0)
  double sst = 0.0;  // Σ_k Syy_k
  double min_eigenvalue = 0.0;        // smallest eigenvalue of Cxx as computed (< 0: rounding)
  double max_eigenvalue = 0.0;        // largest eigenvalue of Cxx
  Index clamped_eigenvalues = 0;      // negative eigenvalues set to 0 before adding λ
  double effective_parameters = 0.0;  // Σ_j e_j / (e_j + λ), effective inputs per output
};

namespace ridge::detail {

/// Ridge regression from centered co-moments (PAPERS.md §A1, [ours]), in double:
/// Cxx = V diag(e) Vᵀ, W = V diag(1 / (max(e, 0) + λ)) Vᵀ Cxy, b = ȳ − x̄ W, and the report.
/// With G = Vᵀ Cxy: SSE = Σ Syy − 2⟨W, Cxy⟩ + ⟨W, Cxx W⟩
///                     = Σ Syy − Σ_j ‖G_j‖² (e_j + 2λ) / (e_j + λ)².
/// Reads only the lower triangle of Cxx. Cost: O(d_in³) + 4 d_in² d_out FLOPs.
template <int DIn, int DOut>
std::pair<RidgeSolution, RidgeFitReport> solve(const RidgeStats<DIn, DOut>& stats, double lambda) {
  const Eigen::SelfAdjointEigenSolver<Eigen::MatrixXd> eigen(stats.cxx(),
                                                             Eigen::ComputeEigenvectors);
  if (eigen.info() != Eigen::Success) {
    throw NumericError(nlb::detail::expected_found("RidgeSurrogate::fit: eigendecomposition of Cxx",
                                                   "convergence", "no convergence"));
  }
  const Eigen::VectorXd& raw = eigen.eigenvalues();  // [d_in], ascending
  const Eigen::MatrixXd& v = eigen.eigenvectors();   // [d_in, d_in]

  RidgeFitReport report;
  report.count = stats.count();
  report.lambda = lambda;
  report.min_eigenvalue = raw(0);
  report.max_eigenvalue = raw(raw.size() - 1);
  // Cxx is a Gram matrix, hence PSD: a negative eigenvalue is rounding (|e| ~ eps ‖Cxx‖) of
  // a zero one, which a singular Cxx has (the LayerNorm case, PAPERS.md §A1). Clamping to 0
  // gives the nearest PSD matrix and keeps e + λ ≥ λ, so ‖W‖ ≤ ‖Cxy‖ / λ always holds.
  const Eigen::ArrayXd e = raw.array().max(0.0);  // [d_in]
  report.clamped_eigenvalues = (raw.array() < 0.0).count();
  const Eigen::ArrayXd shifted = e + lambda;  // e_j + λ > 0
  report.effective_parameters = (e / shifted).sum();

  Eigen::MatrixXd g;  // [d_in, d_out]: Cxy in the eigenbasis
  g.noalias() = v.transpose() * stats.cxy();
  const Eigen::ArrayXd g_norm2 = g.rowwise().squaredNorm().array();  // ‖G_j‖² [d_in]
  g = shifted.inverse().matrix().asDiagonal() * g;

  RidgeSolution solution;
  solution.weight.noalias() = v * g;  // [d_in, d_out]
  // Dynamic copies of the means: with a short fixed-size mean, GCC 12 reports a false
  // -Warray-bounds inside Eigen's vectorized assignment to the Dynamic bias.
  const Eigen::RowVectorXd mean_x = stats.mean_x();  // [d_in]
  const Eigen::RowVectorXd mean_y = stats.mean_y();  // [d_out]
  solution.bias = mean_y - mean_x * solution.weight;

  report.sst = stats.syy().sum();
  const double explained = (g_norm2 * (e + 2.0 * lambda) / shifted.square()).sum();
  report.sse = std::max(report.sst - explained, 0.0);  // SSE ≥ 0; the difference can round < 0
  report.r2 =
      report.sst > 0.0 ? 1.0 - report.sse / report.sst : std::numeric_limits<double>::quiet_NaN();
  return {std::move(solution), report};
}

}  // namespace ridge::detail

/// The linear surrogate of one MLP: Y = X W + b with W [d_in, d_out], b [d_out]
/// (PAPERS.md §A1), fitted in double by ridge regression on the host and stored in T on every
/// backend (mlp/detail/fitted_storage.hpp: not in a backend's 16-bit weight storage). Written
/// once for every backend: forward() is one ops::gemm_bias.
///
/// T: float or double. DIn, DOut: compile-time sizes or Dynamic; fixed sizes are checked
/// against run-time data. Cost of forward(): 2·T·d_in·d_out FLOPs.
template <class T, int DIn = Dynamic, int DOut = Dynamic, class Backend = backend::cpu>
class RidgeSurrogate : public ComponentTypes<T, Backend> {
  static_assert(std::is_same_v<T, float> || std::is_same_v<T, double>,
                "RidgeSurrogate: T must be float or double");
  using Storage = storage_traits<Backend, T>;
  using Types = ComponentTypes<T, Backend>;

 public:
  using typename Types::ConstView, typename Types::View;
  using BackendType = Backend;
  static constexpr int in_size = DIn;
  static constexpr int out_size = DOut;
  using Input = typename Storage::template activations<DIn>;    // [T, d_in]
  using Output = typename Storage::template activations<DOut>;  // [T, d_out]
  /// Scratch for forward(): the ops' scratch (the product's packing buffers).
  using Workspace = ops::Scratch<Backend, T>;
  using Weight = mlp::detail::fitted_matrix<Backend, T, DIn, DOut>;  // [d_in, d_out]
  using Bias = typename Storage::template vector<DOut>;              // [1, d_out]
  template <class B>
  using on_backend = RidgeSurrogate<T, DIn, DOut, B>;

  /// Zero weights of the compile-time sizes (0 x 0 for Dynamic); r2() is NaN.
  RidgeSurrogate()
      : RidgeSurrogate(RowMatrix<T, DIn, DOut>::Zero(size_or<DIn>(0), size_or<DOut>(0)),
                       RowVector<T, DOut>::Zero(size_or<DOut>(0))) {}

  /// A surrogate with the given weight [d_in, d_out] and bias [d_out] (host matrices; moved in on
  /// the host, uploaded to a device); r2() is NaN. Throws ShapeError if they do not fit together
  /// or do not match the compile-time sizes, NumericError if an entry is NaN or Inf.
  RidgeSurrogate(RowMatrix<T, DIn, DOut> weight, RowVector<T, DOut> bias) {
    if constexpr (DIn != Dynamic) {
      check_dim("RidgeSurrogate: weight rows (compile-time d_in)", DIn, weight.rows());
    }
    if constexpr (DOut != Dynamic) {
      check_dim("RidgeSurrogate: weight cols (compile-time d_out)", DOut, weight.cols());
    }
    check_dim("RidgeSurrogate: bias size (weight cols, d_out)", weight.cols(), bias.size());
    check_finite("RidgeSurrogate: weight", weight);
    check_finite("RidgeSurrogate: bias", bias);
    weight_ = mlp::detail::to_fitted<Weight, Backend>(std::move(weight));
    bias_ = mlp::detail::to_fitted<Bias, Backend>(std::move(bias));
  }

  /// The same surrogate on another (host) backend: W and b copied (uploaded once for
  /// backend::cuda), the fit report kept. O(d_in·d_out).
  template <class From>
  requires(!std::is_same_v<From, Backend> && backend::is_host<From>) explicit RidgeSurrogate(
      const RidgeSurrogate<T, DIn, DOut, From>& from)
      : weight_(mlp::detail::to_fitted<Weight, Backend>(from.weight())),
        bias_(mlp::detail::to_fitted<Bias, Backend>(from.bias())),
        report_(from.fit_report()) {}

  /// Fits W and b by ridge regression with penalty λ (absolute; PAPERS.md §A1 uses 0.01)
  /// from accumulated statistics, in double: Cxx = V diag(e) Vᵀ (SelfAdjointEigenSolver),
  /// W = V diag(1 / (max(e, 0) + λ)) Vᵀ Cxy, b = ȳ − x̄ W, then stored cast to T. Equals the
  /// paper's SVD form (fit_svd) on the same rows; exact and stable for singular Cxx.
  /// Also computes the fit R² from the statistics (see RidgeFitReport) and returns the report
  /// (also kept: fit_report()). The sizes of `stats` may be Dynamic where these are fixed.
  /// Throws ArgumentError for λ ≤ 0 or non-finite, ShapeError for mismatched widths,
  /// NumericError for empty statistics (count 0) or non-finite co-moments (overflow).
  /// One row (count 1) is accepted: then W = 0 and b = ȳ. On a throw *this is unchanged.
  /// Cost: O(d_in³) (eigendecomposition) + 4 d_in² d_out FLOPs, independent of n. Host backends
  /// only (fit on the host, then copy with to_backend).
  template <int SIn, int SOut>
  requires backend::is_host<Backend> RidgeFitReport fit(const RidgeStats<SIn, SOut>& stats,
                                                        double lambda = 0.01) {
    static_assert(
        sizes_compatible<DIn, SIn> && sizes_compatible<DOut, SOut>,
        "RidgeSurrogate::fit: the statistics' compile-time sizes differ from the surrogate's");
    ridge::detail::check_lambda("RidgeSurrogate::fit", lambda);
    if constexpr (DIn != Dynamic) {
      check_dim("RidgeSurrogate::fit: statistics d_in (compile-time d_in)", DIn, stats.features());
    }
    if constexpr (DOut != Dynamic) {
      check_dim("RidgeSurrogate::fit: statistics d_out (compile-time d_out)", DOut,
                stats.out_features());
    }
    if (stats.count() == 0) {
      throw NumericError(nlb::detail::expected_found(
          "RidgeSurrogate::fit: statistics count", "at least 1 row (fitting empty statistics)", 0));
    }
    if (!stats.cxx().allFinite() || !stats.cxy().allFinite() || !stats.syy().allFinite()) {
      throw NumericError(nlb::detail::expected_found("RidgeSurrogate::fit: co-moments",
                                                     "finite values", "overflow to Inf/NaN"));
    }
    auto [solution, report] = ridge::detail::solve(stats, lambda);
    weight_ = solution.weight.template cast<T>();
    bias_ = solution.bias.template cast<T>();
    report_ = report;
    return report_;
  }

  /// Fit R² of the last fit() (pooled over outputs); NaN before any fit.
  double r2() const { return report_.r2; }
  /// The report of the last fit() (default values, r2 NaN, before any fit).
  const RidgeFitReport& fit_report() const { return report_; }

  /// Y = X W + b, X [T, d_in], Y [T, d_out] (Y must not alias X), with the product's scratch in
  /// `scratch`: no allocation once it has seen a product this large. Returns the rows that took
  /// the linear path (all of them). Throws ShapeError, before touching Y, if the widths or row
  /// counts differ. Cost: 2·T·d_in·d_out FLOPs (one GEMM).
  RouteCounts forward(Context<Backend>& ctx, const ConstView& X, View Y, Workspace& scratch) const {
    check_dim("RidgeSurrogate::forward: input width (d_in)", features(), X.cols());
    check_dim("RidgeSurrogate::forward: output rows (T)", X.rows(), Y.rows());
    check_dim("RidgeSurrogate::forward: output width (d_out)", out_features(), Y.cols());
    if (X.rows() == 0)
      return {0, 0};
    ops::gemm_bias(ctx, X, weight_, bias_, Y, scratch);  // [T, d_out]
    return {X.rows(), 0};
  }

  Index features() const { return weight_.rows(); }
  Index out_features() const { return weight_.cols(); }
  const Weight& weight() const { return weight_; }  // W [d_in, d_out]
  const Bias& bias() const { return bias_; }        // b [1, d_out]

 private:
  Weight weight_;
  Bias bias_;
  RidgeFitReport report_;
};

}  // namespace nlb
