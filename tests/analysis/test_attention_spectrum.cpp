// The routing/filtering spectrum of attention heads (PAPERS §B1): the span-reduced spectrum
// against dense SVDs and eigendecompositions of the full d × d matrices, closed forms, pairs,
// energy bookkeeping and invariances.
#include <Eigen/Eigenvalues>
#include <algorithm>
#include <boost/test/unit_test.hpp>
#include <cmath>
#include <vector>

#include "nlb/analysis/attention/spectrum.hpp"
#include "nlb/attention/sd_attention.hpp"
#include "test_random.hpp"
#include "tolerances.hpp"

namespace {

using Eigen::MatrixXd;
using Eigen::VectorXd;
using nlb::Index;
namespace tol = nlb::test::tol;

// Dense reference measures of a d × d matrix M, by the definitions (PAPERS §B1), without the
// span reduction: full (Jacobi) SVD of M_skew and a general (non-symmetric) eigensolver on M_sym.
struct DenseReference {
  VectorXd skew_singular;              // all d, descending
  std::vector<double> sym_by_modulus;  // all d eigenvalues, by |λ| descending
  double skew_energy = 0, sym_energy = 0, total_energy = 0;
  double skew_effective_rank = 0;  // exp(H) over all d singular values
  Index skew_rank_90 = 0;          // over singular values, rounded up to even
};

DenseReference dense_reference(const MatrixXd& m) {
  DenseReference r;
  const MatrixXd skew = 0.5 * (m - m.transpose()), sym = 0.5 * (m + m.transpose());
  // JacobiSVD of the full d × d matrix (Eigen 3.4.0's BDCSVD returned wrong, unpaired singular
  // values for a 17 × 17 rank-8 skew matrix with -march=native here; Jacobi is exact to rounding)
  r.skew_singular = Eigen::JacobiSVD<MatrixXd>(skew).singularValues();
  const Eigen::EigenSolver<MatrixXd> eig(sym, false);
  for (Index i = 0; i < sym.rows(); ++i)
    r.sym_by_modulus.push_back(eig.eigenvalues()(i).real());
  std::sort(r.sym_by_modulus.begin(), r.sym_by_modulus.end(),
            [](double a, double b) { return std::abs(a) > std::abs(b); });
  r.skew_energy = skew.squaredNorm();
  r.sym_energy = sym.squaredNorm();
  r.total_energy = m.squaredNorm();
  const double total = r.skew_singular.squaredNorm();
  double h = 0, cumulative = 0;
  bool found = false;
  for (Index i = 0; i < r.skew_singular.size(); ++i) {
    const double p = r.skew_singular(i) * r.skew_singular(i) / total;
    if (p > 0)
      h -= p * std::log(p);
    cumulative += p;
    if (!found && cumulative >= 0.9) {
      r.skew_rank_90 = i + 1;
      found = true;
    }
  }
  r.skew_rank_90 += r.skew_rank_90 % 2;
  r.skew_effective_rank = std::exp(h);
  return r;
}

// Compares the span spectrum of M = F_q F_kᵀ with the dense reference.
void check_against_dense(const nlb::HeadSpectrum& s, const MatrixXd& m) {
  const DenseReference r = dense_reference(m);
  const double scale = std::max(r.skew_singular(0), std::abs(r.sym_by_modulus.front()));
  const double bound = tol::spectrum_double_rel * scale;
  const Index planes = static_cast<Index>(s.skew.plane_values.size());
  BOOST_TEST(planes == s.span_dim / 2);
  double max_err = 0;
  for (Index k = 0; k < planes; ++k) {
    // each plane value is both members of a ± pair of the dense singular values
    max_err = std::max(max_err, std::abs(s.skew.plane_values[k] - r.skew_singular(2 * k)));
    max_err = std::max(max_err, std::abs(s.skew.plane_values[k] - r.skew_singular(2 * k + 1)));
  }
  for (Index i = 2 * planes; i < r.skew_singular.size(); ++i)
    max_err = std::max(max_err, r.skew_singular(i));  // outside the span: zero
  for (std::size_t i = 0; i < r.sym_by_modulus.size(); ++i) {
    const double span_value = i < s.symmetric.eigenvalues.size() ? s.symmetric.eigenvalues[i] : 0.0;
    max_err = std::max(max_err, std::abs(span_value - r.sym_by_modulus[i]));
  }
  BOOST_TEST_MESSAGE("max |span - dense| spectrum error " << max_err << " (bound " << bound << ")");
  BOOST_TEST(max_err <= bound);
  if (!(max_err <= bound)) {
    BOOST_TEST_MESSAGE("dense skew singular values " << r.skew_singular.transpose());
    for (double v : s.skew.plane_values)
      BOOST_TEST_MESSAGE("span plane " << v);
    for (double v : r.sym_by_modulus)
      BOOST_TEST_MESSAGE("dense sym " << v);
    for (double v : s.symmetric.eigenvalues)
      BOOST_TEST_MESSAGE("span sym " << v);
  }
  const double ebound = tol::spectrum_measure_rel * r.total_energy;
  BOOST_TEST(std::abs(s.skew.energy - r.skew_energy) <= ebound);
  BOOST_TEST(std::abs(s.symmetric.energy - r.sym_energy) <= ebound);
  // the parts are Frobenius-orthogonal: their energies add up to ‖M‖²
  BOOST_TEST(std::abs(s.skew.energy + s.symmetric.energy - r.total_energy) <= ebound);
  BOOST_TEST(std::abs(s.skew_energy_fraction - r.skew_energy / r.total_energy) <=
             tol::spectrum_measure_rel);
  BOOST_TEST(std::abs(s.skew.effective_rank - r.skew_effective_rank) <=
             tol::spectrum_measure_rel * r.skew_effective_rank);
  BOOST_TEST(s.skew.rank_90() == r.skew_rank_90);
}

MatrixXd random_weights(Index rows, Index cols, std::uint64_t seed) {
  return nlb::test::gaussian(rows, cols, seed);
}

}  // namespace

