// One transformer block: LayerNorm → attention, LayerNorm → MLP, residual adds, either
// sequential (GPT-2) or parallel (GPT-NeoX).
#pragma once

#include <type_traits>
#include <utility>

#include "nlb/attention/kv_cache.hpp"
#include "nlb/core.hpp"
#include "nlb/kernels/layer_norm.hpp"
#include "nlb/mlp/route_counts.hpp"
#include "nlb/model/taps.hpp"

namespace nlb {

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
/// returning the rows per path (RouteCounts).
template <class T, int D, class AttnT, class MlpT, class Backend = backend::cpu>
class Block {
  static_assert(std::is_same_v<typename AttnT::Scalar, T> && std::is_same_v<typename MlpT::Scalar, T>,
                "Block: attention, MLP and block must share one scalar type");
  static_assert(std::is_same_v<typename AttnT::backend_type, Backend> &&
                    std::is_same_v<typename MlpT::backend_type, Backend>,
                "Block: attention, MLP and block must run on one backend");

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

  /// Advances the residual stream x [T, d] through this block in place.
  template <class Taps = NoTaps>
  void forward(Stream& x, Workspace& ws, Index layer, KVCacheLayer<T>* cache = nullptr,
               Taps&& taps = {}, RouteCounts* counts = nullptr) const {
    const Index rows = x.rows(), d = x.cols();
    detail::fire(taps, Tap::block_input, layer, x);
    ws.attn_out.resize(rows, d);
    if (attn_norm_) {
      ws.normed.resize(rows, d);
      kernels::layer_norm_rows(Backend{}, x, ws.normed, ln1_.gamma, ln1_.beta, eps_);
      attn_.forward(ws.normed, ws.attn_out, ws.attn, cache);
    } else {
      attn_.forward(x, ws.attn_out, ws.attn, cache);
    }
    detail::fire(taps, Tap::attn_output, layer, ws.attn_out);
    ws.mlp_in.resize(rows, d);
    if (parallel_) {
      kernels::layer_norm_rows(Backend{}, x, ws.mlp_in, ln2_.gamma, ln2_.beta, eps_);
    } else {
      x += ws.attn_out;
      kernels::layer_norm_rows(Backend{}, x, ws.mlp_in, ln2_.gamma, ln2_.beta, eps_);
    }
    detail::fire(taps, Tap::mlp_input, layer, ws.mlp_in);
    ws.mlp_out.resize(rows, d);
    run_mlp(ws.mlp_in, ws.mlp_out, ws, counts);
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
  // Every MLP kind has the same forward(X, Y, Workspace&) returning its RouteCounts.
  void run_mlp(const Stream& in, Stream& out, Workspace& ws, RouteCounts* counts) const {
    const RouteCounts c = mlp_.forward(in, out, ws.mlp);
    if (counts)
      *counts += c;
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
