// One transformer block: norm → attention, norm → MLP, residual adds, either sequential (GPT-2,
// the Llama family) or parallel (GPT-NeoX); the norm is LayerNorm or RMSNorm. Written once for
// every backend: its work is the parts' forward calls and the ops layer's norms and adds
// (DESIGN.md §4).
#pragma once

// Calls the ops by qualified name: nlb/cuda.cuh must come first (nlb/cuda/ops.cuh checks).
#define NLB_OPS_CALLERS_INCLUDED

#include <type_traits>
#include <utility>

#include "nlb/attention/kv_cache.hpp"
#include "nlb/core.hpp"
#include "nlb/mlp/gated_mlp.hpp"
#include "nlb/mlp/route_counts.hpp"
#include "nlb/model/layer_override.hpp"
#include "nlb/model/norm.hpp"
#include "nlb/model/taps.hpp"
#include "nlb/ops/rows.hpp"
#include "nlb/ops/scratch.hpp"

namespace nlb {

namespace detail {
struct NoAttentionWorkspace {};
}  // namespace detail

/// A block over a residual stream x [T, d]:
///   sequential: x ← x + attn(ln1 x);  x ← x + mlp(ln2 x)
///   parallel:   x ← x + attn(ln1 x) + mlp(ln2 x)
/// ln1, ln2 are LayerNorms or RMSNorms (`norm`; an RMSNorm's beta is empty).
/// Without a pre-attention norm (attn_layer_norm false: S–D models trained without ln_1,
/// PAPERS §B2) attention reads x itself, attn(x), and ln1 is unused (may be empty).
/// AttnT: any attention kind (forward(ctx, X, Y, Workspace&, cache)); MlpT: any MLP kind — Mlp,
/// RidgeSurrogate, GatedMLP (hard routing) or MlpSlot — all with forward(ctx, X, Y, Workspace&)
/// returning the rows per path (RouteCounts). Scalar, width and backend are the parts': the
/// attention's, which the MLP's must equal (a compile-time width may meet a Dynamic one). The
/// same code runs on every backend: Block<…, backend::cuda> parts keep their weights on the device.
template <class AttnT, class MlpT>
class Block {
  static_assert(same_scalar<AttnT, MlpT>,
                "Block: attention and MLP must share one scalar type (AttnT vs MlpT)");
  static_assert(same_backend<AttnT, MlpT>,
                "Block: attention and MLP must run on one backend (AttnT vs MlpT)");
  static_assert(sizes_compatible<AttnT::size, MlpT::in_size> &&
                    sizes_compatible<AttnT::size, MlpT::out_size>,
                "Block: attention and MLP widths differ at compile time "
                "(AttnT::size vs MlpT::in_size, MlpT::out_size)");
  using T = typename AttnT::Scalar;
  using Backend = typename AttnT::backend_type;
  using Memory = typename Backend::memory_space;
  static constexpr int D = common_size<AttnT::size, MlpT::in_size>;

 public:
  using Scalar = T;
  using backend_type = Backend;
  static constexpr int size = D;
  using Stream = typename storage_traits<Backend, T>::template activations<D>;
  using Attention = AttnT;
  using MlpType = MlpT;
  using Norm = LayerNormWeights<T, D, Memory>;
  template <class B>
  using on_backend = Block<on_backend_t<B, AttnT>, on_backend_t<B, MlpT>>;

  /// Scratch memory, reused across calls (and across layers of one block type): after a call
  /// with T rows (and S cached positions), a call with T rows and at most S positions allocates
  /// nothing.
  struct Workspace {
    Stream normed, attn_out, mlp_in, mlp_out;  // [T, d]
    typename AttnT::Workspace attn;
    typename MlpT::Workspace mlp;
    RoutingWorkspace<T, D, Backend> routing;  // a gated MlpOverride's routing
    ops::Scratch<Backend, T> surrogate;       // an MlpOverride surrogate's product
    // An attention override's workspace (an AttentionSlot block uses `attn`).
    std::conditional_t<std::is_same_v<AttnT, AttentionSlot<T, Backend>>,
                       detail::NoAttentionWorkspace, typename AttentionSlot<T, Backend>::Workspace>
        attn_override;
  };