BOOST_AUTO_TEST_CASE(span_spectrum_equals_dense_on_random_factors) {
  const std::vector<std::pair<Index, Index>> shapes{{8, 2}, {12, 3}, {16, 4}, {24, 3},
                                                    {5, 4}, {7, 7}};  // w ≥ n/2: span is all of R^n
  std::uint64_t seed = 100;
  for (const auto& [n, w] : shapes) {
    const MatrixXd fq = random_weights(n, w, seed++), fk = random_weights(n, w, seed++);
    const auto s = nlb::bilinear_spectrum(fq, fk);
    BOOST_TEST(s.span_dim == std::min(n, 2 * w));
    check_against_dense(s, fq * fk.transpose());
  }
}

BOOST_AUTO_TEST_CASE(standard_heads_equal_dense_with_and_without_bias) {
  const Index d = 16, heads = 4, dh = d / heads;
  nlb::AttentionWeights<double> w;
  w.w_qkv = random_weights(d, 3 * d, 7);
  w.b_qkv = random_weights(1, 3 * d, 8);
  w.w_out = random_weights(d, d, 9);
  w.b_out = random_weights(1, d, 10);
  for (Index h = 0; h < heads; ++h) {
    const MatrixXd wq = w.w_qkv.middleCols(h * dh, dh), wk = w.w_qkv.middleCols(d + h * dh, dh);
    const auto plain = nlb::attention_head_spectrum(w, heads, h, nlb::BiasTreatment::exclude);
    BOOST_TEST(!plain.bias_included);
    BOOST_TEST(plain.span_dim == 2 * dh);
    check_against_dense(plain, wq * wk.transpose());
    // homogeneous: M̃ over x̃ = [x, 1]
    MatrixXd wq1(d + 1, dh), wk1(d + 1, dh);
    wq1 << wq, w.b_qkv.middleCols(h * dh, dh);
    wk1 << wk, w.b_qkv.middleCols(d + h * dh, dh);
    const auto homog = nlb::attention_head_spectrum(w, heads, h, nlb::BiasTreatment::homogeneous);
    BOOST_TEST(homog.bias_included);
    check_against_dense(homog, wq1 * wk1.transpose());
  }
  const auto layer = nlb::attention_layer_spectrum(w, 3, heads, nlb::BiasTreatment::homogeneous,
                                                   /*rotary=*/true);
  BOOST_TEST(layer.size() == static_cast<std::size_t>(heads));
  for (std::size_t i = 0; i < layer.size(); ++i) {
    BOOST_TEST(layer[i].layer == 3);
    BOOST_TEST(layer[i].head == static_cast<Index>(i));
    BOOST_TEST(layer[i].position_free);
  }
}

