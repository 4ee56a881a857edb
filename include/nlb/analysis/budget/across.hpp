// One nonlinearity budget across MLP gates and attention conversions ([ours], docs/budget.md
// "One budget across MLP and attention"): each layer's attention conversions of PAPERS §B1/§B3
// (analysis/attention/conversions.hpp) become options next to its gate thresholds, each costed by
// the FLOPs of what this library runs, measured alone on the calibration split, and allocated in
// the same multiple-choice knapsack (allocation.hpp) as the gates, corrected by joint
// measurement until the upper end of the 95% bootstrap interval meets the budget.
#pragma once

#include <algorithm>
#include <cmath>
#include <cstdint>
#include <functional>
#include <limits>
#include <string>
#include <utility>
#include <vector>

#include "nlb/analysis/attention/conversions.hpp"
#include "nlb/analysis/budget/allocation.hpp"
#include "nlb/analysis/budget/joint_state.hpp"
#include "nlb/analysis/flops.hpp"
#include "nlb/analysis/model_variant.hpp"
#include "nlb/core.hpp"

namespace nlb {

/// FLOPs per token of the attention layer `attn` as this library computes it, in a prefill of
/// windows of `context` tokens (a query attends to s = (context + 1) / 2 positions on average; a
/// multiply-add counts 2; O(d) terms such as biases, rotary, softmax and filters' scaling are not
/// counted), with d the width, d_h = d / H:
///   dense:    4d² (Q, output) + 4·d·d_kv (K, V; d_kv = d without grouped-query heads)
///             + Σ_h 4·s·d_h (scores and mix)
///   S–D:      4d² (V, output) + Σ_h [4·d·R_h (routing features, query and key side)
///             + 2·s·(d + R_h) (scores: the filter term is d wide, whatever the filter)
///             + 2·s·d_h (mix)], R_h the head's routing rank
///   factored: 4d² + Σ_h [4·d·w_h (query and key features) + 2·s·w_h + 2·s·d_h]
///   linear:   8d² + Σ_h [4·d_h² (state update and read-out) + 4·c·d_h (each chunk's full
///             c × c product and its mix, c = min(64, context))]
/// O(H) (S–D: the routing ranks; factored: the widths).
template <class T, class Backend>
double attention_flops_per_token(const AttentionSlot<T, Backend>& attn, Index context) {
  using Slot = AttentionSlot<T, Backend>;
  const double d = static_cast<double>(attn.features());
  const double dh = static_cast<double>(attn.head_dim());
  const double heads = static_cast<double>(attn.heads());
  const double s = 0.5 * static_cast<double>(context + 1);
  return std::visit(
      [&](const auto& a) -> double {
        using Kind = std::decay_t<decltype(a)>;
        if constexpr (std::is_same_v<Kind, typename Slot::Dense>) {
          const double kv = static_cast<double>(a.kv_width());
          return 4.0 * d * d + 4.0 * d * kv + heads * 4.0 * s * dh;
        } else if constexpr (std::is_same_v<Kind, typename Slot::Linear>) {
          const double c =
              static_cast<double>(std::min<Index>(ops::linear_attention_chunk, context));
          return 8.0 * d * d + heads * (4.0 * dh * dh + 4.0 * c * dh);
        } else if constexpr (std::is_same_v<Kind, typename Slot::Factored>) {
          double out = 4.0 * d * d;
          for (Index h = 0; h < a.heads(); ++h) {
            const double w = static_cast<double>(a.head(h).w_query.cols());
            out += 4.0 * d * w + 2.0 * s * w + 2.0 * s * dh;
          }
          return out;
        } else {
          double out = 4.0 * d * d;
          for (Index h = 0; h < a.heads(); ++h) {
            const double r = static_cast<double>(a.routing(h).rank());
            out += 4.0 * d * r + 2.0 * s * (d + r) + 2.0 * s * dh;
          }
          return out;
        }
      },
      attn.kind());
}

/// One way to simplify one layer's attention, built and ready to run as an override.
template <class T, class Backend = backend::cpu>
struct AttentionOption {
  std::string conversion;  // "linear", "skew_rank", "symmetric_diagonal", "symmetric_scalar"
  Index parameter = 0;     // the routing rank r for skew_rank, else 0
  AttentionSlot<T, Backend> attention;
  double flops_per_token = 0;   // attention_flops_per_token of the converted layer
  double saving_per_token = 0;  // the layer's own attention's FLOPs − flops_per_token
};

/// A layer's conversions and why others do not apply.
template <class T, class Backend = backend::cpu>
struct LayerAttentionOptions {
  double flops_per_token = 0;  // the layer's own attention
  std::vector<AttentionOption<T, Backend>> options;
  std::vector<std::string> not_applicable;
};

namespace detail {

// An S–D layer whose every head's routing is its best rank-`rank` approximation (the largest
// rank/2 rotation planes, SkewSymmetricRouting::from_matrix of S = U Vᵀ − V Uᵀ; heads already
// at or below `rank` kept), its filters and projections unchanged: a smaller S–D layer, so its
// features and scores shrink with the rank (PAPERS §B3's cascade allocation).
template <class T, class Backend, class SD>
SD sd_with_rank(const SD& attn, Index rank) {
  using Routing = typename SD::Routing;
  std::vector<Routing> routing;
  std::vector<typename SD::Filter> filters;
  for (Index h = 0; h < attn.heads(); ++h) {
    const Routing& r = attn.routing(h);
    if (r.rank() <= rank) {
      routing.push_back(r);
    } else {
      const RowMatrix<T> s = r.u() * r.v().transpose() - r.v() * r.u().transpose();  // [d, d]
      routing.push_back(Routing::from_matrix(s, rank));
    }
    filters.push_back(attn.filter(h));
  }
  return SD(std::move(routing), std::move(filters), attn.w_v(), attn.b_v(), attn.w_out(),
            attn.b_out());
}

}  // namespace detail

/// Per layer of `model`, every attention conversion of PAPERS §B1/§B3 that applies, built:
/// - "linear": ELU+1 linear attention on the layer's own q, k, v (dense layers, rotary or not);
/// - "skew_rank" r (r in skew_truncation_ranks below the layer's largest head rank): an S–D
///   layer rebuilt with routing rank r (its features and scores shrink); a standard position-free
///   layer as the FactoredAttention form of its truncated heads (analysis/attention/conversions);
/// - "symmetric_scalar": an S–D layer with one scalar filter per head (the mean of its diagonal,
///   a ScalarFilter with θ = softplus⁻¹ of it); a standard position-free layer in factored form;
/// - "symmetric_diagonal": a standard position-free layer in factored form.
/// Each with its FLOPs per token at `context` (attention_flops_per_token) and the saving against
/// the layer's own attention, which may be ≤ 0 (a factored form is wider than the head it
/// replaces; linear attention's chunks cost more than a short causal window): the allocation
/// offers only options that save. O(L · H · d³) for the S–D rebuilds.
template <class T, class Backend>
std::vector<LayerAttentionOptions<T, Backend>> attention_options(
    const Transformer<T, Backend>& model, Index context) {
  using Slot = AttentionSlot<T, Backend>;
  std::vector<LayerAttentionOptions<T, Backend>> out;
  for (Index l = 0; l < model.layer_count(); ++l) {
    const Slot& attn = model.layers()[static_cast<std::size_t>(l)].attention();
    LayerAttentionOptions<T, Backend> layer;
    layer.flops_per_token = attention_flops_per_token(attn, context);
    auto add = [&](std::string name, Index parameter, Slot converted) {
      AttentionOption<T, Backend> o;
      o.conversion = std::move(name);
      o.parameter = parameter;
      o.flops_per_token = attention_flops_per_token(converted, context);
      o.saving_per_token = layer.flops_per_token - o.flops_per_token;
      o.attention = std::move(converted);
      layer.options.push_back(std::move(o));
    };
    if (attn.template holds<typename Slot::Dense>()) {
      const auto& dense = attn.template get<typename Slot::Dense>();
      if (dense.kv_heads() != dense.heads()) {
        layer.not_applicable.push_back(
            "linear: grouped-query heads (several query heads share one key/value head)");
      } else {
        add("linear", 0,
            Slot(typename Slot::Linear(dense.weights(), dense.heads(), dense.rotary_dims(),
                                       dense.rotary_base(), dense.kv_heads(),
                                       dense.rope_scaling())));
      }
      if (dense.rotary_dims() > 0) {
        layer.not_applicable.push_back(
            "skew_rank, symmetric_*: rotary heads have no fixed bilinear score form");
      } else {
        const LayerForms<T> forms = layer_forms<T>(attn);
        Index max_rank = 0;
        for (const auto& f : forms.heads)
          max_rank = std::max(max_rank, f.max_skew_rank());
        for (Index r : skew_truncation_ranks(max_rank)) {
          if (r < max_rank)
            add("skew_rank", r, Slot(convert_layer<T, Backend>(forms, [r](const HeadForm& f) {
                  return truncate_skew(f, r);
                })));
        }
        add("symmetric_diagonal", 0, Slot(convert_layer<T, Backend>(forms, [](const HeadForm& f) {
              return replace_symmetric(f, SymmetricReplacement::diagonal);
            })));
        add("symmetric_scalar", 0, Slot(convert_layer<T, Backend>(forms, [](const HeadForm& f) {
              return replace_symmetric(f, SymmetricReplacement::scalar);
            })));
      }
    } else if (attn.template holds<typename Slot::SDDiagonal>() ||
               attn.template holds<typename Slot::SDScalar>()) {
      layer.not_applicable.push_back(
          "linear: S-D layers have no query/key projections for ELU+1 linear attention");
      std::visit(
          [&](const auto& sd) {
            using Kind = std::decay_t<decltype(sd)>;
            if constexpr (std::is_same_v<Kind, typename Slot::SDDiagonal> ||
                          std::is_same_v<Kind, typename Slot::SDScalar>) {
              Index max_rank = 0;
              for (Index h = 0; h < sd.heads(); ++h)
                max_rank = std::max(max_rank, sd.routing(h).rank());
              for (Index r : skew_truncation_ranks(max_rank))
                if (r < max_rank)
                  add("skew_rank", r, Slot(detail::sd_with_rank<T, Backend>(sd, r)));
              if constexpr (std::is_same_v<Kind, typename Slot::SDDiagonal>) {
                std::vector<typename Slot::Routing> routing;
                std::vector<ScalarFilter<T, Backend>> filters;
                for (Index h = 0; h < sd.heads(); ++h) {
                  routing.push_back(sd.routing(h));
                  filters.push_back(
                      ScalarFilter<T, Backend>::from_value(sd.filter(h).diagonal().mean()));
                }
                add("symmetric_scalar", 0,
                    Slot(typename Slot::SDScalar(std::move(routing), std::move(filters), sd.w_v(),
                                                 sd.b_v(), sd.w_out(), sd.b_out())));
              } else {
                layer.not_applicable.push_back(
                    "symmetric_scalar: the layer's filter already is one scalar per head");
              }
            }
          },
          attn.kind());
    } else {
      layer.not_applicable.push_back(std::string("every conversion: the layer runs ") +
                                     attn.kind_name() + " attention already");
    }
    out.push_back(std::move(layer));
  }
  return out;
}

/// The allocation's groups across MLP and attention: groups [0, L) are the layers' gates
/// (option k: linear fraction k / steps), groups [L, 2L) the layers' attention (option k ≥ 1:
/// offered[l][k − 1], an index into the layer's options).
struct AcrossGroups {
  Index layers = 0;
  std::vector<std::vector<std::size_t>> offered;  // [layers] options that save FLOPs
  LayerCostCurves curves;  // [2L] cost curves; attention groups' linear_fraction are 0
  std::vector<std::vector<double>> value;  // [2L][options] FLOPs saved per token
};

/// The variant of `steps` (groups as AcrossGroups): gates at `thresholds[l][k]` for the MLP
/// groups and the chosen attention overrides (pointing into `options`, keep it alive).
template <class T, class Backend>
ModelVariant<T, Backend> across_variant(
    const Transformer<T, Backend>& model,
    const std::vector<RidgeSurrogate<T, Dynamic, Dynamic, Backend>>& surrogates,
    const std::vector<HyperplaneGate<T, Dynamic, Backend>>& gates,
    const std::vector<std::vector<double>>& thresholds, Index steps_per_gate,
    const std::vector<LayerAttentionOptions<T, Backend>>& options, const AcrossGroups& groups,
    const std::vector<Index>& steps) {
  const auto layers = static_cast<std::size_t>(groups.layers);
  JointState s;
  s.fractions.assign(layers, 0.0);
  s.thresholds.assign(layers, std::numeric_limits<double>::infinity());
  for (std::size_t l = 0; l < layers; ++l) {
    s.fractions[l] = static_cast<double>(steps[l]) / static_cast<double>(steps_per_gate);
    s.thresholds[l] = thresholds[l][static_cast<std::size_t>(steps[l])];
  }
  ModelVariant<T, Backend> v = joint_variant(model, surrogates, gates, s);
  for (std::size_t l = 0; l < layers; ++l) {
    const Index k = steps[layers + l];
    if (k > 0) {
      const std::size_t o = groups.offered[l][static_cast<std::size_t>(k - 1)];
      v.add_attention(static_cast<Index>(l), options[l].options[o].attention);
    }
  }
  return v;
}

/// The option a state chose for layer `l`'s attention (null when unchanged).
template <class T, class Backend>
const AttentionOption<T, Backend>* chosen_attention(
    const std::vector<LayerAttentionOptions<T, Backend>>& options, const AcrossGroups& groups,
    const std::vector<Index>& steps, std::size_t l) {
  const Index k = steps[static_cast<std::size_t>(groups.layers) + l];
  if (k == 0)
    return nullptr;
  return &options[l].options[groups.offered[l][static_cast<std::size_t>(k - 1)]];
}

/// The groups of the search across MLP and attention: the MLP groups' `mlp_curves` and values
/// (`mlp_saving(f)`: FLOPs saved per token by a gate at linear fraction f), and each layer's
/// offered attention options (saving_per_token > 0) with their cost measured alone on the
/// calibration windows by `measure` (one call, runs from the converted layer on; Δ% against
/// mlp_curves.base_sums, the same windows).
template <class T, class Backend>
AcrossGroups across_groups(const LayerCostCurves& mlp_curves,
                           const std::function<double(double)>& mlp_saving,
                           const std::vector<LayerAttentionOptions<T, Backend>>& options,
                           const WindowSetMeasure<T>& measure) {
  AcrossGroups g;
  g.layers = static_cast<Index>(options.size());
  const auto layers = options.size();
  check_dim("across_groups: cost curve layers", static_cast<long long>(layers),
            static_cast<long long>(mlp_curves.delta_pct.size()));
  g.curves = mlp_curves;
  for (std::size_t l = 0; l < layers; ++l) {
    std::vector<double> v{0.0};
    for (std::size_t k = 1; k < mlp_curves.linear_fraction[l].size(); ++k)
      v.push_back(mlp_saving(mlp_curves.linear_fraction[l][k]));
    g.value.push_back(std::move(v));
  }
  std::vector<ModelVariant<T, Backend>> variants;
  g.offered.resize(layers);
  for (std::size_t l = 0; l < layers; ++l) {
    for (std::size_t o = 0; o < options[l].options.size(); ++o) {
      if (options[l].options[o].saving_per_token > 0) {
        g.offered[l].push_back(o);
        ModelVariant<T, Backend> v;
        v.add_attention(static_cast<Index>(l), options[l].options[o].attention);
        variants.push_back(std::move(v));
      }
    }
  }
  VariantLosses r;
  if (!variants.empty())
    r = measure(variants, false);
  double base_total = 0;
  for (double s : mlp_curves.base_sums)
    base_total += s;
  std::size_t v = 0;
  for (std::size_t l = 0; l < layers; ++l) {
    std::vector<double> delta{0.0}, value{0.0};
    for (std::size_t o : g.offered[l]) {
      check_dim("across_groups: windows", mlp_curves.windows, r.windows);
      delta.push_back(variant_delta_pct(r, v++, base_total));
      value.push_back(options[l].options[o].saving_per_token);
    }
    g.curves.linear_fraction.emplace_back(delta.size(), 0.0);
    g.curves.delta_pct.push_back(std::move(delta));
    g.value.push_back(std::move(value));
  }
  return g;
}

/// allocate_budget over `groups` for `budget_pct`: every try measured jointly by
/// `measure_state(steps)` (gates and attention together), a try's saving the gates' saving at
/// their joint linear fractions plus the chosen attention options' savings.
template <class T, class Backend>
BudgetAllocation allocate_across(
    const AcrossGroups& groups, const std::vector<LayerAttentionOptions<T, Backend>>& options,
    const std::function<double(double)>& mlp_saving, double budget_pct,
    const std::function<JointMeasurement(const std::vector<Index>&)>& measure_state,
    const AllocationOptions& settings) {
  const auto saving = [&](std::size_t g, Index k, const JointMeasurement& m) {
    const auto layers = static_cast<std::size_t>(groups.layers);
    if (g < layers)
      return mlp_saving(m.layer_linear_fraction[g]);
    const std::size_t l = g - layers;
    return options[l].options[groups.offered[l][static_cast<std::size_t>(k - 1)]].saving_per_token;
  };
  return allocate_budget(groups.curves, groups.value, budget_pct, measure_state, saving, settings);
}

}  // namespace nlb
