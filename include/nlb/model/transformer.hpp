// A decoder-only transformer built from the library's blocks: embeddings, a sequence of
// Blocks, the final LayerNorm and the unembedding. Written once for every backend: a host model
// copied onto backend::cuda (to_backend) is the same class over device blocks (DESIGN.md §4).
#pragma once

// Calls the ops by qualified name: nlb/cuda.cuh must come first (nlb/cuda/ops.cuh checks).
#define NLB_OPS_CALLERS_INCLUDED

#include <algorithm>
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
#include "nlb/model/layer_override.hpp"
#include "nlb/model/mlp_slot.hpp"
#include "nlb/ops/gemm.hpp"
#include "nlb/ops/narrow_gemm.hpp"
#include "nlb/ops/rows.hpp"
#include "nlb/ops/scratch.hpp"

namespace nlb {

/// Token/position embeddings, final LayerNorm and unembedding; the three matrices in storage
/// S (nlb/core/weight_storage.hpp; storage::device on backend::cuda), the norm in T in S's
/// memory space.
template <class T, int D = Dynamic, class S = storage::f32>
struct EmbeddingWeights {
  weight_matrix<S, T, Dynamic, D> token;     // [vocab, d]
  weight_matrix<S, T, Dynamic, D> position;  // [n_positions, d]; empty without learned positions
  LayerNormWeights<T, D, storage::memory_of<S>> final_norm;  // ln_f / final_layer_norm / norm
  weight_matrix<S, T, Dynamic, D> unembedding;  // [vocab, d]; empty when tied to `token`
};

/// `w` (float matrices, or MappedMatrix views for storage::mapped) with its matrices in storage
/// S (moved through when they are in it already). O(size) for a conversion.
template <class S, class T, int D, class From>
EmbeddingWeights<T, D, S> to_weight_storage(EmbeddingWeights<T, D, From>&& w) {
  return {to_weight_storage<S>(std::move(w.token)), to_weight_storage<S>(std::move(w.position)),
          std::move(w.final_norm), to_weight_storage<S>(std::move(w.unembedding))};
}

namespace detail {
template <class L>
inline constexpr bool is_std_vector = false;
template <class B, class A>
inline constexpr bool is_std_vector<std::vector<B, A>> = true;

// std::tuple of the distinct types among Ts (first occurrence order): one workspace per kind
// of block, shared by the layers of that kind.
template <class Tuple, class... Ts>
struct unique_tuple {
  using type = Tuple;
};
template <class... Seen, class U, class... Ts>
struct unique_tuple<std::tuple<Seen...>, U, Ts...>
    : std::conditional_t<(std::is_same_v<U, Seen> || ...), unique_tuple<std::tuple<Seen...>, Ts...>,
                         unique_tuple<std::tuple<Seen..., U>, Ts...>> {};

// The block types of a layer container: std::vector<Block> (one kind) or std::tuple<Blocks...>.
template <class Layers>
struct layer_blocks;
template <class B, class A>
struct layer_blocks<std::vector<B, A>> {
  using first = B;
  static constexpr bool same_scalar = true, same_backend = true, compatible_sizes = true;
  static constexpr int size = B::size;
};
template <class B0, class... Bs>
struct layer_blocks<std::tuple<B0, Bs...>> {
  using first = B0;
  static constexpr bool same_scalar =
      (std::is_same_v<typename B0::Scalar, typename Bs::Scalar> && ...);
  static constexpr bool same_backend =
      (std::is_same_v<typename B0::backend_type, typename Bs::backend_type> && ...);
  static constexpr bool compatible_sizes = (sizes_compatible<B0::size, Bs::size> && ...);
  // The first compile-time width among the blocks (they are compatible), else Dynamic.
  static constexpr int size = [] {
    int d = B0::size;
    ((d = (d == Dynamic ? int{Bs::size} : d)), ...);
    return d;
  }();
};

// The layer container of the same blocks on backend B.
template <class Layers, class B>
struct layers_on;
template <class Block, class A, class B>
struct layers_on<std::vector<Block, A>, B> {
  using type = std::vector<on_backend_t<B, Block>>;
};
template <class... Blocks, class B>
struct layers_on<std::tuple<Blocks...>, B> {
  using type = std::tuple<on_backend_t<B, Blocks>...>;
};

template <class Layers>
struct block_workspaces;
template <class B, class A>
struct block_workspaces<std::vector<B, A>> {
  using type = std::tuple<typename B::Workspace>;
};
template <class... Blocks>
struct block_workspaces<std::tuple<Blocks...>> {
  using type = typename unique_tuple<std::tuple<>, typename Blocks::Workspace...>::type;
};
}  // namespace detail

/// The model. `Layers` is either std::vector<BlockT> (layer count known at run time, one block
/// type) or std::tuple<Block0, Block1, ...> (a fixed model as a type: each layer's attention and
/// MLP kind is a template argument, unrolled at compile time, DESIGN.md §3).
///
/// forward(tokens): x = E[tokens] (+ P[positions]); every block; ln_f; logits = x Uᵀ with U the
/// unembedding (or E when tied). Cost ≈ forward_per_token FLOPs (analysis/flops.hpp) per token.
/// The same pass in pieces, for analyses that keep the residual stream at a layer's input and
/// continue with other MLPs or attention: embed(), run_layers() (with per-layer LayerOverride,
/// whose gated MLPs refer to the model's own weights) and head(); forward() is exactly embed +
/// run_layers over every layer + head. The model is never changed by any of them.
///
/// Scalar, width and backend are the blocks' (a tuple's blocks must agree; static_assert). Every
/// call takes the backend's Context first; on backend::cuda the stream, logits and cache stay in
/// device memory (to_backend(backend::cuda{}, host_model) uploads a host model once).
template <class Layers>
class BasicTransformer {
  using Blocks = detail::layer_blocks<Layers>;
  static_assert(Blocks::same_scalar,
                "BasicTransformer: every block must share the first block's scalar type "
                "(Block0::Scalar vs BlockN::Scalar)");
  static_assert(Blocks::same_backend,
                "BasicTransformer: every block must run on the first block's backend "
                "(Block0::backend_type vs BlockN::backend_type)");
  static_assert(Blocks::compatible_sizes,
                "BasicTransformer: block widths differ at compile time "
                "(Block0::size vs BlockN::size)");
  using T = typename Blocks::first::Scalar;
  using Backend = typename Blocks::first::backend_type;
  using Storage = storage_traits<Backend, T>;
  static constexpr int D = Blocks::size;

