// A loaded model on backend::cuda: Transformer<T, backend::cuda>, the specialisation of
// BasicTransformer for blocks of device parts (nlb/model/transformer.hpp), built from a host
// model by to_backend. Embeddings, every block (LayerNorm, dense or S–D attention, residual,
// LayerNorm, MLP, residual — sequential as GPT-2 and nlb-sd or parallel as GPT-NeoX), the final
// LayerNorm and the unembedding run on the device; the caller gets the logits back (or a device
// view of them).
#pragma once

#include <thrust/copy.h>
#include <thrust/device_vector.h>

#include <cstdint>
#include <span>
#include <string>
#include <tuple>
#include <type_traits>
#include <utility>
#include <variant>
#include <vector>

#include "nlb/core/backend.hpp"
#include "nlb/core/checks.hpp"
#include "nlb/core/errors.hpp"
#include "nlb/core/matrix.hpp"
#include "nlb/cuda/context.cuh"
#include "nlb/cuda/dense_attention.cuh"
#include "nlb/cuda/device_matrix.cuh"
#include "nlb/cuda/factored_attention.cuh"
#include "nlb/cuda/gated_mlp.cuh"
#include "nlb/cuda/kv_cache.cuh"
#include "nlb/cuda/linear_attention.cuh"
#include "nlb/cuda/mlp.cuh"
#include "nlb/cuda/ops.cuh"
#include "nlb/cuda/ridge_surrogate.cuh"
#include "nlb/cuda/row_ops.cuh"
#include "nlb/cuda/sd_attention.cuh"
#include "nlb/mlp/route_counts.hpp"
#include "nlb/model/config.hpp"
#include "nlb/model/mlp_override.hpp"
#include "nlb/model/transformer.hpp"

