// Conversions of a model's attention measured by their perplexity (PAPERS §B1, §B3;
// docs/attention_spectrum.md):
//   (a) skew truncation: each head's skew part M_skew replaced by its best rank-r approximation
//       (Eckart–Young: keep the r/2 largest rotation planes), the symmetric part kept;
//   (b) linearization: the first k layers' attention replaced by ELU+1 linear attention on the
//       heads' own q, k, v (LinearAttention, no training);
//   (c) symmetric replacement: M_sym replaced by its diagonal, or by one scalar per head (the
//       mean of that diagonal over the d input coordinates), the skew part kept.
// Standard heads use the exact homogeneous score form x̃ M̃ x̃ᵀ (x̃ = [x, 1], analysis/
// attention/spectrum.hpp) in its span form M̃ = B C Bᵀ; S–D heads have M = S − D with S in the span
// of [U V] and the symmetric part −D already diagonal. A converted head runs as a FactoredAttention
// head: query features x̃ B C' (and x ⊙ δ for a diagonal part), key features x̃ B (and x).
#pragma once

#include <algorithm>
#include <cmath>
#include <cstdint>
#include <functional>
#include <span>
#include <string>
#include <utility>
#include <vector>

#include "nlb/analysis/attention/spectrum.hpp"
#include "nlb/analysis/variant_runner.hpp"
#include "nlb/attention/factored_attention.hpp"
#include "nlb/attention/linear_attention.hpp"
#include "nlb/core.hpp"
#include "nlb/model/loss.hpp"
#include "nlb/model/transformer.hpp"

namespace nlb {

/// One head's score matrix M over n coordinates (n = d + 1 with the homogeneous coordinate last,
/// else n = d), as M = B (C_sym + C_skew) Bᵀ + diag(diagonal):
struct HeadForm {
  Eigen::MatrixXd basis;     // B [n, m], orthonormal columns
  Eigen::MatrixXd skew;      // C_skew [m, m], skew-symmetric
  Eigen::MatrixXd sym;       // C_sym [m, m], symmetric (zero when the symmetric part is diagonal)
  Eigen::VectorXd diagonal;  // [d] or empty: a diagonal symmetric part on the d input coordinates
  bool homogeneous = false;  // n = d + 1
  Index features = 0;        // d

