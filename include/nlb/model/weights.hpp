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

/// One layer's MLP weights: W_fc [d, h], b_fc [h], W_proj [h, d], b_proj [d]; for a linearized
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
  const bool tanh = c.activation == ActivationKind::gelu_tanh;
  if (m.kind == MlpKind::linear) {
    return Slot(typename Slot::Surrogate(std::move(m.w_surrogate), std::move(m.b_surrogate)));
  }
  const auto mlp = [&]<class MlpT>(std::type_identity<MlpT>) {
    return MlpT(std::move(m.w_fc), std::move(m.b_fc), std::move(m.w_proj), std::move(m.b_proj));
  };
  if (m.kind == MlpKind::gated) {
    typename Slot::Surrogate surrogate(std::move(m.w_surrogate), std::move(m.b_surrogate));
    typename Slot::Gate gate(std::move(m.gate_weight), m.gate_bias, m.gate_threshold);
    if (tanh) {
      return Slot(typename Slot::GatedTanh(mlp(std::type_identity<typename Slot::MlpTanh>{}),
                                           std::move(surrogate), std::move(gate)));
    }
    return Slot(typename Slot::GatedErf(mlp(std::type_identity<typename Slot::MlpErf>{}),
                                        std::move(surrogate), std::move(gate)));
  }
  return tanh ? Slot(mlp(std::type_identity<typename Slot::MlpTanh>{}))
              : Slot(mlp(std::type_identity<typename Slot::MlpErf>{}));
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
    blocks.emplace_back(std::move(b.ln1),
                        DenseAttention<T, Dynamic, Backend>(std::move(b.attention), c.n_heads,
                                                            c.rotary_dims(), c.rotary_base),
                        std::move(b.ln2), std::move(slot), c.parallel_residual,
                        static_cast<T>(c.layer_norm_eps));
  }
  return Transformer<T, Backend>(c, std::move(w.embeddings), std::move(blocks));
}

template <class T, class Backend = backend::cpu, class S = storage::f32>
Transformer<T, Backend> make_transformer(const ModelWeights<T, S>& w) {
  return make_transformer<T, Backend>(ModelWeights<T, S>(w));
}

/// One layer as a fixed-size block: width D, hidden width H and activation Act at compile time.
/// Throws ShapeError when the weights do not have those sizes, ArgumentError for a linearized
/// layer (its MLP is not an Mlp; build its block from the parts yourself).
template <class T, int D, int H, class Act, class Backend = backend::cpu>
FixedBlock<T, D, H, Act, Backend> make_fixed_block(const ModelConfig& c, const BlockWeights<T>& b) {
  if (b.mlp.kind != MlpKind::full) {
    throw ArgumentError(
        detail::expected_found("make_fixed_block: MLP kind", "full", to_string(b.mlp.kind)));
  }
  return FixedBlock<T, D, H, Act, Backend>(
      LayerNormWeights<T, D>{b.ln1.gamma, b.ln1.beta},
      DenseAttention<T, D, Backend>(AttentionWeights<T, D>{b.attention.w_qkv, b.attention.b_qkv,
                                                           b.attention.w_out, b.attention.b_out},
                                    c.n_heads, c.rotary_dims(), c.rotary_base),
      LayerNormWeights<T, D>{b.ln2.gamma, b.ln2.beta},
      Mlp<T, D, H, Act, Backend>(b.mlp.w_fc, b.mlp.b_fc, b.mlp.w_proj, b.mlp.b_proj),
      c.parallel_residual, static_cast<T>(c.layer_norm_eps));
}

/// The embeddings with the compile-time width D (checked).
template <int D, class T>
EmbeddingWeights<T, D> make_fixed_embeddings(const EmbeddingWeights<T>& e) {
  return {e.token, e.position, {e.final_norm.gamma, e.final_norm.beta}, e.unembedding};
}

/// The same model as a type: width D, hidden width H, activation Act and N layers fixed at
/// compile time. Throws ShapeError when the weights do not have those sizes, ArgumentError when
/// the configured activation is not Act. For per-layer kinds (a linear layer, a gated one), build
/// the tuple of blocks yourself from make_fixed_block and BasicTransformer.
template <class T, int D, int H, class Act, std::size_t N, class Backend = backend::cpu>
FixedTransformer<T, D, H, Act, N, Backend> make_fixed_transformer(const ModelWeights<T>& w) {
  const ModelConfig& c = w.config;
  check_dim("make_fixed_transformer: layer count (compile-time)", static_cast<Index>(N),
            c.n_layers);
  const bool tanh = c.activation == ActivationKind::gelu_tanh;
  if (tanh != std::is_same_v<Act, GeluTanh>) {
    throw ArgumentError(detail::expected_found("make_fixed_transformer: activation", Act::name,
                                               tanh ? "gelu_new" : "gelu"));
  }
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