namespace nlb {

namespace cuda::detail {

/// The device counterparts of MlpSlot's kinds (nlb/model/mlp_slot.hpp).
template <class T>
struct DeviceMlpKinds {
  using Host = MlpSlot<T, backend::cpu>;
  using MlpTanh = Mlp<T, Dynamic, Dynamic, GeluTanh, backend::cuda>;
  using MlpErf = Mlp<T, Dynamic, Dynamic, GeluErf, backend::cuda>;
  using Surrogate = RidgeSurrogate<T, Dynamic, Dynamic, backend::cuda>;
  using Gate = HyperplaneGate<T, Dynamic, backend::cuda>;
  using GatedTanh = GatedMLP<MlpTanh, Surrogate, Gate>;
  using GatedErf = GatedMLP<MlpErf, Surrogate, Gate>;
  using Variant = std::variant<MlpTanh, MlpErf, Surrogate, GatedTanh, GatedErf>;
  struct Workspace {
    typename MlpTanh::Workspace tanh;
    typename MlpErf::Workspace erf;
    typename GatedTanh::Workspace gated_tanh;
    typename GatedErf::Workspace gated_erf;
  };
};

/// The device counterparts of AttentionSlot's kinds (nlb/model/attention_slot.hpp).
template <class T>
struct DeviceAttentionKinds {
  using Dense = DenseAttention<T, Dynamic, backend::cuda>;
  using SD = SDAttention<T>;  // either filter
  using Linear = LinearAttention<T, Dynamic, backend::cuda>;
  using Factored = FactoredAttention<T, Dynamic, backend::cuda>;
  using Variant = std::variant<Dense, SD, Linear, Factored>;
  /// One workspace per kind, found by type as AttentionSlot's are.
  using Workspace = std::tuple<typename Dense::Workspace, typename SD::Workspace,
                               typename Linear::Workspace, typename Factored::Workspace>;
};

/// One block of a device model: its LayerNorms, attention kind and MLP kind.
template <class T>
struct DeviceBlock {
  DeviceMatrix<T> ln1_gamma, ln1_beta, ln2_gamma, ln2_beta;  // [1, d] each (ln1 empty without it)
  typename DeviceAttentionKinds<T>::Variant attention;
  typename DeviceMlpKinds<T>::Variant mlp;
  bool parallel_residual = false;
  bool attn_layer_norm = true;
  T eps = T(1e-5);
};

}  // namespace cuda::detail

/// Transformer<T, backend::cuda>: a Dynamic-size model whose weights live in device memory.
/// Built from a host Transformer<T> by to_backend(backend::cuda{}, host), which uploads every
/// weight once (the host model is not changed and may be dropped). Every layer kind of the host
/// model has a device form: each attention kind of AttentionSlot — dense (GPT-2; GPT-NeoX with
/// partial rotary and parallel residual), S–D with either filter (nlb-sd, with or without ln_1),
/// ELU+1 linear, factored (converted heads) — and each MLP kind of MlpSlot (full MLP with either
/// GELU, ridge surrogate, gated MLP). As on the host, a model with a linear-attention layer
/// cannot decode with a KV cache (ArgumentError).
///
/// forward(): x = E[tokens] (+ P[positions]); every block; ln_f; logits = x Uᵀ — the host
/// model's formulas (BasicTransformer), with its checks on tokens and positions. Cost ≈ the host
/// model's FLOPs plus the masked half of each head's scores.
template <class T>
class BasicTransformer<
    std::vector<Block<AttentionSlot<T, backend::cuda>, MlpSlot<T, backend::cuda>>>> {
  using Kinds = cuda::detail::DeviceMlpKinds<T>;
  using AttentionKinds = cuda::detail::DeviceAttentionKinds<T>;
  using DeviceBlock = cuda::detail::DeviceBlock<T>;

 public:
  using backend_type = backend::cuda;
  using Scalar = T;
  static constexpr int size = Dynamic;

  /// Device scratch of forward passes, reused across calls: the residual stream and the block
  /// buffers [T, d], the attention's and MLPs' scratch, the token ids and the logits. Grows to
  /// the largest call and keeps its memory.
  struct Workspace {
    cuda::DeviceMatrix<T> x, normed, attn_out, mlp_in, mlp_out;  // [T, d]
    typename AttentionKinds::Workspace attention;
    typename Kinds::Workspace mlp;
    thrust::device_vector<std::int32_t> ids;  // [T]
    cuda::DeviceMatrix<T> logits;             // [T, vocab]
  };

  /// Uploads a host model (see the class comment for the layers it accepts).
  template <class HostLayers>
  explicit BasicTransformer(const BasicTransformer<HostLayers>& host)
      : config_(host.config()),
        token_(cuda::upload(host.embeddings().token)),
        final_gamma_(cuda::upload(host.embeddings().final_norm.gamma)),
        final_beta_(cuda::upload(host.embeddings().final_norm.beta)) {
    static_assert(backend::is_host<typename BasicTransformer<HostLayers>::backend_type>,
                  "Transformer<cuda>: built from a host model");
    const auto& emb = host.embeddings();
    if (emb.position.size() > 0)
      position_ = cuda::upload(emb.position);
    if (emb.unembedding.size() > 0)
      unembedding_ = cuda::upload(emb.unembedding);
    host.for_each_layer([&](const auto& block, Index) { blocks_.push_back(upload_block(block)); });
  }

  /// Logits [T, vocab] of `tokens` (ids in [0, vocab)) copied back into `logits` (resized; no
  /// host allocation when its shape is unchanged). Without a cache the tokens are positions
  /// [0, T); with one they follow its cached positions, whose keys and values are reused and
  /// extended. `counts` accumulates the rows each gated layer
  /// routed. Throws ArgumentError for an empty sequence, a token out of range or more positions
  /// than n_positions, DeviceError when the device fails.
  void forward(Context<backend::cuda>& ctx, std::span<const std::int32_t> tokens,
               RowMatrix<T>& logits, Workspace& ws, cuda::KVCache<T>* cache = nullptr,
               RouteCounts* counts = nullptr) const {
    cuda::download_into(forward_on_device(ctx, tokens, ws, cache, counts), logits);
  }

  /// forward() leaving the logits [T, vocab] in device memory: a view into ws, valid until the
  /// next call with ws.
  cuda::DeviceView<const T> forward_on_device(Context<backend::cuda>& ctx,
                                              std::span<const std::int32_t> tokens, Workspace& ws,
                                              cuda::KVCache<T>* cache = nullptr,
                                              RouteCounts* counts = nullptr) const {
    const Index past = cache ? cache->length() : 0;
    ws.x.resize(static_cast<Index>(tokens.size()), config_.d_model);
    embed(ctx, tokens, ws.x.view(), ws, past);
    if (!counts) {
      run_layers(ctx, ws.x.view(), 0, layer_count(), ws, {}, cache);
    } else {
      std::vector<RouteCounts> per_layer(static_cast<std::size_t>(layer_count()));
      run_layers(ctx, ws.x.view(), 0, layer_count(), ws, {}, cache, per_layer);
      for (const auto& c : per_layer)
        *counts += c;
    }
    return head(ctx, ws.x.view(), ws);
  }

  /// The parts of forward(), for analyses that run a model in pieces (keeping the residual
  /// stream between layers, replacing some layers' MLPs): x [T, d] = E[tokens] (+ P[past + t])
  /// into the caller's device view (T = tokens.size(); ws holds the uploaded ids). Throws
  /// ArgumentError as forward() does.
  void embed(Context<backend::cuda>& ctx, std::span<const std::int32_t> tokens,
             cuda::DeviceView<T> x, Workspace& ws, Index past = 0) const {
    check_tokens(tokens, past);
    check_dim("Transformer<cuda>::embed: rows of x (tokens)", static_cast<Index>(tokens.size()),
              x.rows);
    check_dim("Transformer<cuda>::embed: width of x (d)", config_.d_model, x.cols);
    if (ws.ids.size() < tokens.size())
      ws.ids.resize(tokens.size());
    thrust::copy(tokens.begin(), tokens.end(), ws.ids.begin());
    ops::embed_rows<T>(ctx, token_.view(), position_.view(),
                       thrust::raw_pointer_cast(ws.ids.data()), past, x);
  }

  /// Layers [first, last) on x [T, d] in place. `overrides` (empty, or one per layer, indexed by
  /// layer) replaces layers' MLPs without touching the model: a device surrogate on every row,
  /// or hard routing between a device surrogate and the layer's own MLP (cuda::route_rows; the
  /// layer must hold a full MLP: ArgumentError otherwise). `counts` (empty, or one per layer)
  /// accumulates the rows each layer routed. With a cache, the rows follow its positions (as
  /// forward()). Throws ArgumentError for a bad range or override list.
  void run_layers(Context<backend::cuda>& ctx, cuda::DeviceView<T> x, Index first, Index last,
                  Workspace& ws, std::span<const MlpOverride<T, backend::cuda>> overrides = {},
                  cuda::KVCache<T>* cache = nullptr, std::span<RouteCounts> counts = {}) const {
    const Index layers = layer_count();
    if (first < 0 || last < first || last > layers) {
      throw ArgumentError(
          detail::expected_found("Transformer<cuda>::run_layers: layer range",
                                 "0 <= first <= last <= " + std::to_string(layers),
                                 "[" + std::to_string(first) + ", " + std::to_string(last) + ")"));
    }
    if (!overrides.empty())
      check_dim("Transformer<cuda>::run_layers: overrides (one per layer)", layers,
                static_cast<Index>(overrides.size()));
    if (!counts.empty())
      check_dim("Transformer<cuda>::run_layers: counts (one per layer)", layers,
                static_cast<Index>(counts.size()));
    if (cache && static_cast<Index>(cache->layers.size()) != layers)
      check_dim("Transformer<cuda>::run_layers: cache layers", layers,
                static_cast<Index>(cache->layers.size()));
    check_dim("Transformer<cuda>::run_layers: width of x (d)", config_.d_model, x.cols);
    for (Index l = first; l < last; ++l) {
      const auto ls = static_cast<std::size_t>(l);
      const RouteCounts c = run_block(ctx, blocks_[ls], x, ws, cache ? &cache->layers[ls] : nullptr,
                                      overrides.empty() ? nullptr : &overrides[ls]);
      if (!counts.empty())
        counts[ls] += c;
    }
  }

  /// ln_f and the unembedding of x [T, d] (x is normalised in place): the logits [T, vocab], a
  /// view into ws valid until the next call with ws.
  cuda::DeviceView<const T> head(Context<backend::cuda>& ctx, cuda::DeviceView<T> x,
                                 Workspace& ws) const {
    check_dim("Transformer<cuda>::head: width of x (d)", config_.d_model, x.cols);
    ops::layer_norm_rows<T>(ctx, x, x, final_gamma_.view(), final_beta_.view(),
                            static_cast<T>(config_.layer_norm_eps));
    const auto& u = unembedding_.rows() > 0 ? unembedding_ : token_;
    ws.logits.resize(x.rows, config_.vocab_size);
    ops::gemm<T>(ctx, x, u.view(), ws.logits.view(), T(1), T(0), false, true);  // [T, vocab]
    return ws.logits.view();
  }

  /// A device KV cache sized for this model (n_positions positions in every layer).
  cuda::KVCache<T> make_cache() const {
    return cuda::KVCache<T>(config_.n_layers, config_.n_positions, config_.d_model);
  }

  const ModelConfig& config() const { return config_; }
  Index layer_count() const { return static_cast<Index>(blocks_.size()); }

 private:
  template <class HostBlock>
  static DeviceBlock upload_block(const HostBlock& block) {
    DeviceBlock out{
        .ln1_gamma = {},
        .ln1_beta = {},
        .ln2_gamma = cuda::upload(block.ln2().gamma),
        .ln2_beta = cuda::upload(block.ln2().beta),
        .attention = std::visit(
            [](const auto& attention) ->
            typename AttentionKinds::Variant { return to_backend(backend::cuda{}, attention); },
            block.attention().kind()),
        .mlp = std::visit([](const auto& mlp) ->
                          typename Kinds::Variant { return to_backend(backend::cuda{}, mlp); },
                          block.mlp().kind()),
        .parallel_residual = block.parallel_residual(),
        .attn_layer_norm = block.attn_layer_norm(),
        .eps = block.layer_norm_eps()};
    if (out.attn_layer_norm) {
      out.ln1_gamma = cuda::upload(block.ln1().gamma);
      out.ln1_beta = cuda::upload(block.ln1().beta);
    }
    return out;
  }

  // x ← x + attn(ln1 x); x ← x + mlp(ln2 x), or x ← x + attn(ln1 x) + mlp(ln2 x) (Block); the
  // MLP replaced by `over` when it is active. Returns the rows the MLP routed.
  RouteCounts run_block(Context<backend::cuda>& ctx, const DeviceBlock& b, cuda::DeviceView<T> x,
                        Workspace& ws, cuda::KVCacheLayer<T>* cache,
                        const MlpOverride<T, backend::cuda>* over) const {
    const Index rows = x.rows, d = x.cols;
    for (auto* m : {&ws.normed, &ws.attn_out, &ws.mlp_in, &ws.mlp_out})
      m->resize(rows, d);
    const auto normed = ws.normed.view(), attn_out = ws.attn_out.view(), mlp_in = ws.mlp_in.view(),
               mlp_out = ws.mlp_out.view();
    if (b.attn_layer_norm)
      ops::layer_norm_rows<T>(ctx, x, normed, b.ln1_gamma.view(), b.ln1_beta.view(), b.eps);
    const cuda::DeviceView<const T> attn_in = b.attn_layer_norm ? normed : x;
    std::visit(
        [&](const auto& attention) {
          using Kind = std::decay_t<decltype(attention)>;
          attention.forward(ctx, attn_in, attn_out,
                            std::get<typename Kind::Workspace>(ws.attention), cache);
        },
        b.attention);
    if (!b.parallel_residual)
      ops::add<T>(ctx, x, attn_out);
    ops::layer_norm_rows<T>(ctx, x, mlp_in, b.ln2_gamma.view(), b.ln2_beta.view(), b.eps);
    const RouteCounts c = over && over->active() ? run_override(ctx, b, *over, mlp_in, mlp_out, ws)
                                                 : run_own_mlp(ctx, b, mlp_in, mlp_out, ws);
    if (b.parallel_residual)
      ops::add<T>(ctx, x, attn_out, mlp_out);
    else
      ops::add<T>(ctx, x, mlp_out);
    return c;
  }

  // Block b's own MLP kind.
  RouteCounts run_own_mlp(Context<backend::cuda>& ctx, const DeviceBlock& b,
                          cuda::DeviceView<const T> in, cuda::DeviceView<T> out,
                          Workspace& ws) const {
    return std::visit(
        [&](const auto& mlp) -> RouteCounts {
          using Kind = std::decay_t<decltype(mlp)>;
          if constexpr (std::is_same_v<Kind, typename Kinds::Surrogate>)
            return mlp.forward(ctx, in, out);
          else
            return mlp.forward(ctx, in, out, workspace_of<Kind>(ws.mlp));
        },
        b.mlp);
  }

  // An active override of block b's MLP: its surrogate on every row, or routing between it and
  // the block's own full MLP by its gate.
  RouteCounts run_override(Context<backend::cuda>& ctx, const DeviceBlock& b,
                           const MlpOverride<T, backend::cuda>& over, cuda::DeviceView<const T> in,
                           cuda::DeviceView<T> out, Workspace& ws) const {
    check_dim("Transformer<cuda>: override surrogate width (d)", in.cols,
              over.surrogate->features());
    if (!over.gate)
      return over.surrogate->forward(ctx, in, out);
    check_dim("Transformer<cuda>: override gate width (d)", in.cols, over.gate->features());
    if (const auto* m = std::get_if<typename Kinds::MlpTanh>(&b.mlp))
      return cuda::route_rows(ctx, *m, *over.surrogate, *over.gate, in, out, ws.mlp.gated_tanh);
    if (const auto* m = std::get_if<typename Kinds::MlpErf>(&b.mlp))
      return cuda::route_rows(ctx, *m, *over.surrogate, *over.gate, in, out, ws.mlp.gated_erf);
    throw ArgumentError(detail::expected_found("Transformer<cuda>: a gated override's layer MLP",
                                               "a full MLP", "a surrogate or gated MLP"));
  }

  template <class Kind>
  static auto& workspace_of(typename Kinds::Workspace& ws) {
    if constexpr (std::is_same_v<Kind, typename Kinds::MlpTanh>)
      return ws.tanh;
    else if constexpr (std::is_same_v<Kind, typename Kinds::MlpErf>)
      return ws.erf;
    else if constexpr (std::is_same_v<Kind, typename Kinds::GatedTanh>)
      return ws.gated_tanh;
    else
      return ws.gated_erf;
  }

  void check_tokens(std::span<const std::int32_t> tokens, Index past) const {
    const char* what = "Transformer<cuda>::forward";
    if (tokens.empty())
      throw ArgumentError(std::string(what) + ": expected at least one token, found none");
    for (std::size_t t = 0; t < tokens.size(); ++t) {
      if (tokens[t] < 0 || tokens[t] >= config_.vocab_size)
        throw ArgumentError(detail::expected_found(
            std::string(what) + ": token " + std::to_string(t),
            "an id in [0, " + std::to_string(config_.vocab_size) + ")", tokens[t]));
    }
    const Index last = past + static_cast<Index>(tokens.size());
    if (last > config_.n_positions)
      throw ArgumentError(detail::expected_found(
          std::string(what) + ": positions",
          "at most n_positions = " + std::to_string(config_.n_positions), last));
  }

  ModelConfig config_;
  cuda::DeviceMatrix<T> token_;        // [vocab, d]
  cuda::DeviceMatrix<T> position_;     // [n_positions, d]; empty without learned positions
  cuda::DeviceMatrix<T> unembedding_;  // [vocab, d]; empty when tied to token_
  cuda::DeviceMatrix<T> final_gamma_, final_beta_;  // [1, d]
  std::vector<DeviceBlock> blocks_;
};

/// The device copy of a loaded host model: Transformer<T, backend::cuda> (uploads every weight
/// once).
template <class T>
Transformer<T, backend::cuda> to_backend(backend::cuda, const Transformer<T, backend::cpu>& host) {
  return Transformer<T, backend::cuda>(host);
}

}  // namespace nlb