 public:
  using backend_type = Backend;
  using Scalar = T;
  static constexpr int size = D;
  using Stream = typename Storage::template activations<D>;
  using Logits = typename Storage::matrix;
  using Override = LayerOverride<T, Backend>;
  using Weights = typename Backend::weights;  // storage of the embedding matrices
  using Cache = KVCache<T, typename Backend::memory_space>;
  template <class B>
  using on_backend = BasicTransformer<typename detail::layers_on<Layers, B>::type>;

  /// Scratch memory of forward passes, owned by the caller and reused across calls (gemma.cpp's
  /// `Activations`): the residual stream, one workspace per kind of block (shared by the layers
  /// of that kind) and the embedding's and head's scratch. After a call with T tokens (and S
  /// cached positions), a call with T tokens and at most S positions performs no heap allocation
  /// (tests/model/test_forward_allocations.cpp). One workspace per thread.
  struct Workspace {
    Stream x;  // [T, d] residual stream
    typename detail::block_workspaces<Layers>::type blocks;
    ops::Scratch<Backend, T> head;  // the embedding's, the unembedding product's and the losses'
  };

  template <class From = storage::f32>
  BasicTransformer(ModelConfig config, EmbeddingWeights<T, D, From> embeddings, Layers layers)
      : config_(std::move(config)),
        emb_(to_weight_storage<Weights>(std::move(embeddings))),
        layers_(std::move(layers)) {
    check_parts();
  }

  /// The same model on another backend: every weight copied into this backend's storage once
  /// (to_backend(backend::cuda{}, host) uploads a host model).
  template <class OtherLayers>
  requires(!std::is_same_v<OtherLayers, Layers>) explicit BasicTransformer(
      const BasicTransformer<OtherLayers>& other)
      : config_(other.config()), emb_(copied(other.embeddings())), layers_(copied(other)) {
    check_parts();
  }