BOOST_AUTO_TEST_CASE(homogeneous_factors_reproduce_the_scores) {
  // q_i·k_j from the projections with biases equals x̃_i W̃_Q W̃_Kᵀ x̃_jᵀ.
  const Index d = 12, heads = 3, dh = 4, t = 5;
  nlb::AttentionWeights<double> w;
  w.w_qkv = random_weights(d, 3 * d, 21);
  w.b_qkv = random_weights(1, 3 * d, 22);
  const MatrixXd x = random_weights(t, d, 23);
  const MatrixXd qkv = (x * w.w_qkv).rowwise() + w.b_qkv.row(0);
  MatrixXd x1(t, d + 1);
  x1 << x, VectorXd::Ones(t);
  for (Index h = 0; h < heads; ++h) {
    const auto [fq, fk] = nlb::head_score_factors(w, heads, h, nlb::BiasTreatment::homogeneous);
    const MatrixXd direct = qkv.middleCols(h * dh, dh) * qkv.middleCols(d + h * dh, dh).transpose();
    const MatrixXd form = x1 * fq * fk.transpose() * x1.transpose();
    BOOST_TEST((direct - form).cwiseAbs().maxCoeff() <=
               tol::spectrum_double_rel * direct.cwiseAbs().maxCoeff());
  }
  BOOST_CHECK_THROW(nlb::head_score_factors(w, heads, heads, nlb::BiasTreatment::exclude),
                    nlb::ShapeError);
  BOOST_CHECK_THROW(nlb::head_score_factors(w, 5, 0, nlb::BiasTreatment::exclude), nlb::ShapeError);
}

BOOST_AUTO_TEST_CASE(closed_form_rotation_planes) {
  // M = B diag-blocks(σ_k J) Bᵀ + B₂ diag(λ) B₂ᵀ with known σ_k, λ (J = [[0, 1], [−1, 0]]).
  const Index n = 20;
  const std::vector<double> sigma{5.0, 3.0, 3.0, 0.5}, lambda{-4.0, 2.0};
  const MatrixXd basis = Eigen::HouseholderQR<MatrixXd>(random_weights(n, 10, 31)).householderQ() *
                         MatrixXd::Identity(n, 10);
  MatrixXd core = MatrixXd::Zero(10, 10);
  for (std::size_t k = 0; k < sigma.size(); ++k) {
    const Index i = 2 * static_cast<Index>(k);
    core(i, i + 1) = sigma[k];
    core(i + 1, i) = -sigma[k];
  }
  core(8, 8) = lambda[0];
  core(9, 9) = lambda[1];
  // F_q = B C, F_k = B: M = B C Bᵀ
  const auto s = nlb::bilinear_spectrum(basis * core, basis);
  const double b = tol::spectrum_double_rel * 5.0;
  for (std::size_t k = 0; k < sigma.size(); ++k)
    BOOST_TEST(std::abs(s.skew.plane_values[k] - sigma[k]) <= b);
  for (std::size_t k = sigma.size(); k < s.skew.plane_values.size(); ++k)
    BOOST_TEST(std::abs(s.skew.plane_values[k]) <= b);
  BOOST_TEST(std::abs(s.symmetric.eigenvalues[0] - lambda[0]) <= b);
  BOOST_TEST(std::abs(s.symmetric.eigenvalues[1] - lambda[1]) <= b);
  const double skew_energy = 2 * (25 + 9 + 9 + 0.25), sym_energy = 16 + 4;
  BOOST_TEST(std::abs(s.skew.energy - skew_energy) <= tol::spectrum_measure_rel * skew_energy);
  BOOST_TEST(std::abs(s.skew_energy_fraction - skew_energy / (skew_energy + sym_energy)) <=
             tol::spectrum_measure_rel);
  // 90% of 43.25 = 38.925: 25 + 9 = 34 < 38.925 ≤ 43 → 3 planes, rank 6
  BOOST_TEST(s.skew.planes_90 == 3);
  BOOST_TEST(s.skew.rank_90() == 6);
  double h = 0;
  for (double v : sigma) {
    const double p = v * v / 43.25;
    h -= p * std::log(p);
  }
  BOOST_TEST(std::abs(s.skew.effective_rank - 2 * std::exp(h)) <= tol::spectrum_measure_rel * 8);
  // symmetric part: 16 of 20 is 80% → both eigenvalues for 90%; one negative of energy 16
  BOOST_TEST(s.symmetric.rank_90 == 2);
  BOOST_TEST(std::abs(s.symmetric.negative_energy_fraction - 0.8) <= tol::spectrum_measure_rel);
}

