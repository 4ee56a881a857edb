// A decoder-only transformer built from the library's blocks: embeddings, a sequence of
// Blocks, the final LayerNorm and the unembedding.
#pragma once

#include <cstdint>
#include <span>
#include <tuple>
#include <type_traits>
#include <utility>
#include <vector>

#include "nlb/attention/dense_attention.hpp"
#include "nlb/model/attention_slot.hpp"
#include "nlb/model/block.hpp"
#include "nlb/model/config.hpp"
#include "nlb/model/mlp_slot.hpp"

namespace nlb {

/// Token/position embeddings, final LayerNorm and unembedding.
template <class T, int D = Dynamic>
struct EmbeddingWeights {
  RowMatrix<T, Dynamic, D> token;     // [vocab, d]
  RowMatrix<T, Dynamic, D> position;  // [n_positions, d]; empty (0 rows) without learned positions
  LayerNormWeights<T, D> final_norm;  // ln_f / final_layer_norm
  RowMatrix<T, Dynamic, D> unembedding;  // [vocab, d]; empty when tied to `token`
};

namespace detail {
template <class L>
inline constexpr bool is_std_vector = false;
template <class B, class A>
inline constexpr bool is_std_vector<std::vector<B, A>> = true;
}  // namespace detail

/// The model. `Layers` is either std::vector<BlockT> (layer count known at run time, one block
/// type) or std::tuple<Block0, Block1, ...> (a fixed model as a type: each layer's attention and
/// MLP kind is a template argument, unrolled at compile time, DESIGN.md §3).
///
/// forward(tokens): x = E[tokens] (+ P[positions]); every block; ln_f; logits = x Uᵀ with U the
/// unembedding (or E when tied). Cost ≈ forward_per_token FLOPs (analysis/flops.hpp) per token.
template <class T, int D, class Layers, class Backend = backend::cpu>
class BasicTransformer {
 public:
  using Scalar = T;
  static constexpr int size = D;
  using Stream = Activations<T, D>;

  BasicTransformer(ModelConfig config, EmbeddingWeights<T, D> embeddings, Layers layers)
      : config_(std::move(config)), emb_(std::move(embeddings)), layers_(std::move(layers)) {
    const Index d = config_.d_model;
    if constexpr (D != Dynamic)
      check_dim("Transformer: width (compile-time d)", D, d);
    check_dim("Transformer: token embedding rows (vocab)", config_.vocab_size, emb_.token.rows());
    check_dim("Transformer: token embedding cols (d)", d, emb_.token.cols());
    if (emb_.position.size() > 0) {
      check_dim("Transformer: position embedding cols (d)", d, emb_.position.cols());
    }
    if (emb_.unembedding.size() > 0) {
      check_dim("Transformer: unembedding rows (vocab)", config_.vocab_size,
                emb_.unembedding.rows());
      check_dim("Transformer: unembedding cols (d)", d, emb_.unembedding.cols());
    }
    check_dim("Transformer: layer count", config_.n_layers, layer_count());
  }

  /// Logits [T, vocab] of `tokens` (ids in [0, vocab)). Without a cache the tokens are positions
  /// [0, T); with one they follow the cached positions, whose keys and values are reused and
  /// extended (incremental decoding). `taps(Tap, layer, const Stream&)` observes activations;
  /// `counts` accumulates the rows each gated layer routed. Throws ArgumentError for an empty
  /// sequence, a token out of range, or more positions than n_positions.
  template <class Taps = NoTaps>
  void forward(std::span<const std::int32_t> tokens, RowMatrix<T>& logits, Taps&& taps = {},
               KVCache<T>* cache = nullptr, RouteCounts* counts = nullptr) const {
    Stream x;
    hidden_states(tokens, x, taps, cache, counts);
    const auto& u = emb_.unembedding.size() > 0 ? emb_.unembedding : emb_.token;
    logits.resize(x.rows(), config_.vocab_size);
    logits.noalias() = x * u.transpose();  // [T, vocab]
  }