  /// Largest routing rank of the head: 2·⌊m/2⌋ (m ≤ 2·d_h for a standard head, Rank for S–D).
  Index max_skew_rank() const { return 2 * (skew.rows() / 2); }
};

/// The form of a standard head from its factors W̃_Q, W̃_K [n, d_h] (head_score_factors).
/// (`Matrix` is always Eigen::MatrixXd and never deduced: a template only so that Eigen's
/// decompositions are compiled where the function is called, detail/spectrum_linalg.hpp; so are
/// sd_head_form and truncate_skew.)
template <class Matrix = Eigen::MatrixXd>
HeadForm standard_head_form(const detail::DenseOf<Matrix>& fq, const detail::DenseOf<Matrix>& fk,
                            Index d) {
  const detail::SpanForm span = detail::span_form<Matrix>(fq, fk);
  HeadForm f;
  f.basis = span.basis;
  f.skew = detail::skew_part(span.core);
  f.sym = detail::symmetric_part(span.core);
  f.homogeneous = fq.rows() == d + 1;
  f.features = d;
  return f;
}

/// The form of an S–D head: S = U Vᵀ − V Uᵀ (U, V [d, r]) in the span of [U V], and −D with
/// D = diag(filter) (filter [d]).
template <class Matrix = Eigen::MatrixXd>
HeadForm sd_head_form(const detail::DenseOf<Matrix>& u, const detail::DenseOf<Matrix>& v,
                      const Eigen::VectorXd& filter) {
  check_dim("sd_head_form: V rows (d)", u.rows(), v.rows());
  check_dim("sd_head_form: V cols (r)", u.cols(), v.cols());
  check_dim("sd_head_form: filter size (d)", u.rows(), filter.size());
  Eigen::MatrixXd uv(u.rows(), 2 * u.cols());
  uv << u, v;
  HeadForm f;
  f.basis = detail::orthonormal_span<Matrix>(uv);
  const Eigen::MatrixXd bu = f.basis.transpose() * u, bv = f.basis.transpose() * v;
  f.skew = bu * bv.transpose() - bv * bu.transpose();
  f.sym = Eigen::MatrixXd::Zero(f.skew.rows(), f.skew.cols());
  f.diagonal = -filter;
  f.features = u.rows();
  return f;
}

/// (a) The head with its skew part replaced by the best rank-`rank` approximation in Frobenius
/// norm (rank even, 0 ≤ rank; ranks ≥ max_skew_rank() keep it unchanged): the truncated SVD of
/// C_skew (its singular values come in equal pairs, so keeping whole pairs keeps whole planes),
/// made exactly skew-symmetric again. O(m³). ArgumentError for an odd or negative rank.
template <class Matrix = Eigen::MatrixXd>
HeadForm truncate_skew(HeadForm f, Index rank) {
  if (rank < 0 || rank % 2 != 0) {
    throw ArgumentError(detail::expected_found("truncate_skew: rank", "an even number >= 0", rank));
  }
  if (rank >= f.max_skew_rank())
    return f;
  const Eigen::JacobiSVD<Matrix> svd(f.skew, Eigen::ComputeFullU | Eigen::ComputeFullV);
  const Eigen::MatrixXd kept = svd.matrixU().leftCols(rank) *
                               svd.singularValues().head(rank).asDiagonal() *
                               svd.matrixV().leftCols(rank).transpose();
  f.skew = detail::skew_part(kept);
  return f;
}

/// How (c) replaces the symmetric part.
enum class SymmetricReplacement {
  diagonal,  // diag(M_sym) on the d input coordinates
  scalar     // δ̄ I with δ̄ the mean of that diagonal (ours: over the d input coordinates)
};

/// (c) The head with its symmetric part replaced (ours, docs/attention_spectrum.md): by the
/// diagonal of M_sym over the d input coordinates (for a homogeneous form, M_sym's entry of the
/// constant coordinate only adds b_Q·b_K to every logit of a row, which softmax ignores, so it
/// is dropped), or by the mean δ̄ of that diagonal times I. An S–D head's part is already
/// diagonal: `diagonal` keeps it, `scalar` makes it δ̄ I. O(n m²).
inline HeadForm replace_symmetric(HeadForm f, SymmetricReplacement how) {
  const Index d = f.features;
  if (f.diagonal.size() == 0) {
    // diag(B C_sym Bᵀ)_i = Σ_ab B_ia C_ab B_ib
    const Eigen::MatrixXd bc = f.basis.topRows(d) * f.sym;
    f.diagonal = (bc.array() * f.basis.topRows(d).array()).rowwise().sum();
    f.sym.setZero();
  }
  if (how == SymmetricReplacement::scalar)
    f.diagonal.setConstant(f.diagonal.mean());
  return f;
}

/// The head as FactoredAttention factors over x (query features x̃ B C' ⊕ x ⊙ δ, key features
/// x̃ B ⊕ x, with C' = C_sym + C_skew; the constant coordinate's row becomes the bias), so that
/// (x_i A + a)·(x_j B + b) = x̃_i M x̃_jᵀ (up to a row constant for a dropped diagonal entry).
template <class T>
FactoredHead<T> factored_head(const HeadForm& f) {
  const Index d = f.features, m = f.basis.cols();
  const bool has_span = m > 0 && (f.skew.squaredNorm() > 0 || f.sym.squaredNorm() > 0);
  const Index span_width = has_span ? m : 0, diag_width = f.diagonal.size() > 0 ? d : 0;
  Index width = span_width + diag_width;
  const bool zero_width = width == 0;  // M = 0: one zero feature keeps the shapes valid
  if (zero_width)
    width = 1;
  Eigen::MatrixXd query = Eigen::MatrixXd::Zero(d + 1, width), key = query;
  if (has_span) {
    const Eigen::MatrixXd c = f.sym + f.skew;
    const Index n = f.basis.rows();
    query.topLeftCorner(n, m) = f.basis * c;
    key.topLeftCorner(n, m) = f.basis;
  }
  if (diag_width > 0) {
    query.block(0, span_width, d, d) = f.diagonal.asDiagonal();
    key.block(0, span_width, d, d).setIdentity();
  }
  FactoredHead<T> h;
  h.w_query = query.topRows(d).cast<T>();
  h.b_query = query.row(d).cast<T>();
  h.w_key = key.topRows(d).cast<T>();
  h.b_key = key.row(d).cast<T>();
  return h;
}

/// A layer's head forms and its value/output projections, read from a DenseAttention-like
/// (standard, homogeneous forms) or SDAttention-like object, or a slot holding one.
template <class T>
struct LayerForms {
  std::vector<HeadForm> heads;
  RowMatrix<T> w_v, w_out;  // [d, d]
  RowVector<T> b_v, b_out;  // [d]
  bool rotary = false;      // a rotary layer: its forms are position-free (not its real scores)
};

/// The forms of `attn`'s heads. ArgumentError for a kind without a bilinear score form.
template <class T, class Attn>
LayerForms<T> layer_forms(const Attn& attn) {
  if constexpr (requires { attn.kind().index(); }) {
    return std::visit([](const auto& kind) { return layer_forms<T>(kind); }, attn.kind());
  } else if constexpr (requires {
                         attn.weights().w_qkv;
                         attn.rotary_dims();
                       }) {
    // Grouped-query heads as multi-head attention (each query head its own copy of its group's
    // keys and values): the same layer, with per-head V columns for the converted forms. A
    // multi-head layer's weights are read in place.
    const bool grouped = attn.kv_heads() != attn.heads();
    using Weights = std::decay_t<decltype(attn.weights())>;
    const Weights expanded = grouped ? multi_head_weights(attn.weights(), attn.heads()) : Weights{};
    const auto& w = grouped ? expanded : attn.weights();
    const Index d = attn.features();
    LayerForms<T> out;
    for (Index h = 0; h < attn.heads(); ++h) {
      const auto [fq, fk] = head_score_factors(w, attn.heads(), h, BiasTreatment::homogeneous);
      out.heads.push_back(standard_head_form(fq, fk, d));
    }
    out.w_v = w.w_qkv.middleCols(2 * d, d);
    out.b_v = w.b_qkv.middleCols(2 * d, d);
    out.w_out = w.w_out;
    out.b_out = w.b_out;
    out.rotary = attn.rotary_dims() > 0;
    return out;
  } else if constexpr (requires {
                         attn.routing(0).u();
                         attn.filter(0);
                         attn.w_v();
                       }) {
    const Index d = attn.features();
    LayerForms<T> out;
    for (Index h = 0; h < attn.heads(); ++h) {
      Eigen::VectorXd filter;
      if constexpr (requires { attn.filter(h).diagonal(d); }) {
        filter = attn.filter(h).diagonal(d).transpose().template cast<double>();
      } else {
        filter = attn.filter(h).diagonal().transpose().template cast<double>();
      }
      out.heads.push_back(sd_head_form(attn.routing(h).u().template cast<double>(),
                                       attn.routing(h).v().template cast<double>(), filter));
    }
    out.w_v = attn.w_v();
    out.b_v = attn.b_v();
    out.w_out = attn.w_out();
    out.b_out = attn.b_out();
    return out;
  } else {
    throw ArgumentError(
        "layer_forms: expected dense or S-D attention (a bilinear score form), found another kind");
  }
}

/// The layer with every head form replaced by `transform(form)`, as FactoredAttention
/// (logit scale 1/√d_h, as the original). ArgumentError for a rotary layer (its scores are not
/// a fixed bilinear form, so a converted head would drop the positions).
template <class T, class Backend = backend::cpu>
FactoredAttention<T, Dynamic, Backend> convert_layer(
    const LayerForms<T>& layer, const std::function<HeadForm(const HeadForm&)>& transform) {
  if (layer.rotary) {
    throw ArgumentError(detail::expected_found(
        "convert_layer: attention", "a position-free bilinear form (no rotary)", "rotary heads"));
  }
  std::vector<FactoredHead<T>> heads;
  for (const auto& f : layer.heads)
    heads.push_back(factored_head<T>(transform(f)));
  const Index dh = layer.w_out.rows() / static_cast<Index>(layer.heads.size());
  return FactoredAttention<T, Dynamic, Backend>(heads, layer.w_v, layer.b_v, layer.w_out,
                                                layer.b_out, T(1) / std::sqrt(static_cast<T>(dh)));
}

/// The routing ranks (a) is measured at: 2, 4, 8, … below `max_rank`, then `max_rank` (even).
inline std::vector<Index> skew_truncation_ranks(Index max_rank) {
  std::vector<Index> ranks;
  for (Index r = 2; r < max_rank; r *= 2)
    ranks.push_back(r);
  if (max_rank >= 2)
    ranks.push_back(max_rank);
  return ranks;
}

/// A copy of `model` whose layer `layer` runs `attention` (everything else copied by value): a
/// converted model to keep or write out. Measurements use a LayerOverride instead, which copies
/// nothing (measure_attention_conversions). ArgumentError for a layer out of range.
template <class T, class Backend, class Attn>
Transformer<T, Backend> with_layer_attention(const Transformer<T, Backend>& model, Index layer,
                                             Attn attention) {
  if (layer < 0 || layer >= model.layer_count()) {
    throw ArgumentError(
        detail::expected_found("with_layer_attention: layer",
                               "in [0, " + std::to_string(model.layer_count()) + ")", layer));
  }
  Transformer<T, Backend> out = model;
  const auto& b = model.layers()[static_cast<std::size_t>(layer)];
  out.layers()[static_cast<std::size_t>(layer)] = DynamicBlock<T, Backend>(
      b.ln1(), AttentionSlot<T, Backend>(std::move(attention)), b.ln2(), b.mlp(),
      b.parallel_residual(), b.layer_norm_eps(), b.attn_layer_norm());
  return out;
}

/// One measured conversion.
struct ConversionRow {
  std::string conversion;  // "skew_rank", "linear_first_layers", "symmetric_diagonal",
                           // "symmetric_scalar"
  Index parameter = 0;     // r for skew_rank, k for linear_first_layers, else 0
  double ppl = 0;
  double delta_percent = 0;  // 100 (PPL / PPL_base − 1)
};

/// The perplexity table of the conversions.
struct ConversionReport {
  PerplexityResult baseline;
  std::vector<ConversionRow> rows;
  std::vector<std::string> not_applicable;  // conversions skipped for this model, with the reason
};

/// Measures (a), (b) and (c) on the runner's model with the `nlb eval` protocol (windows of
/// `context` over `tokens`, at most `max_windows`, 0 = all): (a) at every rank of
/// skew_truncation_ranks(largest head rank), each head at min(r, its max); (b) for k = 1 … L;
/// (c) diagonal and scalar. Not applicable (listed with the reason, not measured): (a) and (c)
/// for rotary layers, (b) for S–D layers (no query/key projections), (c) "diagonal" for S–D
/// layers (their symmetric part −D already is). `progress(done, total)` after each evaluation.
/// Cost: one evaluation of the unmodified model, then one per conversion from its first
/// converted layer on (the runner's kept prefix). The model is only read: converted layers run
/// as attention overrides (ModelVariant), so nothing but the converted layers is built, one
/// conversion at a time.
template <class T>
ConversionReport measure_attention_conversions(
    VariantRunner<T>& runner, std::span<const std::int32_t> tokens, Index context,
    Index max_windows, const std::function<void(Index, Index)>& progress = {}) {
  using Backend = backend::cpu;
  using Slot = AttentionSlot<T, Backend>;
  const auto& model = runner.model();
  const Index layers = model.layer_count();
  std::vector<LayerForms<T>> forms;
  bool rotary = false, sd = false, grouped = false;
  Index max_rank = 0;
  for (Index l = 0; l < layers; ++l) {
    const auto& attn = model.layers()[static_cast<std::size_t>(l)].attention();
    forms.push_back(layer_forms<T>(attn));
    rotary = rotary || forms.back().rotary;
    sd = sd || !attn.template holds<typename Slot::Dense>();
    if (const auto* dense = std::get_if<typename Slot::Dense>(&attn.kind()))
      grouped = grouped || dense->kv_heads() != dense->heads();
    for (const auto& f : forms.back().heads)
      max_rank = std::max(max_rank, f.max_skew_rank());
  }
  ConversionReport report;
  const bool factored_ok = !rotary;
  const bool linear_ok = !sd && !grouped;
  const std::vector<Index> ranks =
      factored_ok ? skew_truncation_ranks(max_rank) : std::vector<Index>{};
  const Index total = 1 + static_cast<Index>(ranks.size()) + (linear_ok ? layers : 0) +
                      (factored_ok ? (sd ? 1 : 2) : 0);
  Index done = 0;
  report.baseline = perplexity(runner, tokens, context, max_windows);
  if (progress)
    progress(++done, total);
  const Index windows = report.baseline.windows;
  // The converted layers as attention replacements of one variant: the model is neither copied
  // nor changed; only the converted attention layers are new objects.
  auto evaluate = [&](const std::vector<Slot>& converted, Index converted_layers) {
    ModelVariant<T> v;
    for (Index l = 0; l < converted_layers; ++l)
      v.add_attention(l, converted[static_cast<std::size_t>(l)]);
    const VariantLosses r = runner.measure(tokens, windows, context, {v}, false);
    if (progress)
      progress(++done, total);
    return perplexity_of(r, r.variant[0]).ppl;
  };

  auto add = [&](std::string name, Index parameter, const std::vector<Slot>& converted,
                 Index converted_layers) {
    ConversionRow row;
    row.conversion = std::move(name);
    row.parameter = parameter;
    row.ppl = evaluate(converted, converted_layers);
    row.delta_percent = 100.0 * (row.ppl / report.baseline.ppl - 1.0);
    report.rows.push_back(row);
  };
  // Every layer's heads converted by `transform`.
  auto convert_all = [&](const std::function<HeadForm(const HeadForm&)>& transform) {
    std::vector<Slot> converted;
    for (Index l = 0; l < layers; ++l)
      converted.emplace_back(
          convert_layer<T, Backend>(forms[static_cast<std::size_t>(l)], transform));
    return converted;
  };
  if (factored_ok) {
    for (Index r : ranks) {
      add("skew_rank", r, convert_all([r](const HeadForm& f) { return truncate_skew(f, r); }),
          layers);
    }
  } else {
    report.not_applicable.push_back(
        "skew_rank, symmetric_diagonal, symmetric_scalar: rotary heads have position-dependent "
        "scores, so W_Q W_K^T is not their bilinear form and a converted head would drop the "
        "positions");
  }
  if (linear_ok) {
    // ELU+1 linear attention on each layer's own projections (LinearAttention holds them).
    std::vector<Slot> linear;
    for (Index l = 0; l < layers; ++l) {
      const auto& dense = model.layers()[static_cast<std::size_t>(l)]
                              .attention()
                              .template get<typename Slot::Dense>();
      linear.emplace_back(LinearAttention<T, Dynamic, Backend>(
          dense.weights(), dense.heads(), dense.rotary_dims(), dense.rotary_base(),
          dense.kv_heads(), dense.rope_scaling()));
    }
    for (Index k = 1; k <= layers; ++k)
      add("linear_first_layers", k, linear, k);
  } else if (sd) {
    report.not_applicable.push_back(
        "linear_first_layers: S-D layers have no query/key projections, so there are no q, k for "
        "ELU+1 linear attention");
  } else {
    report.not_applicable.push_back(
        "linear_first_layers: grouped-query heads share keys and values, which ELU+1 linear "
        "attention (one state per head) does not take");
  }
  if (factored_ok) {
    if (!sd) {
      add("symmetric_diagonal", 0, convert_all([](const HeadForm& f) {
            return replace_symmetric(f, SymmetricReplacement::diagonal);
          }),
          layers);
    } else {
      report.not_applicable.push_back(
          "symmetric_diagonal: the symmetric part of an S-D head, -D, is already diagonal");
    }
    add("symmetric_scalar", 0, convert_all([](const HeadForm& f) {
          return replace_symmetric(f, SymmetricReplacement::scalar);
        }),
        layers);
  }
  return report;
}

}  // namespace nlb