BOOST_AUTO_TEST_CASE(single_plane_is_rank_two_and_symmetric_form_has_no_skew) {
  const MatrixXd u = random_weights(9, 1, 41), v = random_weights(9, 1, 42);
  // M = u vᵀ − v uᵀ: one plane, effective rank exactly 2
  MatrixXd fq(9, 2), fk(9, 2);
  fq << u, v;
  fk << v, -u;
  const auto one = nlb::bilinear_spectrum(fq, fk);
  BOOST_TEST(one.skew.planes_90 == 1);
  BOOST_TEST(std::abs(one.skew.effective_rank - 2.0) <= tol::spectrum_measure_rel * 2);
  BOOST_TEST(std::abs(one.skew_energy_fraction - 1.0) <= tol::spectrum_measure_rel);
  // M = F Fᵀ: symmetric, no routing
  const MatrixXd f = random_weights(9, 3, 43);
  const auto sym = nlb::bilinear_spectrum(f, f);
  BOOST_TEST(sym.skew_energy_fraction <= tol::spectrum_measure_rel);
  BOOST_TEST(sym.symmetric.negative_energy_fraction <= tol::spectrum_measure_rel);
}

BOOST_AUTO_TEST_CASE(invariances) {
  const Index n = 14, w = 3;
  const MatrixXd fq = random_weights(n, w, 51), fk = random_weights(n, w, 52);
  const auto base = nlb::bilinear_spectrum(fq, fk);
  auto same = [&](const nlb::HeadSpectrum& s, double energy_scale) {
    double err = 0;
    for (std::size_t k = 0; k < base.skew.plane_values.size(); ++k)
      err = std::max(err, std::abs(s.skew.plane_values[k] -
                                   std::sqrt(energy_scale) * base.skew.plane_values[k]));
    for (std::size_t k = 0; k < base.symmetric.eigenvalues.size(); ++k)
      err = std::max(err, std::abs(s.symmetric.eigenvalues[k] -
                                   std::sqrt(energy_scale) * base.symmetric.eigenvalues[k]));
    BOOST_TEST(err <=
               tol::spectrum_double_rel * std::sqrt(energy_scale) *
                   std::max(base.skew.plane_values[0], std::abs(base.symmetric.eigenvalues[0])));
    BOOST_TEST(std::abs(s.skew_energy_fraction - base.skew_energy_fraction) <=
               tol::spectrum_measure_rel);
    BOOST_TEST(std::abs(s.skew.effective_rank - base.skew.effective_rank) <=
               tol::spectrum_measure_rel * base.skew.effective_rank);
  };
  // M depends only on W_Q W_Kᵀ: W_Q G, W_K G⁻ᵀ for any invertible G gives the same spectrum
  const MatrixXd g = random_weights(w, w, 53) + 3.0 * MatrixXd::Identity(w, w);
  same(nlb::bilinear_spectrum(fq * g, fk * g.inverse().transpose()), 1.0);
  // orthogonal change of input basis: Rᵀ M R
  const MatrixXd r = Eigen::HouseholderQR<MatrixXd>(random_weights(n, n, 54)).householderQ();
  same(nlb::bilinear_spectrum(r.transpose() * fq, r.transpose() * fk), 1.0);
  // scaling by c: energies scale by c², shares and ranks do not change
  same(nlb::bilinear_spectrum(2.5 * fq, fk), 6.25);
  // Mᵀ (swap queries and keys): the skew part changes sign, its spectrum does not
  same(nlb::bilinear_spectrum(fk, fq), 1.0);
}

