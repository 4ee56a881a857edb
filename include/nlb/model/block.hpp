// One transformer block: LayerNorm → attention, LayerNorm → MLP, residual adds, either
// sequential (GPT-2) or parallel (GPT-NeoX).
#pragma once

#include <type_traits>
#include <utility>

#include "nlb/attention/kv_cache.hpp"
#include "nlb/core.hpp"
#include "nlb/mlp/gated_mlp.hpp"
#include "nlb/mlp/route_counts.hpp"
#include "nlb/model/layer_override.hpp"
#include "nlb/model/taps.hpp"
#include "nlb/ops/layer_norm.hpp"

namespace nlb {

namespace detail {
struct NoAttentionWorkspace {};
}  // namespace detail

/// LayerNorm parameters: gamma, beta [d].
template <class T, int D = Dynamic>
struct LayerNormWeights {
  RowVector<T, D> gamma;
  RowVector<T, D> beta;
};

/// A block over a residual stream x [T, d]:
///   sequential: x ← x + attn(ln1 x);  x ← x + mlp(ln2 x)
///   parallel:   x ← x + attn(ln1 x) + mlp(ln2 x)
/// Without a pre-attention norm (attn_layer_norm false: S–D models trained without ln_1,
/// PAPERS §B2) attention reads x itself, attn(x), and ln1 is unused (may be empty).
/// AttnT: any attention kind (forward(X, Y, Workspace&, cache)); MlpT: any MLP kind — Mlp,
/// RidgeSurrogate, GatedMLP (hard routing) or MlpSlot — all with forward(X, Y, Workspace&)
/// returning the rows per path (RouteCounts). Scalar, width and backend are the parts': the
/// attention's, which the MLP's must equal (a compile-time width may meet a Dynamic one).
template <class AttnT, class MlpT>
class Block {
  static_assert(std::is_same_v<typename AttnT::Scalar, typename MlpT::Scalar>,
                "Block: attention and MLP must share one scalar type "
                "(AttnT::Scalar vs MlpT::Scalar)");
  static_assert(std::is_same_v<typename AttnT::backend_type, typename MlpT::backend_type>,
                "Block: attention and MLP must run on one backend "
                "(AttnT::backend_type vs MlpT::backend_type)");
  static_assert(sizes_compatible<AttnT::size, MlpT::in_size> &&
                    sizes_compatible<AttnT::size, MlpT::out_size>,
                "Block: attention and MLP widths differ at compile time "
                "(AttnT::size vs MlpT::in_size, MlpT::out_size)");
  using T = typename AttnT::Scalar;
  using Backend = typename AttnT::backend_type;
  static constexpr int D = common_size<AttnT::size, MlpT::in_size>;

 public:
  using Scalar = T;
  using backend_type = Backend;
  static constexpr int size = D;
  using Stream = Activations<T, D>;
  using Attention = AttnT;
  using MlpType = MlpT;

  /// Scratch memory, reused across calls (and across layers of one block type): after a call
  /// with T rows (and S cached positions), a call with T rows and at most S positions allocates
  /// nothing.
  struct Workspace {
    Stream normed, attn_out, mlp_in, mlp_out;  // [T, d]
    typename AttnT::Workspace attn;
    typename MlpT::Workspace mlp;
    RoutingWorkspace<T, D> routing;  // a gated MlpOverride's routing
    GemmScratch<T> surrogate;        // an MlpOverride surrogate's product
    // An attention override's workspace (an AttentionSlot block uses `attn`).
    std::conditional_t<std::is_same_v<AttnT, AttentionSlot<T, Backend>>,
                       detail::NoAttentionWorkspace, typename AttentionSlot<T, Backend>::Workspace>
        attn_override;
  };

  Block(LayerNormWeights<T, D> ln1, AttnT attn, LayerNormWeights<T, D> ln2, MlpT mlp,
        bool parallel_residual, T layer_norm_eps, bool attn_layer_norm = true)
      : ln1_(std::move(ln1)),
        attn_(std::move(attn)),
        ln2_(std::move(ln2)),
        mlp_(std::move(mlp)),
        parallel_(parallel_residual),
        eps_(layer_norm_eps),
        attn_norm_(attn_layer_norm) {
    const Index d = attn_.features();
    if (attn_norm_) {
      check_dim("Block: ln_1 size (d)", d, ln1_.gamma.size());
      check_dim("Block: ln_1 bias size (d)", d, ln1_.beta.size());
    }
    check_dim("Block: ln_2 size (d)", d, ln2_.gamma.size());
    check_dim("Block: ln_2 bias size (d)", d, ln2_.beta.size());
    check_dim("Block: MLP width (d)", d, mlp_.features());
  }

