// The routing/filtering decomposition of attention heads (PAPERS §B1): per head the score
// matrix M (logits ℓ_ij = x_i M x_jᵀ / √d_h) splits into M_skew = (M − Mᵀ)/2 (routing:
// antisymmetric scores) and M_sym = (M + Mᵀ)/2 (filtering: symmetric scores), and the spectra of
// both parts are measured. A per-layer summary over heads is the spectral cascade.
//
// Standard heads: M = W_Q W_Kᵀ, the paper's matrix (PAPERS §B1) and the default, or on request its
// homogeneous form with the q/k biases (BiasTreatment); either has rank ≤ d_h, so it is reduced
// exactly to its 2·d_h-dimensional span (detail::span_form) and every measure comes from a small
// m × m core, m ≤ 2·d_h — never a dense d × d eigenproblem. S–D heads (PAPERS §B2): the skew part
// is S_h = U Vᵀ − V Uᵀ itself, reduced to the span of [U V], and the symmetric part is −D_h.
// docs/attention_spectrum.md has the math and every "ours" choice.
#pragma once

#include <algorithm>
#include <string>
#include <utility>
#include <variant>
#include <vector>

#include "nlb/analysis/attention/detail/spectrum_linalg.hpp"
#include "nlb/attention/dense_attention.hpp"
#include "nlb/core.hpp"