  /// Logits [T, vocab] of `tokens` (ids in [0, vocab)), using the caller's workspace `ws`.
  /// Without a cache the tokens are positions [0, T); with one they follow the cached
  /// positions, whose keys and values are reused and extended (incremental decoding).
  /// `taps(Tap, layer, const Stream&)` observes activations; `counts` accumulates the rows each
  /// gated layer routed. Throws ArgumentError for an empty sequence, a token out of range, or
  /// more positions than n_positions.
  template <class Taps = NoTaps>
  void forward(Context<Backend>& ctx, std::span<const std::int32_t> tokens, Logits& logits,
               Workspace& ws, Taps&& taps = {}, Cache* cache = nullptr,
               RouteCounts* counts = nullptr) const {
    run_all_layers(ctx, tokens, ws.x, ws, taps, cache, counts);
    head(ctx, ws.x, logits, ws);
  }

  /// The final hidden states (after ln_f) [T, d]: forward() without the unembedding.
  template <class Taps = NoTaps>
  void hidden_states(Context<Backend>& ctx, std::span<const std::int32_t> tokens, Stream& x,
                     Workspace& ws, Taps&& taps = {}, Cache* cache = nullptr,
                     RouteCounts* counts = nullptr) const {
    run_all_layers(ctx, tokens, x, ws, taps, cache, counts);
    final_norm(ctx, x);
  }

  /// x [T, d] = E[tokens] (+ P[past .. past + T)): the residual stream at layer 0's input.
  /// Fires Tap::embedding. Throws ArgumentError for an empty sequence, a token out of range
  /// or more than n_positions positions.
  template <class Taps = NoTaps>
  void embed(Context<Backend>& ctx, std::span<const std::int32_t> tokens, Stream& x, Workspace& ws,
             Index past = 0, Taps&& taps = {}) const {
    embed(ctx, tokens, x, ws, past, taps, "Transformer::embed");
  }

  /// Advances x [T, d] through layers [from, to) with `ws`. `overrides`: empty (every layer
  /// runs its own attention and MLP) or one LayerOverride per layer (layer_count()). `cache`: the
  /// whole model's KV cache, or null. `counts`: empty, or one RouteCounts per layer, to which layer
  /// ℓ adds the rows it routed. Throws ArgumentError for a bad range or span size.
  template <class Taps = NoTaps>
  void run_layers(Context<Backend>& ctx, Stream& x, Index from, Index to, Workspace& ws,
                  std::span<const Override> overrides = {}, Cache* cache = nullptr,
                  Taps&& taps = {}, std::span<RouteCounts> counts = {}) const {
    const Index layers = layer_count();
    if (from < 0 || from > to || to > layers) {
      throw ArgumentError(detail::expected_found(
          "Transformer::run_layers: layer range", "0 <= from <= to <= " + std::to_string(layers),
          "[" + std::to_string(from) + ", " + std::to_string(to) + ")"));
    }
    if (!overrides.empty())
      check_dim("Transformer::run_layers: overrides (layers)", layers,
                static_cast<Index>(overrides.size()));
    if (!counts.empty())
      check_dim("Transformer::run_layers: counts (layers)", layers,
                static_cast<Index>(counts.size()));
    check_cache("Transformer::run_layers", cache);
    if (x.cols() != config_.d_model)
      check_dim("Transformer::run_layers: width of x (d)", config_.d_model, x.cols());
    run_range(ctx, x, from, to, ws, overrides, cache, taps, [counts](Index l) {
      return counts.empty() ? nullptr : &counts[static_cast<std::size_t>(l)];
    });
  }

  /// The final LayerNorm on x (in place) and logits [T, vocab] = x Uᵀ.
  void head(Context<Backend>& ctx, Stream& x, Logits& logits, Workspace& ws) const {
    final_norm(ctx, x);
    const auto& u = emb_.unembedding.size() > 0 ? emb_.unembedding : emb_.token;
    logits.resize(x.rows(), config_.vocab_size);
    ops::gemm_nt(ctx, x, u, logits, ws.head);  // [T, vocab]
  }

