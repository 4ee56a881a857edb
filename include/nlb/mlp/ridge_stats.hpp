// Streaming, mergeable sufficient statistics for the ridge surrogate (PAPERS.md §A1, [ours]).
#pragma once

#include <Eigen/Core>
#include <algorithm>
#include <cmath>
#include <span>
#include <string>
#include <type_traits>
#include <vector>

#include "nlb/core.hpp"
#include "nlb/mlp/detail/ridge_linalg.hpp"

namespace nlb {

/// Sufficient statistics of a ridge regression Y ≈ X W + b, accumulated in double from
/// batches of rows and mergeable across threads or machines, so the number of fitting rows
/// is not bounded by memory (PAPERS.md §A1, [ours]; the math is in docs/ridge_surrogate.md).
///
/// Holds the count n, the means x̄ [d_in] and ȳ [d_out], and the *centered* co-moments
///   Cxx = Σ (x − x̄)ᵀ(x − x̄)  [d_in, d_in]   (full and symmetric),
///   Cxy = Σ (x − x̄)ᵀ(y − ȳ)  [d_in, d_out],
///   Syy = Σ (y − ȳ)²        [d_out]         (per output, for R²).
/// They are never formed as Σ xᵀx − n x̄ᵀx̄, which cancels catastrophically when the mean is
/// large against the spread: add() centers each chunk of rows on its own mean and folds it in
/// with the pairwise update of Chan, Golub & LeVeque (see merge()), with the means kept as a
/// fixed shift plus a small offset so that no rounding of a large mean enters the update.
///
/// DIn, DOut: compile-time sizes or Dynamic. The means and Syy use RowVector (inline storage
/// when small); the matrices Cxx, Cxy are always heap-allocated Eigen::MatrixXd (column-major)
/// because fixed-size storage of a d² Gram matrix would not fit on the stack.
template <int DIn = Dynamic, int DOut = Dynamic>
class RidgeStats {
 public:
  static constexpr int in_size = DIn;
  static constexpr int out_size = DOut;
  using MeanX = RowVector<double, DIn>;   // [d_in]
  using MeanY = RowVector<double, DOut>;  // [d_out]
  using Gram = Eigen::MatrixXd;           // [d_in, d_in] or [d_in, d_out]

  /// Empty statistics (count 0) for d_in inputs and d_out outputs. Dynamic sizes must be
  /// given (ArgumentError if < 1); fixed ones must match the template (ShapeError).
  explicit RidgeStats(Index d_in = DIn, Index d_out = DOut) {
    check_size("RidgeStats: d_in", DIn, d_in);
    check_size("RidgeStats: d_out", DOut, d_out);
    mean_x_ = shift_x_ = MeanX::Zero(d_in);
    mean_y_ = shift_y_ = MeanY::Zero(d_out);
    offset_x_ = Eigen::RowVectorXd::Zero(d_in);
    offset_y_ = Eigen::RowVectorXd::Zero(d_out);
    syy_ = MeanY::Zero(d_out);
    cxx_ = Gram::Zero(d_in, d_in);
    cxy_ = Gram::Zero(d_in, d_out);
  }

  /// Adds a batch of rows: X [B, d_in], Y [B, d_out], any storage order, float or double
  /// (converted to double). B may be 0. Throws ShapeError on mismatched widths or row counts
  /// and NumericError naming the first NaN/Inf entry; both are checked before anything
  /// changes, so a rejected batch leaves the statistics as they were.
  /// Works in chunks of up to 1024 rows (bounded scratch memory). Cost: B·d_in²
  /// (symmetric rank-B update) + 2·B·d_in·d_out FLOPs + O(d_in²) per call.
  template <class XDerived, class YDerived>
  void add(const Eigen::MatrixBase<XDerived>& X, const Eigen::MatrixBase<YDerived>& Y) {
    static_assert(std::is_floating_point_v<typename XDerived::Scalar> &&
                      std::is_floating_point_v<typename YDerived::Scalar>,
                  "RidgeStats::add: X and Y must hold float or double");
    check_dim("RidgeStats::add: X columns (d_in)", features(), X.cols());
    check_dim("RidgeStats::add: Y columns (d_out)", out_features(), Y.cols());
    check_dim("RidgeStats::add: Y rows (rows of X)", X.rows(), Y.rows());
    // allFinite() is the fast vectorized test; check_finite locates the entry for the message.
    if (!X.allFinite())
      check_finite("RidgeStats::add: X", X);
    if (!Y.allFinite())
      check_finite("RidgeStats::add: Y", Y);

    const Index rows = X.rows();
    if (rows == 0)
      return;
    auto& xs = scratch_.x;  // [b, d_in]
    auto& ys = scratch_.y;  // [b, d_out]
    for (Index r0 = 0; r0 < rows; r0 += chunk_rows) {
      const Index b = std::min(chunk_rows, rows - r0);
      xs = X.middleRows(r0, b).template cast<double>();
      ys = Y.middleRows(r0, b).template cast<double>();
      if (n_ == 0) {
        shift_x_ = xs.colwise().mean();
        shift_y_ = ys.colwise().mean();
      }
      xs.rowwise() -= shift_x_;
      ys.rowwise() -= shift_y_;
      const Eigen::RowVectorXd chunk_offset_x = xs.colwise().mean();  // x̄_chunk − shift
      const Eigen::RowVectorXd chunk_offset_y = ys.colwise().mean();  // ȳ_chunk − shift
      xs.rowwise() -= chunk_offset_x;
      ys.rowwise() -= chunk_offset_y;
      // The chunk's own centered co-moments go straight into the running sums ...
      cxx_.selfadjointView<Eigen::Lower>().rankUpdate(xs.transpose());
      cxy_.noalias() += xs.transpose() * ys;
      syy_ += ys.colwise().squaredNorm();
      // ... and the mean shift between the two parts is added as in merge().
      fold_in(b, chunk_offset_x - offset_x_, chunk_offset_y - offset_y_);
    }
    finish_update();
  }