namespace nlb {

/// How the q/k biases of a head enter its score matrix (docs/attention_spectrum.md §1).
enum class BiasTreatment {
  /// M = W_Q W_Kᵀ (d × d): the matrix the paper decomposes (PAPERS §B1), so the default of every
  /// spectrum function here and of `nlb spectrum`. The bias terms are left out of the analysis.
  exclude,
  /// Ours: homogeneous coordinates x̃ = [x, 1]: W̃_Q = [W_Q; b_Q], W̃_K = [W_K; b_K] and
  /// M̃ = W̃_Q W̃_Kᵀ ((d+1) × (d+1)) is the exact score form q_i·k_j = x̃_i M̃ x̃_jᵀ. With zero q/k
  /// biases it is M with a zero row and column added, which has the same spectrum.
  homogeneous
};

/// The skew-symmetric (routing) part's spectrum. Its eigenvalues are ±iσ_k, one pair per
/// rotation plane, so its singular values come in equal pairs; each pair is reported once.
struct SkewSpectrum {
  double energy = 0;                 // ‖M_skew‖²_F = 2 Σ_k σ_k²
  std::vector<double> plane_values;  // σ_k, descending, one per plane (m/2 of them)
  Index planes_90 = 0;  // smallest p with Σ_{k<p} σ_k² ≥ 0.9 Σ σ_k² (0 if M_skew = 0)
  /// Entropy effective rank exp(H(s²/Σ s²)) over the singular values s of M_skew, each σ_k
  /// counted twice (ours: rank units, so one plane is rank 2) = 2·exp(H over the planes).
  double effective_rank = 0;
  Index rank_90() const { return 2 * planes_90; }  // rank for 90% of the skew energy
};

/// The symmetric (filtering) part's spectrum, as context.
struct SymmetricSpectrum {
  double energy = 0;                    // ‖M_sym‖²_F = Σ λ²
  std::vector<double> eigenvalues;      // signed, by |λ| descending (the m of the span)
  Index rank_90 = 0;                    // smallest count of eigenvalues with 90% of Σ λ²
  double effective_rank = 0;            // exp(H(λ²/Σ λ²))
  double negative_energy_fraction = 0;  // Σ_{λ<0} λ² / Σ λ² (1 for an S–D head's −D)
};

/// What kind of head was analysed.
enum class HeadKind {
  standard,      // M = W_Q W_Kᵀ (or, with BiasTreatment::homogeneous, W̃_Q W̃_Kᵀ)
  skew_diagonal  // S–D head: M = S − D
};

/// Every measure of one head.
struct HeadSpectrum {
  Index layer = 0;
  Index head = 0;
  Index key_head = 0;  // the key/value head whose keys it reads (grouped-query: head / group)
  HeadKind kind = HeadKind::standard;
  SkewSpectrum skew;
  SymmetricSpectrum symmetric;
  double skew_energy_fraction = 0;  // ‖M_skew‖²_F / ‖M‖²_F (the parts are Frobenius-orthogonal)
  Index span_dim = 0;               // m: the dimension the form was reduced to
  bool position_free = false;  // rotary head: the spectrum of the position-free W_Q W_Kᵀ
  bool bias_included = false;  // BiasTreatment::homogeneous was used (else M = W_Q W_Kᵀ)
};

namespace detail {

template <class Matrix = Eigen::MatrixXd>  // a template only to defer the SVD (spectrum_linalg.hpp)
SkewSpectrum skew_spectrum_of(const DenseOf<Matrix>& skew, double fraction) {
  SkewSpectrum s;
  s.plane_values = skew_plane_values<Matrix>(skew);
  std::vector<double> squares;
  for (double v : s.plane_values)
    squares.push_back(v * v);
  double sum = 0;
  for (double q : squares)
    sum += q;
  s.energy = 2.0 * sum;
  s.planes_90 = count_for_fraction(squares, fraction);
  s.effective_rank = 2.0 * entropy_effective_rank(squares);
  return s;
}

inline SymmetricSpectrum symmetric_spectrum_of(std::vector<double> eigenvalues, double fraction) {
  SymmetricSpectrum s;
  s.eigenvalues = std::move(eigenvalues);
  std::vector<double> squares;
  double negative = 0;
  for (double v : s.eigenvalues) {
    squares.push_back(v * v);
    s.energy += v * v;
    if (v < 0)
      negative += v * v;
  }
  s.rank_90 = count_for_fraction(squares, fraction);
  s.effective_rank = entropy_effective_rank(squares);
  s.negative_energy_fraction = s.energy > 0 ? negative / s.energy : 0.0;
  return s;
}

inline double skew_fraction(double skew_energy, double sym_energy) {
  const double total = skew_energy + sym_energy;
  return total > 0 ? skew_energy / total : 0.0;
}

}  // namespace detail

/// Spectrum of the bilinear form M = F_q F_kᵀ (F_q, F_k [n, w]) computed in the span of
/// [F_q F_k]: O(n w² + w³), exact (detail::span_form). Rows zero in both factors are dropped
/// first (detail::used_coordinates; they carry no part of M), so span_dim = min(n', 2w) with n'
/// the rows left. `fraction` is the energy share of the "planes for 90%" and "rank for 90%"
/// counts. Throws ShapeError when F_q and F_k differ in shape.
/// (`Matrix` is always Eigen::MatrixXd and never deduced: a template only so that Eigen's
/// decompositions are compiled where the function is called, detail/spectrum_linalg.hpp.)
template <class Matrix = Eigen::MatrixXd>
HeadSpectrum bilinear_spectrum(const detail::DenseOf<Matrix>& fq, const detail::DenseOf<Matrix>& fk,
                               double fraction = 0.9) {
  const std::vector<Index> used = detail::used_coordinates(fq, fk);
  const bool all_used = static_cast<Index>(used.size()) == fq.rows();
  const detail::SpanForm form =
      all_used ? detail::span_form<Matrix>(fq, fk)
               : detail::span_form<Matrix>(fq(used, Eigen::all), fk(used, Eigen::all));
  HeadSpectrum h;
  h.kind = HeadKind::standard;
  h.span_dim = form.core.rows();
  h.skew = detail::skew_spectrum_of<Matrix>(detail::skew_part(form.core), fraction);
  h.symmetric = detail::symmetric_spectrum_of(
      detail::symmetric_eigenvalues_by_magnitude<Matrix>(detail::symmetric_part(form.core)),
      fraction);
  h.skew_energy_fraction = detail::skew_fraction(h.skew.energy, h.symmetric.energy);
  return h;
}

/// Spectrum of an S–D head (PAPERS §B2): skew part S = U Vᵀ − V Uᵀ (U, V [d, r]; reduced to the
/// span of [U V], O(d r² + r³)) and symmetric part −D with D = diag(filter) (filter [d], the
/// softplus(θ) values, ≥ 0). Throws ShapeError on mismatched shapes.
/// (`Matrix`: as for bilinear_spectrum.)
template <class Matrix = Eigen::MatrixXd>
HeadSpectrum skew_diagonal_spectrum(const detail::DenseOf<Matrix>& u,
                                    const detail::DenseOf<Matrix>& v, const Eigen::VectorXd& filter,
                                    double fraction = 0.9) {
  check_dim("skew_diagonal_spectrum: V rows (d)", u.rows(), v.rows());
  check_dim("skew_diagonal_spectrum: V cols (r)", u.cols(), v.cols());
  check_dim("skew_diagonal_spectrum: filter size (d)", u.rows(), filter.size());
  // S = [U V] J [U V]ᵀ: reduce to the 2r-dim span of [U V] alone, C = (BᵀU)(BᵀV)ᵀ − transpose.
  Eigen::MatrixXd uv(u.rows(), 2 * u.cols());
  uv << u, v;
  detail::SpanForm form;
  form.basis = detail::orthonormal_span<Matrix>(uv);
  const Eigen::MatrixXd bu = form.basis.transpose() * u, bv = form.basis.transpose() * v;
  form.core = bu * bv.transpose() - bv * bu.transpose();
  HeadSpectrum h;
  h.kind = HeadKind::skew_diagonal;
  h.span_dim = form.core.rows();
  h.skew = detail::skew_spectrum_of<Matrix>(detail::skew_part(form.core), fraction);
  std::vector<double> minus_d(static_cast<std::size_t>(filter.size()));
  for (Index i = 0; i < filter.size(); ++i)
    minus_d[static_cast<std::size_t>(i)] = -filter(i);
  std::stable_sort(minus_d.begin(), minus_d.end(),
                   [](double a, double b) { return std::abs(a) > std::abs(b); });
  h.symmetric = detail::symmetric_spectrum_of(std::move(minus_d), fraction);
  h.skew_energy_fraction = detail::skew_fraction(h.skew.energy, h.symmetric.energy);
  return h;
}

/// Head h's query and key factors W̃_Q, W̃_K [n, d_h] from a layer's weights: Q columns
/// [h·d_h, (h+1)·d_h) of w_qkv, K columns d + g·d_h onwards with g = h / (H / H_kv) the head's
/// key/value head (g = h without grouped-query attention, H_kv read from w_qkv's width
/// d + 2·H_kv·d_h); with BiasTreatment::homogeneous a last
/// row holds b_Q / b_K (n = d + 1), else n = d. The head's scores are q_i·k_j = x̃_i W̃_Q W̃_Kᵀ x̃_jᵀ
/// (before rotary). Throws ShapeError for a head out of range or weights that do not fit.
template <class T, int D>
std::pair<Eigen::MatrixXd, Eigen::MatrixXd> head_score_factors(const AttentionWeights<T, D>& w,
                                                               Index n_heads, Index head,
                                                               BiasTreatment bias) {
  const Index d = w.w_qkv.rows();
  if (n_heads <= 0 || d % n_heads != 0) {
    throw ShapeError(detail::expected_found("head_score_factors: head count",
                                            "a positive divisor of d = " + std::to_string(d),
                                            n_heads));
  }
  const Index kv_heads = key_value_heads(w, n_heads);
  check_dim("head_score_factors: b_qkv size (w_qkv cols)", w.w_qkv.cols(), w.b_qkv.size());
  if (head < 0 || head >= n_heads) {
    throw ShapeError(detail::expected_found("head_score_factors: head",
                                            "in [0, " + std::to_string(n_heads) + ")", head));
  }
  const Index dh = d / n_heads;
  const Index key = d + (head / (n_heads / kv_heads)) * dh;  // the key head's first column
  const Index n = bias == BiasTreatment::homogeneous ? d + 1 : d;
  Eigen::MatrixXd q(n, dh), k(n, dh);
  q.topRows(d) = w.w_qkv.middleCols(head * dh, dh).template cast<double>();
  k.topRows(d) = w.w_qkv.middleCols(key, dh).template cast<double>();
  if (bias == BiasTreatment::homogeneous) {
    q.row(d) = w.b_qkv.middleCols(head * dh, dh).template cast<double>();
    k.row(d) = w.b_qkv.middleCols(key, dh).template cast<double>();
  }
  return {std::move(q), std::move(k)};
}

/// Spectrum of one standard head: bilinear_spectrum of head_score_factors, by default of the
/// paper's M = W_Q W_Kᵀ (PAPERS §B1). O(d·d_h² + d_h³).
/// `rotary` marks a head whose scores are rotated by position: the spectrum is then that of the
/// position-free W_Q W_Kᵀ (relative offset 0; ours, as in the paper) and flagged.
template <class T, int D>
HeadSpectrum attention_head_spectrum(const AttentionWeights<T, D>& w, Index n_heads, Index head,
                                     BiasTreatment bias = BiasTreatment::exclude,
                                     bool rotary = false, double fraction = 0.9) {
  const auto [q, k] = head_score_factors(w, n_heads, head, bias);
  HeadSpectrum h = bilinear_spectrum(q, k, fraction);
  h.head = head;
  h.key_head = head / (n_heads / key_value_heads(w, n_heads));
  h.position_free = rotary;
  h.bias_included = bias == BiasTreatment::homogeneous;
  return h;
}

/// Every head of a layer of a standard model, tagged with `layer`.
template <class T, int D>
std::vector<HeadSpectrum> attention_layer_spectrum(const AttentionWeights<T, D>& w, Index layer,
                                                   Index n_heads,
                                                   BiasTreatment bias = BiasTreatment::exclude,
                                                   bool rotary = false, double fraction = 0.9) {
  std::vector<HeadSpectrum> out;
  for (Index h = 0; h < n_heads; ++h) {
    out.push_back(attention_head_spectrum(w, n_heads, h, bias, rotary, fraction));
    out.back().layer = layer;
  }
  return out;
}

/// Options of the model-level analysis.
struct SpectrumOptions {
  BiasTreatment bias = BiasTreatment::exclude;  // the paper's W_Q W_Kᵀ (PAPERS §B1)
  double fraction = 0.9;                        // energy share of the "planes for 90%" counts
};

/// Every head of one attention layer, whatever its kind: a DenseAttention-like object
/// (weights(), heads(), rotary_dims()) is a standard layer; an SDAttention-like one
/// (routing(h).u()/v(), filter(h)) an S–D layer; a run-time slot (kind() a std::variant) is
/// visited. Throws ArgumentError for a kind without a bilinear score form (e.g. linear attention).
/// O(H·(d·d_h² + d_h³)).
template <class Attn>
std::vector<HeadSpectrum> attention_spectrum(const Attn& attn, Index layer,
                                             const SpectrumOptions& options = {}) {
  std::vector<HeadSpectrum> out;
  if constexpr (requires { attn.kind().index(); }) {
    return std::visit([&](const auto& kind) { return attention_spectrum(kind, layer, options); },
                      attn.kind());
  } else if constexpr (requires {
                         attn.weights().w_qkv;
                         attn.rotary_dims();
                       }) {
    return attention_layer_spectrum(attn.weights(), layer, attn.heads(), options.bias,
                                    attn.rotary_dims() > 0, options.fraction);
  } else if constexpr (requires {
                         attn.routing(0).u();
                         attn.filter(0);
                       }) {
    const Index d = attn.features();
    for (Index h = 0; h < attn.heads(); ++h) {
      const Eigen::MatrixXd u = attn.routing(h).u().template cast<double>();
      const Eigen::MatrixXd v = attn.routing(h).v().template cast<double>();
      Eigen::VectorXd filter;
      if constexpr (requires { attn.filter(h).diagonal(d); }) {
        filter = attn.filter(h).diagonal(d).transpose().template cast<double>();  // scalar
      } else {
        filter = attn.filter(h).diagonal().transpose().template cast<double>();
      }
      out.push_back(skew_diagonal_spectrum(u, v, filter, options.fraction));
      out.back().layer = layer;
      out.back().head = h;
    }
    return out;
  } else {
    throw ArgumentError(detail::expected_found(
        "attention_spectrum: layer " + std::to_string(layer) + " attention kind",
        "dense or S-D attention (a bilinear score form)", "another kind"));
  }
}

/// Every head of every layer of a model (Transformer<T> or a fixed BasicTransformer), in
/// layer order.
template <class Model>
std::vector<HeadSpectrum> model_attention_spectrum(const Model& model,
                                                   const SpectrumOptions& options = {}) {
  std::vector<HeadSpectrum> out;
  model.for_each_layer([&](const auto& block, Index layer) {
    auto layer_heads = attention_spectrum(block.attention(), layer, options);
    out.insert(out.end(), layer_heads.begin(), layer_heads.end());
  });
  return out;
}

/// Mean and median of one measure over a layer's heads.
struct CascadeStat {
  double mean = 0;
  double median = 0;
};

/// One row of the spectral cascade table (PAPERS §B3): per layer, over its heads.
struct CascadeRow {
  Index layer = 0;
  Index heads = 0;
  CascadeStat skew_energy_fraction;
  CascadeStat effective_rank;      // skew entropy effective rank (rank units)
  CascadeStat rank_90;             // skew rank for 90% of the energy (2 × planes)
  CascadeStat sym_effective_rank;  // symmetric part, as context
};

namespace detail {
inline CascadeStat cascade_stat(std::vector<double> v) {
  CascadeStat s;
  if (v.empty())
    return s;
  double sum = 0;
  for (double x : v)
    sum += x;
  s.mean = sum / static_cast<double>(v.size());
  std::sort(v.begin(), v.end());
  const std::size_t n = v.size();
  s.median = n % 2 == 1 ? v[n / 2] : 0.5 * (v[n / 2 - 1] + v[n / 2]);
  return s;
}
}  // namespace detail

/// The per-layer summary of `heads` (any order), one row per layer present, ascending.
inline std::vector<CascadeRow> spectral_cascade(const std::vector<HeadSpectrum>& heads) {
  std::vector<Index> layers;
  for (const auto& h : heads)
    layers.push_back(h.layer);
  std::sort(layers.begin(), layers.end());
  layers.erase(std::unique(layers.begin(), layers.end()), layers.end());
  std::vector<CascadeRow> rows;
  for (Index layer : layers) {
    std::vector<double> share, eff, r90, sym;
    for (const auto& h : heads) {
      if (h.layer != layer)
        continue;
      share.push_back(h.skew_energy_fraction);
      eff.push_back(h.skew.effective_rank);
      r90.push_back(static_cast<double>(h.skew.rank_90()));
      sym.push_back(h.symmetric.effective_rank);
    }
    CascadeRow row;
    row.layer = layer;
    row.heads = static_cast<Index>(share.size());
    row.skew_energy_fraction = detail::cascade_stat(share);
    row.effective_rank = detail::cascade_stat(eff);
    row.rank_90 = detail::cascade_stat(r90);
    row.sym_effective_rank = detail::cascade_stat(sym);
    rows.push_back(row);
  }
  return rows;
}

}  // namespace nlb