  Block(Norm ln1, AttnT attn, Norm ln2, MlpT mlp, bool parallel_residual, T layer_norm_eps,
        bool attn_layer_norm = true, NormKind norm = NormKind::layer_norm)
      : ln1_(std::move(ln1)),
        attn_(std::move(attn)),
        ln2_(std::move(ln2)),
        mlp_(std::move(mlp)),
        parallel_(parallel_residual),
        eps_(layer_norm_eps),
        attn_norm_(attn_layer_norm),
        norm_(norm) {
    check_parts();
  }

  /// The same block on another backend (its parts' weights copied into this backend's storage).
  template <class OtherAttn, class OtherMlp>
  requires(!std::is_same_v<Block<OtherAttn, OtherMlp>, Block>) explicit Block(
      const Block<OtherAttn, OtherMlp>& other)
      : ln1_(copied(other.ln1())),
        attn_(other.attention()),
        ln2_(copied(other.ln2())),
        mlp_(other.mlp()),
        parallel_(other.parallel_residual()),
        eps_(other.layer_norm_eps()),
        attn_norm_(other.attn_layer_norm()),
        norm_(other.norm_kind()) {
    check_parts();
  }

  /// Advances the residual stream x [T, d] through this block in place. With a `layer_override`
  /// its attention (when not null) runs instead of this block's, and an active MLP override
  /// instead of this block's MLP (a gated one routes its full rows to this block's own MLP,
  /// which must then be a full MLP).
  template <class Taps = NoTaps>
  void forward(Context<Backend>& ctx, Stream& x, Workspace& ws, Index layer,
               KVCacheLayerOf<T, Backend>* cache = nullptr, Taps&& taps = {},
               RouteCounts* counts = nullptr,
               const LayerOverride<T, Backend>* layer_override = nullptr) const {
    const Index rows = x.rows(), d = x.cols();
    detail::fire(taps, Tap::block_input, layer, x);
    ws.attn_out.resize(rows, d);
    const AttentionSlot<T, Backend>* attention =
        layer_override ? layer_override->attention : nullptr;
    if (attn_norm_) {
      ws.normed.resize(rows, d);
      normalize_rows(ctx, norm_, x, ln1_, ws.normed, eps_);
      run_attention(ctx, attention, ws.normed, ws, cache);
    } else {
      run_attention(ctx, attention, x, ws, cache);
    }
    detail::fire(taps, Tap::attn_output, layer, ws.attn_out);
    ws.mlp_in.resize(rows, d);
    if (!parallel_)
      ops::add(ctx, ws.attn_out, x);
    normalize_rows(ctx, norm_, x, ln2_, ws.mlp_in, eps_);
    detail::fire(taps, Tap::mlp_input, layer, ws.mlp_in);
    ws.mlp_out.resize(rows, d);
    const RouteCounts c = layer_override && layer_override->mlp.active()
                              ? run_override(ctx, layer_override->mlp, ws)
                              : mlp_.forward(ctx, ws.mlp_in, ws.mlp_out, ws.mlp);
    if (counts)
      *counts += c;
    detail::fire(taps, Tap::mlp_output, layer, ws.mlp_out);
    if (parallel_)
      ops::add(ctx, ws.attn_out, ws.mlp_out, x);
    else
      ops::add(ctx, ws.mlp_out, x);
    detail::fire(taps, Tap::block_output, layer, x);
  }

  const AttnT& attention() const { return attn_; }
  const MlpT& mlp() const { return mlp_; }
  MlpT& mlp() { return mlp_; }
  const Norm& ln1() const { return ln1_; }
  const Norm& ln2() const { return ln2_; }
  bool parallel_residual() const { return parallel_; }
  T layer_norm_eps() const { return eps_; }
  /// False when attention reads the raw residual stream (no ln_1).
  bool attn_layer_norm() const { return attn_norm_; }
  /// LayerNorm or RMSNorm.
  NormKind norm_kind() const { return norm_; }