BOOST_AUTO_TEST_CASE(skew_diagonal_heads_equal_dense) {
  const Index d = 12, r = 3;
  const MatrixXd u = random_weights(d, r, 61), v = random_weights(d, r, 62);
  VectorXd filter(d);
  for (Index i = 0; i < d; ++i)
    filter(i) = std::log1p(std::exp(random_weights(1, 1, 70 + static_cast<std::uint64_t>(i))(0)));
  const auto s = nlb::skew_diagonal_spectrum(u, v, filter);
  BOOST_TEST((s.kind == nlb::HeadKind::skew_diagonal));
  const MatrixXd skew = u * v.transpose() - v * u.transpose();
  const MatrixXd m = skew - MatrixXd(filter.asDiagonal());
  check_against_dense(s, m);  // M_sym = −D exactly, M_skew = S exactly
  BOOST_TEST(std::abs(s.symmetric.negative_energy_fraction - 1.0) <= tol::spectrum_measure_rel);
  BOOST_TEST(s.skew.plane_values.size() == static_cast<std::size_t>(r));
  BOOST_TEST(s.span_dim == 2 * r);
  BOOST_CHECK_THROW(nlb::skew_diagonal_spectrum(u, v, VectorXd::Ones(d + 1)), nlb::ShapeError);
  BOOST_CHECK_THROW(nlb::skew_diagonal_spectrum(u, MatrixXd::Ones(d, r + 1), filter),
                    nlb::ShapeError);
}

BOOST_AUTO_TEST_CASE(cascade_table_means_and_medians) {
  std::vector<nlb::HeadSpectrum> heads(5);
  const double shares[5] = {0.1, 0.4, 0.3, 0.9, 0.5};
  const double ranks[5] = {2, 4, 6, 3, 5};
  for (int i = 0; i < 5; ++i) {
    heads[static_cast<std::size_t>(i)].layer = i < 3 ? 1 : 0;
    heads[static_cast<std::size_t>(i)].skew_energy_fraction = shares[i];
    heads[static_cast<std::size_t>(i)].skew.effective_rank = ranks[i];
    heads[static_cast<std::size_t>(i)].skew.planes_90 = i + 1;
  }
  const auto rows = nlb::spectral_cascade(heads);
  BOOST_TEST_REQUIRE(rows.size() == 2u);
  BOOST_TEST(rows[0].layer == 0);
  BOOST_TEST(rows[0].heads == 2);
  BOOST_TEST(std::abs(rows[0].skew_energy_fraction.mean - 0.7) <= 1e-15);
  BOOST_TEST(std::abs(rows[0].skew_energy_fraction.median - 0.7) <= 1e-15);
  BOOST_TEST(std::abs(rows[1].effective_rank.mean - 4.0) <= 1e-15);
  BOOST_TEST(std::abs(rows[1].effective_rank.median - 4.0) <= 1e-15);
  BOOST_TEST(std::abs(rows[1].skew_energy_fraction.median - 0.3) <= 1e-15);
  BOOST_TEST(std::abs(rows[1].rank_90.mean - 4.0) <= 1e-15);  // planes 1, 2, 3 → ranks 2, 4, 6
}

