// Every parameter of a GPT-2 or GPT-NeoX model in nlbudget's layout (Y = X W + b, weights
// [d_in, d_out]), independent of the file it came from; and the builders that turn it into a
// Dynamic Transformer or a fixed-size one.
#pragma once

#include <array>
#include <type_traits>
#include <utility>
#include <vector>

#include "nlb/model/transformer.hpp"

namespace nlb {

/// One layer's MLP weights: W_fc [d, h], b_fc [h], W_proj [h, d], b_proj [d]; for a SwiGLU MLP
/// (ActivationKind::swiglu) W_fc = [W_gate | W_up] [d, 2h], W_proj = W_down [h, d] and no
/// biases (b_fc, b_proj empty). For a linearized
/// layer (docs/linearize.md) also its surrogate and gate. `kind` says which parts are set:
/// full: the MLP only; linear: the surrogate only (the MLP matrices are empty); gated: all.
/// W_fc and W_proj are in storage S (nlb/core/weight_storage.hpp: float matrices by default; a
/// loader reading for a backend::with_weights model keeps them in that backend's storage).
template <class T, class S = storage::f32>
struct MlpWeights {
  weight_matrix<S, T> w_fc;
  RowVector<T> b_fc;
  weight_matrix<S, T> w_proj;
  RowVector<T> b_proj;
  MlpKind kind = MlpKind::full;
  RowMatrix<T> w_surrogate;  // [d, d]: y = x W + b (PAPERS §A1); linear and gated
  RowVector<T> b_surrogate;  // [d]
  ColVector<T> gate_weight;  // [d], folded (PAPERS §A3); gated only
  T gate_bias = T(0);        // folded bias
  T gate_threshold = T(0);   // linear iff x·w + b > threshold
};

/// The MlpSlot a layer's weights describe: the full Mlp with the configured GELU, its
/// RidgeSurrogate, or a GatedMLP of the two with its HyperplaneGate (by `m.kind`). The
/// matrices move into the slot (the const& overload copies them first). The weights' storage S
/// is float or the backend's own (Backend::weights).
/// Throws ShapeError / NumericError as the parts' constructors do.
template <class T, class Backend = backend::cpu, class S = storage::f32>
MlpSlot<T, Backend> make_mlp_slot(const ModelConfig& c, MlpWeights<T, S>&& m) {
  static_assert(std::is_same_v<S, storage::f32> || std::is_same_v<S, typename Backend::weights>,
                "make_mlp_slot: weights in float storage or in the backend's own");
  using Slot = MlpSlot<T, Backend>;
  if (m.kind == MlpKind::linear) {
    return Slot(typename Slot::Surrogate(std::move(m.w_surrogate), std::move(m.b_surrogate)));
  }
  Slot full;
  if (c.activation == ActivationKind::swiglu) {
    full = typename Slot::SwiGlu(std::move(m.w_fc), std::move(m.w_proj));
  } else if (c.activation == ActivationKind::gelu_tanh) {
    full = typename Slot::MlpTanh(std::move(m.w_fc), std::move(m.b_fc), std::move(m.w_proj),
                                  std::move(m.b_proj));
  } else {
    full = typename Slot::MlpErf(std::move(m.w_fc), std::move(m.b_fc), std::move(m.w_proj),
                                 std::move(m.b_proj));
  }
  if (m.kind != MlpKind::gated)
    return full;
  return Slot::gated(std::move(full),
                     typename Slot::Surrogate(std::move(m.w_surrogate), std::move(m.b_surrogate)),
                     typename Slot::Gate(std::move(m.gate_weight), m.gate_bias, m.gate_threshold));
}

template <class T, class Backend = backend::cpu, class S = storage::f32>
MlpSlot<T, Backend> make_mlp_slot(const ModelConfig& c, const MlpWeights<T, S>& m) {
  return make_mlp_slot<T, Backend>(c, MlpWeights<T, S>(m));
}

/// One block's weights (large matrices in storage S).
template <class T, class S = storage::f32>
struct BlockWeights {
  LayerNormWeights<T> ln1;
  AttentionWeights<T, Dynamic, S> attention;
  LayerNormWeights<T> ln2;
  MlpWeights<T, S> mlp;
};

/// A whole model's weights and its configuration (large matrices in storage S).
template <class T, class S = storage::f32>
struct ModelWeights {
  ModelConfig config;
  EmbeddingWeights<T, Dynamic, S> embeddings;
  std::vector<BlockWeights<T, S>> blocks;
};

/// A loaded model's Dynamic-size Transformer; each layer's MLP slot holds what make_mlp_slot
/// builds (the full Mlp with the configured GELU unless the layer is linearized). The weights
/// move into the model, so the model and its weights are never both in memory (load_model);
/// the const& overload copies them first. The weights' storage S is float or Backend::weights
/// (for storage::mapped, a loader's views stay views).
template <class T, class Backend = backend::cpu, class S = storage::f32>
Transformer<T, Backend> make_transformer(ModelWeights<T, S>&& w) {
  using Slot = MlpSlot<T, Backend>;
  const ModelConfig& c = w.config;
  std::vector<DynamicBlock<T, Backend>> blocks;
  blocks.reserve(w.blocks.size());
  for (auto& b : w.blocks) {
    Slot slot = make_mlp_slot<T, Backend>(c, std::move(b.mlp));
    blocks.emplace_back(
        std::move(b.ln1),
        DenseAttention<T, Dynamic, Backend>(std::move(b.attention), c.n_heads, c.rotary_dims(),
                                            c.rotary_base, c.kv_heads(), c.rope_scaling),
        std::move(b.ln2), std::move(slot), c.parallel_residual, static_cast<T>(c.layer_norm_eps),
        /*attn_layer_norm=*/true, c.norm);
  }
  return Transformer<T, Backend>(c, std::move(w.embeddings), std::move(blocks));
}

template <class T, class Backend = backend::cpu, class S = storage::f32>
Transformer<T, Backend> make_transformer(const ModelWeights<T, S>& w) {
  return make_transformer<T, Backend>(ModelWeights<T, S>(w));
}

namespace detail {
// A norm's weights at the compile-time width D. An RMSNorm has no beta; a fixed-size norm still
// holds d zeros there.
template <int D, class T>
LayerNormWeights<T, D> fixed_norm(const LayerNormWeights<T>& n) {
  return {n.gamma,
          n.beta.size() > 0 ? RowVector<T, D>(n.beta) : RowVector<T, D>::Zero(n.gamma.size())};
}
}  // namespace detail

/// One layer as a fixed-size block: width D, hidden width H and activation Act (GeluTanh,
/// GeluErf or SwiGlu) at compile time. Throws ShapeError when the weights do not have those
/// sizes, ArgumentError for a linearized layer (its MLP is not a full MLP; build its block from
/// the parts yourself) or when the configured MLP is not Act's.
template <class T, int D, int H, class Act, class Backend = backend::cpu>
FixedBlock<T, D, H, Act, Backend> make_fixed_block(const ModelConfig& c, const BlockWeights<T>& b) {
  if (b.mlp.kind != MlpKind::full) {
    throw ArgumentError(
        detail::expected_found("make_fixed_block: MLP kind", "full", to_string(b.mlp.kind)));
  }
  const ActivationKind configured = c.activation;
  const ActivationKind wanted = std::is_same_v<Act, SwiGlu>     ? ActivationKind::swiglu
                                : std::is_same_v<Act, GeluTanh> ? ActivationKind::gelu_tanh
                                                                : ActivationKind::gelu_erf;
  if (configured != wanted) {
    throw ArgumentError(detail::expected_found("make_fixed_block: activation", Act::name,
                                               configured == ActivationKind::swiglu ? "silu"
                                               : configured == ActivationKind::gelu_tanh
                                                   ? "gelu_new"
                                                   : "gelu"));
  }
  using FixedMlp = typename fixed_mlp<T, D, H, Act, Backend>::type;
  const auto mlp = [&] {
    if constexpr (std::is_same_v<Act, SwiGlu>) {
      const Index h = b.mlp.w_proj.rows();
      return FixedMlp(b.mlp.w_fc.leftCols(h), b.mlp.w_fc.rightCols(h), b.mlp.w_proj);
    } else {
      return FixedMlp(b.mlp.w_fc, b.mlp.b_fc, b.mlp.w_proj, b.mlp.b_proj);
    }
  };
  return FixedBlock<T, D, H, Act, Backend>(
      detail::fixed_norm<D>(b.ln1),
      DenseAttention<T, D, Backend>(AttentionWeights<T, D>{b.attention.w_qkv, b.attention.b_qkv,
                                                           b.attention.w_out, b.attention.b_out},
                                    c.n_heads, c.rotary_dims(), c.rotary_base, c.kv_heads(),
                                    c.rope_scaling),
      detail::fixed_norm<D>(b.ln2), mlp(), c.parallel_residual, static_cast<T>(c.layer_norm_eps),
      /*attn_layer_norm=*/true, c.norm);
}

/// The embeddings with the compile-time width D (checked).
template <int D, class T>
EmbeddingWeights<T, D> make_fixed_embeddings(const EmbeddingWeights<T>& e) {
  return {e.token, e.position, detail::fixed_norm<D>(e.final_norm), e.unembedding};
}

/// The same model as a type: width D, hidden width H, activation Act and N layers fixed at
/// compile time. Throws ShapeError when the weights do not have those sizes, ArgumentError when
/// the configured MLP is not Act's (make_fixed_block). For per-layer kinds (a linear layer, a gated
/// one), build the tuple of blocks yourself from make_fixed_block and BasicTransformer.
template <class T, int D, int H, class Act, std::size_t N, class Backend = backend::cpu>
FixedTransformer<T, D, H, Act, N, Backend> make_fixed_transformer(const ModelWeights<T>& w) {
  const ModelConfig& c = w.config;
  check_dim("make_fixed_transformer: layer count (compile-time)", static_cast<Index>(N),
            c.n_layers);
  auto layers = [&]<std::size_t... I>(std::index_sequence<I...>) {
    return std::make_tuple(make_fixed_block<T, D, H, Act, Backend>(c, w.blocks.at(I))...);
  }
  (std::make_index_sequence<N>{});
  return FixedTransformer<T, D, H, Act, N, Backend>(c, make_fixed_embeddings<D>(w.embeddings),
                                                    std::move(layers));
}

#ifdef NLB_EXTERN_MODEL_INSTANCES
// Compiled once in tools/instances/model_instances.cpp (docs/architecture.md, "Compile time").
extern template Transformer<float> make_transformer<float>(const ModelWeights<float>&);
extern template Transformer<double> make_transformer<double>(const ModelWeights<double>&);
extern template Transformer<float> make_transformer<float>(ModelWeights<float>&&);
extern template Transformer<double> make_transformer<double>(ModelWeights<double>&&);
#endif

}  // namespace nlb