  /// True when this block's MLP is a full MLP (an Mlp, or an MlpSlot holding one): what a gated
  /// override needs, since it routes its full rows to this MLP.
  bool has_full_mlp() const {
    if constexpr (requires { mlp_.is_full(); })
      return mlp_.is_full();  // MlpSlot
    else
      return requires {
        mlp_.hidden_features();
      };  // Mlp
  }

 private:
  // Norm weights of another memory space copied into this one.
  template <class Other>
  static Norm copied(const Other& norm) {
    using Storage = storage_traits<Backend, T>;
    if (norm.gamma.size() == 0)
      return {};  // no ln_1
    if (norm.beta.size() == 0)
      return {Storage::template vector_from_host<D>(norm.gamma), {}};  // RMSNorm
    return {Storage::template vector_from_host<D>(norm.gamma),
            Storage::template vector_from_host<D>(norm.beta)};
  }

  void check_parts() const {
    const Index d = attn_.features();
    const bool bias = norm_ == NormKind::layer_norm;  // an RMSNorm's beta is not read
    if (attn_norm_) {
      check_dim("Block: ln_1 size (d)", d, ln1_.gamma.size());
      if (bias)
        check_dim("Block: ln_1 bias size (d)", d, ln1_.beta.size());
    }
    check_dim("Block: ln_2 size (d)", d, ln2_.gamma.size());
    if (bias)
      check_dim("Block: ln_2 bias size (d)", d, ln2_.beta.size());
    check_dim("Block: MLP width (d)", d, mlp_.features());
  }

  // ws.attn_out = this block's attention of `in`, or the override's.
  void run_attention(Context<Backend>& ctx, const AttentionSlot<T, Backend>* attention,
                     const Stream& in, Workspace& ws, KVCacheLayerOf<T, Backend>* cache) const {
    if (attention == nullptr)
      attn_.forward(ctx, in, ws.attn_out, ws.attn, cache);
    else if constexpr (std::is_same_v<AttnT, AttentionSlot<T, Backend>>)
      attention->forward(ctx, in, ws.attn_out, ws.attn, cache);
    else
      attention->forward(ctx, in, ws.attn_out, ws.attn_override, cache);
  }

  // ws.mlp_out = the override applied to ws.mlp_in; returns the rows per path.
  RouteCounts run_override(Context<Backend>& ctx, const MlpOverride<T, Backend>& o,
                           Workspace& ws) const {
    const auto& surrogate = *o.surrogate;
    const auto linear = [&](const auto& in, auto&& out) {
      surrogate.forward(ctx, in, out, ws.surrogate);
    };
    if (o.gate == nullptr) {
      linear(ws.mlp_in, ws.mlp_out);
      return {ws.mlp_in.rows(), 0};
    }
    // Checked before routing, so the error does not depend on how the rows fall.
    if (!has_full_mlp()) {
      throw ArgumentError(detail::expected_found("Block: the MLP of a gated override's layer",
                                                 "a full MLP", "a surrogate or gated MLP"));
    }
    return gated_route(ctx, ws.mlp_in, ws.mlp_out, *o.gate, ws.routing, linear,
                       [&](const auto& in, auto&& out) { run_full_mlp(ctx, in, out, ws); });
  }

  // This block's own full MLP on a group of rows (a gated override's full path; checked by
  // has_full_mlp first).
  template <class In, class Out>
  void run_full_mlp(Context<Backend>& ctx, const In& in, Out&& out, Workspace& ws) const {
    if constexpr (requires { mlp_.forward_full(ctx, in, out, ws.mlp); })
      mlp_.forward_full(ctx, in, out, ws.mlp);  // MlpSlot
    else if constexpr (requires { mlp_.hidden_features(); })
      mlp_.forward(ctx, in, out, ws.mlp);  // Mlp
  }

  Norm ln1_;
  AttnT attn_;
  Norm ln2_;
  MlpT mlp_;
  bool parallel_ = false;
  T eps_ = T(1e-5);
  bool attn_norm_ = true;
  NormKind norm_ = NormKind::layer_norm;
};

}  // namespace nlb