  /// Advances the residual stream x [T, d] through this block in place. With a `layer_override`
  /// its attention (when not null) runs instead of this block's, and an active MLP override
  /// instead of this block's MLP (a gated one routes its full rows to this block's own MLP,
  /// which must then be a full MLP).
  template <class Taps = NoTaps>
  void forward(Stream& x, Workspace& ws, Index layer, KVCacheLayer<T>* cache = nullptr,
               Taps&& taps = {}, RouteCounts* counts = nullptr,
               const LayerOverride<T, Backend>* layer_override = nullptr) const {
    const Index rows = x.rows(), d = x.cols();
    detail::fire(taps, Tap::block_input, layer, x);
    ws.attn_out.resize(rows, d);
    const AttentionSlot<T, Backend>* attention =
        layer_override ? layer_override->attention : nullptr;
    if (attn_norm_) {
      ws.normed.resize(rows, d);
      ops::layer_norm_rows(Backend{}, x, ws.normed, ln1_.gamma, ln1_.beta, eps_);
      run_attention(attention, ws.normed, ws, cache);
    } else {
      run_attention(attention, x, ws, cache);
    }
    detail::fire(taps, Tap::attn_output, layer, ws.attn_out);
    ws.mlp_in.resize(rows, d);
    if (parallel_) {
      ops::layer_norm_rows(Backend{}, x, ws.mlp_in, ln2_.gamma, ln2_.beta, eps_);
    } else {
      x += ws.attn_out;
      ops::layer_norm_rows(Backend{}, x, ws.mlp_in, ln2_.gamma, ln2_.beta, eps_);
    }
    detail::fire(taps, Tap::mlp_input, layer, ws.mlp_in);
    ws.mlp_out.resize(rows, d);
    if (layer_override && layer_override->mlp.active()) {
      run_override(layer_override->mlp, ws, counts);
    } else {
      run_mlp(ws.mlp_in, ws.mlp_out, ws, counts);
    }
    detail::fire(taps, Tap::mlp_output, layer, ws.mlp_out);
    if (parallel_) {
      x += ws.attn_out + ws.mlp_out;
    } else {
      x += ws.mlp_out;
    }
    detail::fire(taps, Tap::block_output, layer, x);
  }

  const AttnT& attention() const { return attn_; }
  const MlpT& mlp() const { return mlp_; }
  MlpT& mlp() { return mlp_; }
  const LayerNormWeights<T, D>& ln1() const { return ln1_; }
  const LayerNormWeights<T, D>& ln2() const { return ln2_; }
  bool parallel_residual() const { return parallel_; }
  T layer_norm_eps() const { return eps_; }
  /// False when attention reads the raw residual stream (no ln_1).
  bool attn_layer_norm() const { return attn_norm_; }

 private:
  // ws.attn_out = this block's attention of `in`, or the override's.
  void run_attention(const AttentionSlot<T, Backend>* attention, const Stream& in, Workspace& ws,
                     KVCacheLayer<T>* cache) const {
    if (attention == nullptr) {
      attn_.forward(in, ws.attn_out, ws.attn, cache);
    } else if constexpr (std::is_same_v<AttnT, AttentionSlot<T, Backend>>) {
      attention->forward(in, ws.attn_out, ws.attn, cache);
    } else {
      attention->forward(in, ws.attn_out, ws.attn_override, cache);
    }
  }

  // Every MLP kind has the same forward(X, Y, Workspace&) returning its RouteCounts.
  void run_mlp(const Stream& in, Stream& out, Workspace& ws, RouteCounts* counts) const {
    const RouteCounts c = mlp_.forward(in, out, ws.mlp);
    if (counts)
      *counts += c;
  }

  // ws.mlp_out = the override applied to ws.mlp_in.
  void run_override(const MlpOverride<T, Backend>& o, Workspace& ws, RouteCounts* counts) const {
    const auto& surrogate = *o.surrogate;
    auto linear = [&](const auto& in, auto& out) { surrogate.forward(in, out, ws.surrogate); };
    RouteCounts c;
    if (o.gate == nullptr) {
      linear(ws.mlp_in, ws.mlp_out);
      c.linear = ws.mlp_in.rows();
    } else {
      // Checked before routing, so the error does not depend on how the rows fall.
      if (!has_own_full_mlp()) {
        throw ArgumentError(detail::expected_found("Block: the MLP of a gated override's layer",
                                                   "a full MLP", "a surrogate or gated MLP"));
      }
      c = gated_route(ws.mlp_in, ws.mlp_out, *o.gate, ws.routing, linear,
                      [&](const auto& in, auto& out) { run_own_full_mlp(in, out, ws); });
    }
    if (counts)
      *counts += c;
  }

  // True when this block's MLP is a full MLP (an Mlp, or an MlpSlot holding one).
  bool has_own_full_mlp() const {
    if constexpr (requires { mlp_.is_full(); }) {
      return mlp_.is_full();  // MlpSlot
    } else {
      return requires {
        mlp_.hidden_features();
      };  // Mlp
    }
  }

  // This block's own full MLP on a group of rows (a gated override's full path; checked by
  // has_own_full_mlp first).
  template <class In, class Out>
  void run_own_full_mlp(const In& in, Out& out, Workspace& ws) const {
    if constexpr (requires { mlp_.forward_full(in, out, ws.mlp); }) {
      mlp_.forward_full(in, out, ws.mlp);  // MlpSlot
    } else if constexpr (requires { mlp_.hidden_features(); }) {
      mlp_.forward(in, out, ws.mlp);  // Mlp
    }
  }

  LayerNormWeights<T, D> ln1_;
  AttnT attn_;
  LayerNormWeights<T, D> ln2_;
  MlpT mlp_;
  bool parallel_ = false;
  T eps_ = T(1e-5);
  bool attn_norm_ = true;
};

}  // namespace nlb