  /// Adds `other`'s rows to these statistics: the result equals accumulating both row sets
  /// in one pass, up to rounding. With n = n_a + n_b, δx = x̄_b − x̄_a, δy = ȳ_b − ȳ_a
  /// (the pairwise update of Chan, Golub & LeVeque, generalised to co-moments):
  ///   Cxx = Cxx_a + Cxx_b + (n_a n_b / n) δxᵀδx,  Cxy = Cxy_a + Cxy_b + (n_a n_b / n) δxᵀδy,
  ///   Syy = Syy_a + Syy_b + (n_a n_b / n) δy²,     x̄ = x̄_a + (n_b / n) δx,  ȳ likewise.
  /// Merging empty statistics changes nothing. Throws ShapeError if the widths differ.
  /// Cost: O(d_in² + d_in d_out).
  void merge(const RidgeStats& other) {
    check_dim("RidgeStats::merge: d_in of the merged statistics", features(), other.features());
    check_dim("RidgeStats::merge: d_out of the merged statistics", out_features(),
              other.out_features());
    if (other.n_ == 0)
      return;
    if (n_ == 0) {
      *this = other;
      return;
    }
    // δ = (shift_b − shift_a) + (offset_b − offset_a): both differences are of nearby
    // numbers, so δ is accurate to rounding of the spread, not of the means' magnitude.
    // Everything is read from `other` before writing: other may be *this.
    const Eigen::RowVectorXd delta_x = (other.shift_x_ - shift_x_) + (other.offset_x_ - offset_x_);
    const Eigen::RowVectorXd delta_y = (other.shift_y_ - shift_y_) + (other.offset_y_ - offset_y_);
    const Index other_n = other.n_;
    cxx_ += other.cxx_;
    cxy_ += other.cxy_;
    syy_ += other.syy_;
    fold_in(other_n, delta_x, delta_y);
    finish_update();
  }

  /// The statistics as one array of doubles — n, shift and offset of x̄ and ȳ, Syy, Cxx, Cxy
  /// (column-major) — to send between processes; unpacked() restores them exactly. Length
  /// packed_size(d_in, d_out) = 1 + 2 d_in + 3 d_out + d_in² + d_in d_out.
  std::vector<double> packed() const {
    std::vector<double> out;
    out.reserve(static_cast<std::size_t>(packed_size(features(), out_features())));
    auto put = [&out](const auto& m) {
      for (Index j = 0; j < m.cols(); ++j)
        for (Index i = 0; i < m.rows(); ++i)
          out.push_back(m(i, j));
    };
    out.push_back(static_cast<double>(n_));
    put(shift_x_);
    put(offset_x_);
    put(shift_y_);
    put(offset_y_);
    put(syy_);
    put(cxx_);
    put(cxy_);
    return out;
  }

  /// Statistics from packed() of statistics with d_in inputs and d_out outputs. FormatError
  /// naming the length or the count when `values` is not such an array (a count that is not a
  /// whole number ≥ 0, a non-finite entry).
  static RidgeStats unpacked(std::span<const double> values, Index d_in = DIn, Index d_out = DOut) {
    RidgeStats s(d_in, d_out);
    const Index expected = packed_size(d_in, d_out);
    if (static_cast<Index>(values.size()) != expected) {
      throw FormatError(nlb::detail::expected_found("RidgeStats::unpacked: length",
                                                    std::to_string(expected), values.size()));
    }
    for (std::size_t i = 0; i < values.size(); ++i) {
      if (!std::isfinite(values[i])) {
        throw FormatError(nlb::detail::expected_found(
            "RidgeStats::unpacked: entry " + std::to_string(i), "a finite value", values[i]));
      }
    }
    if (values[0] < 0 || values[0] != std::floor(values[0])) {
      throw FormatError(nlb::detail::expected_found("RidgeStats::unpacked: count",
                                                    "a whole number >= 0", values[0]));
    }
    std::size_t at = 0;
    auto take = [&](auto& m) {
      for (Index j = 0; j < m.cols(); ++j)
        for (Index i = 0; i < m.rows(); ++i)
          m(i, j) = values[at++];
    };
    s.n_ = static_cast<Index>(values[at++]);
    take(s.shift_x_);
    take(s.offset_x_);
    take(s.shift_y_);
    take(s.offset_y_);
    take(s.syy_);
    take(s.cxx_);
    take(s.cxy_);
    s.finish_update();
    return s;
  }