  /// A KV cache for `capacity` positions (0 or more than n_positions: n_positions) of the
  /// key/value width, kv_width (d, or fewer columns with grouped-query attention), in the
  /// backend's memory: n_layers · capacity · kv_width · 2 values, allocated now. Size it for the
  /// positions a run needs: a Llama 3.2 1B at its 131,072 positions would take 8.6 GB.
  Cache make_cache(Index capacity = 0) const {
    const Index positions =
        capacity > 0 ? std::min(capacity, config_.n_positions) : config_.n_positions;
    return Cache(config_.n_layers, positions, config_.kv_width());
  }

  const ModelConfig& config() const { return config_; }
  const EmbeddingWeights<T, D, Weights>& embeddings() const { return emb_; }
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
  // Another backend's embeddings copied into this backend's storage.
  template <class E>
  static EmbeddingWeights<T, D, Weights> copied(const E& e) {
    return {Storage::template from_host<Dynamic, D>(e.token),
            Storage::template from_host<Dynamic, D>(e.position),
            {Storage::template vector_from_host<D>(e.final_norm.gamma),
             e.final_norm.beta.size() == 0
                 ? typename vector_in<typename Backend::memory_space, T, D>::type{}
                 : Storage::template vector_from_host<D>(e.final_norm.beta)},
            Storage::template from_host<Dynamic, D>(e.unembedding)};
  }
  template <class OtherLayers>
  static Layers copied(const BasicTransformer<OtherLayers>& other) {
    if constexpr (detail::is_std_vector<Layers>) {
      Layers out;
      out.reserve(static_cast<std::size_t>(other.layer_count()));
      other.for_each_layer([&](const auto& block, Index) { out.emplace_back(block); });
      return out;
    } else {
      return std::apply([](const auto&... block) { return Layers(block...); }, other.layers());
    }
  }

  void check_parts() const {
    const Index d = config_.d_model;
    if constexpr (D != Dynamic)
      check_dim("Transformer: width (compile-time d)", D, d);
    check_dim("Transformer: token embedding rows (vocab)", config_.vocab_size, emb_.token.rows());
    check_dim("Transformer: token embedding cols (d)", d, emb_.token.cols());
    if (emb_.position.size() > 0)
      check_dim("Transformer: position embedding cols (d)", d, emb_.position.cols());
    if (emb_.unembedding.size() > 0) {
      check_dim("Transformer: unembedding rows (vocab)", config_.vocab_size,
                emb_.unembedding.rows());
      check_dim("Transformer: unembedding cols (d)", d, emb_.unembedding.cols());
    }
    check_dim("Transformer: layer count", config_.n_layers, layer_count());
  }

  /// forward() and hidden_states() up to the final LayerNorm: x [T, d] = every layer's output
  /// for `tokens` after the cached positions.
  template <class Taps>
  void run_all_layers(Context<Backend>& ctx, std::span<const std::int32_t> tokens, Stream& x,
                      Workspace& ws, Taps& taps, Cache* cache, RouteCounts* counts) const {
    const Index past = cache ? cache->length() : 0;
    check_cache("Transformer::forward", cache);
    embed(ctx, tokens, x, ws, past, taps, "Transformer::forward");
    run_range(ctx, x, 0, layer_count(), ws, {}, cache, taps, [counts](Index) { return counts; });
  }

  template <class Taps>
  void embed(Context<Backend>& ctx, std::span<const std::int32_t> tokens, Stream& x, Workspace& ws,
             Index past, Taps& taps, const char* what) const {
    check_tokens(tokens, past, what);
    x.resize(static_cast<Index>(tokens.size()), config_.d_model);
    ops::embed_rows(ctx, emb_.token, emb_.position, tokens, x, past, ws.head);
    detail::fire(taps, Tap::embedding, 0, x);
  }

