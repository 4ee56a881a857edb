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
    if (cache && static_cast<Index>(cache->layers.size()) != layer_count())
      check_dim("Transformer<cuda>::forward: cache layers", layer_count(),
                static_cast<Index>(cache->layers.size()));
    check_tokens(tokens, past);
    const Index rows = static_cast<Index>(tokens.size()), d = config_.d_model;
    if (ws.ids.size() < tokens.size())
      ws.ids.resize(tokens.size());
    thrust::copy(tokens.begin(), tokens.end(), ws.ids.begin());
    ws.x.resize(rows, d);
    const cuda::DeviceView<T> x = ws.x.view();
    ops::embed_rows<T>(ctx, token_.view(), position_.view(),
                       thrust::raw_pointer_cast(ws.ids.data()), past, x);
    for (std::size_t l = 0; l < blocks_.size(); ++l)
      run_block(ctx, blocks_[l], x, ws, cache ? &cache->layers[l] : nullptr, counts);
    ops::layer_norm_rows<T>(ctx, x, x, final_gamma_.view(), final_beta_.view(),
                            static_cast<T>(config_.layer_norm_eps));
    const auto& u = unembedding_.rows() > 0 ? unembedding_ : token_;
    ws.logits.resize(rows, config_.vocab_size);
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

  // x ← x + attn(ln1 x); x ← x + mlp(ln2 x), or x ← x + attn(ln1 x) + mlp(ln2 x) (Block).
  void run_block(Context<backend::cuda>& ctx, const DeviceBlock& b, cuda::DeviceView<T> x,
                 Workspace& ws, cuda::KVCacheLayer<T>* cache, RouteCounts* counts) const {
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
    const RouteCounts c = std::visit(
        [&](const auto& mlp) -> RouteCounts {
          using Kind = std::decay_t<decltype(mlp)>;
          if constexpr (std::is_same_v<Kind, typename Kinds::Surrogate>)
            return mlp.forward(ctx, mlp_in, mlp_out);
          else
            return mlp.forward(ctx, mlp_in, mlp_out, workspace_of<Kind>(ws.mlp));
        },
        b.mlp);
    if (counts)
      *counts += c;
    if (b.parallel_residual)
      ops::add<T>(ctx, x, attn_out, mlp_out);
    else
      ops::add<T>(ctx, x, mlp_out);
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