BOOST_AUTO_TEST_CASE(layer_objects_are_dispatched_by_kind) {
  const Index d = 12, heads = 3, r = 2;
  // an S–D layer: every head's spectrum equals the dense S_h − D_h reference
  std::vector<nlb::SkewSymmetricRouting<double>> routing;
  std::vector<nlb::DiagonalFilter<double>> filters;
  std::vector<MatrixXd> dense;
  for (Index h = 0; h < heads; ++h) {
    const auto seed = 200 + 10 * static_cast<std::uint64_t>(h);
    const MatrixXd u = random_weights(d, r, seed), v = random_weights(d, r, seed + 1);
    const nlb::RowVector<double> theta = random_weights(1, d, seed + 2);
    routing.emplace_back(u, v);
    filters.emplace_back(theta);
    const VectorXd softplus = theta.transpose().array().exp().log1p().matrix();
    dense.push_back(u * v.transpose() - v * u.transpose() - MatrixXd(softplus.asDiagonal()));
  }
  const nlb::SDAttention<nlb::SkewSymmetricRouting<double>, nlb::DiagonalFilter<double>> sd(
      routing, filters, random_weights(d, d, 300), random_weights(1, d, 301),
      random_weights(d, d, 302), random_weights(1, d, 303));
  const auto sd_heads = nlb::attention_spectrum(sd, 2);
  BOOST_TEST_REQUIRE(sd_heads.size() == static_cast<std::size_t>(heads));
  for (Index h = 0; h < heads; ++h) {
    BOOST_TEST(sd_heads[static_cast<std::size_t>(h)].layer == 2);
    BOOST_TEST(sd_heads[static_cast<std::size_t>(h)].head == h);
    check_against_dense(sd_heads[static_cast<std::size_t>(h)], dense[static_cast<std::size_t>(h)]);
  }
  // a dense layer with rotary: flagged as position-free, the same numbers as its weights'
  nlb::AttentionWeights<double> w;
  w.w_qkv = random_weights(d, 3 * d, 310);
  w.b_qkv = random_weights(1, 3 * d, 311);
  w.w_out = random_weights(d, d, 312);
  w.b_out = random_weights(1, d, 313);
  const nlb::DenseAttention<double> rotary(w, heads, 2);
  const auto rot = nlb::attention_spectrum(rotary, 0);
  const auto plain = nlb::attention_layer_spectrum(w, 0, heads);
  BOOST_TEST_REQUIRE(rot.size() == plain.size());
  for (std::size_t h = 0; h < rot.size(); ++h) {
    BOOST_TEST(rot[h].position_free);
    BOOST_TEST(!plain[h].position_free);
    BOOST_TEST(rot[h].skew.plane_values == plain[h].skew.plane_values);
  }
}

namespace {

// Every measure of two head spectra, compared exactly (everything but bias_included).
void check_identical_measures(const nlb::HeadSpectrum& a, const nlb::HeadSpectrum& b) {
  BOOST_TEST(a.layer == b.layer);
  BOOST_TEST(a.head == b.head);
  BOOST_TEST(a.span_dim == b.span_dim);
  BOOST_TEST(a.skew.plane_values == b.skew.plane_values);
  BOOST_TEST(a.skew.energy == b.skew.energy);
  BOOST_TEST(a.skew.planes_90 == b.skew.planes_90);
  BOOST_TEST(a.skew.effective_rank == b.skew.effective_rank);
  BOOST_TEST(a.symmetric.eigenvalues == b.symmetric.eigenvalues);
  BOOST_TEST(a.symmetric.energy == b.symmetric.energy);
  BOOST_TEST(a.symmetric.rank_90 == b.symmetric.rank_90);
  BOOST_TEST(a.symmetric.effective_rank == b.symmetric.effective_rank);
  BOOST_TEST(a.symmetric.negative_energy_fraction == b.symmetric.negative_energy_fraction);
  BOOST_TEST(a.skew_energy_fraction == b.skew_energy_fraction);
}

}  // namespace