  /// The final hidden states (after ln_f) [T, d]; forward() without the unembedding.
  template <class Taps = NoTaps>
  void hidden_states(std::span<const std::int32_t> tokens, Stream& x, Taps&& taps = {},
                     KVCache<T>* cache = nullptr, RouteCounts* counts = nullptr) const {
    const Index rows = static_cast<Index>(tokens.size());
    const Index past = cache ? cache->length() : 0;
    check_inputs(tokens, past, cache);
    const Index d = config_.d_model;
    x.resize(rows, d);
    for (Index t = 0; t < rows; ++t) {
      x.row(t) = emb_.token.row(tokens[static_cast<std::size_t>(t)]);
      if (emb_.position.size() > 0)
        x.row(t) += emb_.position.row(past + t);
    }
    detail::fire(taps, Tap::embedding, 0, x);
    for_each_layer([&](const auto& block, Index layer) {
      typename std::decay_t<decltype(block)>::Workspace ws;
      KVCacheLayer<T>* layer_cache =
          cache ? &cache->layers[static_cast<std::size_t>(layer)] : nullptr;
      block.forward(x, ws, layer, layer_cache, taps, counts);
    });
    kernels::layer_norm_rows(Backend{}, x, x, emb_.final_norm.gamma, emb_.final_norm.beta,
                             static_cast<T>(config_.layer_norm_eps));
  }

  /// A KV cache sized for this model (n_positions positions).
  KVCache<T> make_cache() const {
    return KVCache<T>(config_.n_layers, config_.n_positions, config_.d_model);
  }

  const ModelConfig& config() const { return config_; }
  const EmbeddingWeights<T, D>& embeddings() const { return emb_; }
  const Layers& layers() const { return layers_; }
  Layers& layers() { return layers_; }
  Index layer_count() const {
    if constexpr (detail::is_std_vector<Layers>) {
      return static_cast<Index>(layers_.size());
    } else {
      return static_cast<Index>(std::tuple_size_v<Layers>);
    }
  }

  /// Calls f(block, layer_index) for every layer in order.
  template <class F>
  void for_each_layer(F&& f) const {
    if constexpr (detail::is_std_vector<Layers>) {
      for (std::size_t i = 0; i < layers_.size(); ++i)
        f(layers_[i], static_cast<Index>(i));
    } else {
      std::apply(
          [&](const auto&... block) {
            Index i = 0;
            (f(block, i++), ...);
          },
          layers_);
    }
  }

 private:
  void check_inputs(std::span<const std::int32_t> tokens, Index past,
                    const KVCache<T>* cache) const {
    if (tokens.empty()) {
      throw ArgumentError("Transformer::forward: expected at least one token, found none");
    }
    for (std::size_t t = 0; t < tokens.size(); ++t) {
      if (tokens[t] < 0 || tokens[t] >= config_.vocab_size) {
        throw ArgumentError(detail::expected_found(
            "Transformer::forward: token " + std::to_string(t),
            "an id in [0, " + std::to_string(config_.vocab_size) + ")", tokens[t]));
      }
    }
    const Index last = past + static_cast<Index>(tokens.size());
    if (last > config_.n_positions) {
      throw ArgumentError(detail::expected_found(
          "Transformer::forward: positions",
          "at most n_positions = " + std::to_string(config_.n_positions), last));
    }
    if (cache)
      check_dim("Transformer::forward: cache layers", layer_count(),
                static_cast<Index>(cache->layers.size()));
  }

  ModelConfig config_;
  EmbeddingWeights<T, D> emb_;
  Layers layers_;
};

/// The Dynamic-size block of a loaded model: a run-time attention slot (dense, S–D or linear)
/// and a run-time MLP slot.
template <class T, class Backend = backend::cpu>
using DynamicBlock = Block<T, Dynamic, AttentionSlot<T, Backend>, MlpSlot<T, Backend>, Backend>;

/// A model read from a file: Dynamic sizes, per-layer AttentionSlot (dense, S–D or linear)
/// and MlpSlot (full, surrogate or gated).
template <class T, class Backend = backend::cpu>
using Transformer = BasicTransformer<T, Dynamic, std::vector<DynamicBlock<T, Backend>>, Backend>;

/// A fixed-size block: width D, hidden H and activation Act are compile-time choices.
template <class T, int D, int H, class Act, class Backend = backend::cpu>
using FixedBlock = Block<T, D, DenseAttention<T, D, Backend>, Mlp<T, D, H, Act, Backend>, Backend>;

/// A fixed model as a type: N identical fixed-size blocks in a tuple.
template <class T, int D, int H, class Act, std::size_t N, class Backend = backend::cpu>
using FixedTransformer =
    BasicTransformer<T, D,
                     decltype(std::tuple_cat(
                         std::declval<std::array<FixedBlock<T, D, H, Act, Backend>, N>>())),
                     Backend>;

}  // namespace nlb