  /// The length of packed() for d_in inputs and d_out outputs.
  static Index packed_size(Index d_in, Index d_out) {
    return 1 + 2 * d_in + 3 * d_out + d_in * d_in + d_in * d_out;
  }

  /// Rows accumulated so far (n).
  Index count() const { return n_; }
  Index features() const { return cxx_.rows(); }
  Index out_features() const { return cxy_.cols(); }
  const MeanX& mean_x() const { return mean_x_; }  // x̄ [d_in]
  const MeanY& mean_y() const { return mean_y_; }  // ȳ [d_out]
  const Gram& cxx() const { return cxx_; }   // Σ(x − x̄)ᵀ(x − x̄) [d_in, d_in], symmetric
  const Gram& cxy() const { return cxy_; }   // Σ(x − x̄)ᵀ(y − ȳ) [d_in, d_out]
  const MeanY& syy() const { return syy_; }  // Σ(y − ȳ)² per output [d_out]

 private:
  // Rows converted to double at a time by add(): 1024 x d doubles of scratch (8 MiB at
  // d = 1024), large enough for GEMM-speed rank updates.
  static constexpr Index chunk_rows = 1024;

  static void check_size(const char* what, int fixed, Index given) {
    if (given < 1) {
      throw ArgumentError(nlb::detail::expected_found(
          what, fixed == Dynamic ? "a size >= 1 (Dynamic sizes must be given)" : "a size >= 1",
          given));
    }
    if (fixed != Dynamic)
      check_dim(std::string(what) + " (compile-time size)", fixed, given);
  }

  // The mean-shift part of the pairwise update: the centered co-moments of a part with
  // `added_n` rows have already been summed into cxx_ (lower triangle), cxy_ and syy_; this
  // adds (n_a n_b / n) δᵀδ for δ = (that part's mean − this mean) and moves the mean offsets.
  void fold_in(Index added_n, const Eigen::RowVectorXd& delta_x,
               const Eigen::RowVectorXd& delta_y) {
    if (n_ == 0) {
      n_ = added_n;
      offset_x_ = delta_x;  // the offsets were 0
      offset_y_ = delta_y;
      return;
    }
    const double n_a = static_cast<double>(n_);
    const double n_b = static_cast<double>(added_n);
    const double n = n_a + n_b;
    const double weight = n_a * n_b / n;
    cxx_.selfadjointView<Eigen::Lower>().rankUpdate(delta_x.transpose(), weight);
    cxy_.noalias() += (weight * delta_x.transpose()) * delta_y;
    syy_ += weight * delta_y.cwiseAbs2();
    offset_x_ += (n_b / n) * delta_x;
    offset_y_ += (n_b / n) * delta_y;
    n_ += added_n;
  }

  // Restores the invariants read by the accessors: full symmetric Cxx, means = shift + offset.
  void finish_update() {
    ridge::detail::mirror_lower_to_upper(cxx_);
    mean_x_ = shift_x_ + offset_x_;
    mean_y_ = shift_y_ + offset_y_;
  }

  // Chunk buffers kept between add() calls: fresh multi-MiB buffers per call cost more in
  // page faults than the arithmetic of a 512-row batch. Row-major, so x.transpose() is a
  // column-major [d_in, b] operand for the rank update. Copies of the statistics do not
  // copy the scratch contents.
  struct Scratch {
    Eigen::Matrix<double, Dynamic, Dynamic, Eigen::RowMajor> x, y;
    Scratch() = default;
    Scratch(const Scratch&) {}
    Scratch(Scratch&&) noexcept = default;
    Scratch& operator=(const Scratch&) { return *this; }
    Scratch& operator=(Scratch&&) noexcept = default;
    ~Scratch() = default;
  };

  Index n_ = 0;
  // The means are kept as shift + offset. The shift is the first chunk's mean, fixed after;
  // a chunk's rows are centered as (x − shift) − (x̄_chunk − shift), and the pairwise
  // updates take δ as a difference of offsets (plus of shifts, in merge). All are
  // differences of nearby numbers, so no rounding of a large mean's magnitude
  // (ulp(1e4) ≈ 2e-12) enters the co-moments, which it would through δ in a plain pairwise
  // update. Offsets and deltas are Dynamic vectors: GCC 12 reports a false
  // -Warray-bounds on Eigen's vectorized outer product of a short fixed-size vector.
  MeanX shift_x_, mean_x_;
  MeanY shift_y_, mean_y_;
  Eigen::RowVectorXd offset_x_, offset_y_;  // x̄ − shift_x [d_in], ȳ − shift_y [d_out]
  MeanY syy_;
  Gram cxx_;
  Gram cxy_;
  Scratch scratch_;
};

}  // namespace nlb