BOOST_AUTO_TEST_CASE(default_treatment_is_the_papers_matrix) {
  // PAPERS §B1 decomposes M = W_Q W_Kᵀ: that is what every default analyses.
  const Index d = 16, heads = 4;
  nlb::AttentionWeights<double> w;
  w.w_qkv = random_weights(d, 3 * d, 401);
  w.b_qkv = random_weights(1, 3 * d, 402);
  w.w_out = random_weights(d, d, 403);
  w.b_out = random_weights(1, d, 404);
  BOOST_TEST((nlb::SpectrumOptions{}.bias == nlb::BiasTreatment::exclude));
  const nlb::DenseAttention<double> layer(w, heads);
  const auto by_default = nlb::attention_spectrum(layer, 1);
  const auto excluded = nlb::attention_layer_spectrum(w, 1, heads, nlb::BiasTreatment::exclude);
  const auto homogeneous = nlb::attention_spectrum(layer, 1, {nlb::BiasTreatment::homogeneous});
  BOOST_TEST_REQUIRE(by_default.size() == static_cast<std::size_t>(heads));
  BOOST_TEST_REQUIRE(homogeneous.size() == static_cast<std::size_t>(heads));
  for (Index h = 0; h < heads; ++h) {
    const auto i = static_cast<std::size_t>(h);
    BOOST_TEST(!by_default[i].bias_included);
    BOOST_TEST(homogeneous[i].bias_included);
    check_identical_measures(by_default[i], excluded[i]);
    auto single = nlb::attention_head_spectrum(w, heads, h);
    single.layer = 1;
    check_identical_measures(single, excluded[i]);
    // the options reach the layer: the homogeneous form is the other matrix (the biases here
    // are O(1), so its skew share moves far beyond rounding)
    const auto direct = nlb::attention_head_spectrum(w, heads, h, nlb::BiasTreatment::homogeneous);
    BOOST_TEST(homogeneous[i].skew_energy_fraction == direct.skew_energy_fraction);
    BOOST_TEST(std::abs(homogeneous[i].skew_energy_fraction - excluded[i].skew_energy_fraction) >
               1e3 * tol::spectrum_measure_rel);
  }
}

BOOST_AUTO_TEST_CASE(zero_qk_biases_make_both_treatments_agree) {
  // With b_Q = b_K = 0 the homogeneous form is M with a zero row and column added (ours,
  // docs/attention_spectrum.md §1): the same matrix, so every measure must be the same, to the
  // bit (the zero coordinate is dropped before the span reduction). The value bias stays
  // non-zero: it is not part of the score form. Shapes: 2·d_h < d (both spans 2·d_h wide) and
  // 2·d_h > d (the span is all of R^d, which the extra coordinate must not widen).
  const std::vector<std::pair<Index, Index>> shapes{{24, 3}, {8, 1}};  // (d, heads)
  std::uint64_t seed = 411;
  for (const auto& [d, heads] : shapes) {
    nlb::AttentionWeights<double> w;
    w.w_qkv = random_weights(d, 3 * d, seed++);
    w.b_qkv = random_weights(1, 3 * d, seed++);
    w.b_qkv.leftCols(2 * d).setZero();
    w.w_out = random_weights(d, d, seed++);
    w.b_out = random_weights(1, d, seed++);
    const auto excluded = nlb::attention_layer_spectrum(w, 0, heads, nlb::BiasTreatment::exclude);
    const auto homogeneous =
        nlb::attention_layer_spectrum(w, 0, heads, nlb::BiasTreatment::homogeneous);
    BOOST_TEST_REQUIRE(excluded.size() == homogeneous.size());
    for (std::size_t h = 0; h < excluded.size(); ++h) {
      BOOST_TEST(excluded[h].span_dim == std::min(d, 2 * (d / heads)));
      BOOST_TEST(homogeneous[h].bias_included);
      check_identical_measures(excluded[h], homogeneous[h]);
    }
  }
}