  // Layers [from, to) in order; counts_of(layer) is the RouteCounts* of that layer (or null).
  template <class Taps, class CountsOf>
  void run_range(Context<Backend>& ctx, Stream& x, Index from, Index to, Workspace& ws,
                 std::span<const Override> overrides, Cache* cache, Taps& taps,
                 CountsOf&& counts_of) const {
    auto run = [&](const auto& block, Index layer) {
      using BlockWs = typename std::decay_t<decltype(block)>::Workspace;
      const auto l = static_cast<std::size_t>(layer);
      block.forward(ctx, x, std::get<BlockWs>(ws.blocks), layer,
                    cache ? &cache->layers[l] : nullptr, taps, counts_of(layer),
                    overrides.empty() ? nullptr : &overrides[l]);
    };
    if constexpr (detail::is_std_vector<Layers>) {
      for (Index l = from; l < to; ++l)
        run(layers_[static_cast<std::size_t>(l)], l);
    } else {
      for_each_layer([&](const auto& block, Index layer) {
        if (layer >= from && layer < to)
          run(block, layer);
      });
    }
  }

  void final_norm(Context<Backend>& ctx, Stream& x) const {
    normalize_rows(ctx, config_.norm, x, emb_.final_norm, x,
                   static_cast<T>(config_.layer_norm_eps));
  }

  void check_tokens(std::span<const std::int32_t> tokens, Index past, const char* what) const {
    if (tokens.empty()) {
      throw ArgumentError(std::string(what) + ": expected at least one token, found none");
    }
    for (std::size_t t = 0; t < tokens.size(); ++t) {
      if (tokens[t] < 0 || tokens[t] >= config_.vocab_size) {
        throw ArgumentError(detail::expected_found(
            std::string(what) + ": token " + std::to_string(t),
            "an id in [0, " + std::to_string(config_.vocab_size) + ")", tokens[t]));
      }
    }
    const Index last = past + static_cast<Index>(tokens.size());
    if (last > config_.n_positions) {
      throw ArgumentError(detail::expected_found(
          std::string(what) + ": positions",
          "at most n_positions = " + std::to_string(config_.n_positions), last));
    }
  }

  void check_cache(const char* what, const Cache* cache) const {
    // The message is built only on a mismatch: forward() runs this once per decoded token.
    if (cache && static_cast<Index>(cache->layers.size()) != layer_count())
      check_dim(std::string(what) + ": cache layers", layer_count(),
                static_cast<Index>(cache->layers.size()));
  }

  ModelConfig config_;
  EmbeddingWeights<T, D, Weights> emb_;
  Layers layers_;
};

/// The Dynamic-size block of a loaded model: a run-time attention slot (dense, S–D or linear)
/// and a run-time MLP slot.
template <class T, class Backend = backend::cpu>
using DynamicBlock = Block<AttentionSlot<T, Backend>, MlpSlot<T, Backend>>;

/// A model read from a file: Dynamic sizes, per-layer AttentionSlot (dense, S–D or linear)
/// and MlpSlot (full, surrogate or gated).
template <class T, class Backend = backend::cpu>
using Transformer = BasicTransformer<std::vector<DynamicBlock<T, Backend>>>;

/// The MLP of a fixed-size block: the two-matrix Mlp with activation Act (GeluTanh, GeluErf),
/// or the SwiGluMlp of the Llama family for Act = SwiGlu.
template <class T, int D, int H, class Act, class Backend>
struct fixed_mlp {
  using type = Mlp<T, D, H, Act, Backend>;
};
template <class T, int D, int H, class Backend>
struct fixed_mlp<T, D, H, SwiGlu, Backend> {
  using type = SwiGluMlp<T, D, H, Backend>;
};

/// A fixed-size block: width D, hidden H and activation Act (GeluTanh, GeluErf or SwiGlu) are
/// compile-time choices.
template <class T, int D, int H, class Act, class Backend = backend::cpu>
using FixedBlock =
    Block<DenseAttention<T, D, Backend>, typename fixed_mlp<T, D, H, Act, Backend>::type>;

/// A fixed model as a type: N identical fixed-size blocks in a tuple.
template <class T, int D, int H, class Act, std::size_t N, class Backend = backend::cpu>
using FixedTransformer = BasicTransformer<decltype(std::tuple_cat(
    std::declval<std::array<FixedBlock<T, D, H, Act, Backend>, N>>()))>;

}  // namespace nlb
