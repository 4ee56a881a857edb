// FLOP accounting for the MLP budget (PAPERS.md §A5). A multiply-add counts as 2 FLOPs.
#pragma once

#include <span>
#include <vector>

namespace nlb::flops {

/// Dense MLP per token: `matrices` GEMMs of d×h, 2·d·h each. Two for GPT-2 and Pythia (W_fc,
/// W_proj: 4·d·h = 16·d² for h = 4d, PAPERS §A5), three for the Llama family's SwiGLU (W_gate,
/// W_up, W_down: 6·d·h; PAPERS §A5 generalised). Biases, the activation and SwiGLU's product
/// are O(h) and not counted, as in the paper.
constexpr double dense_mlp_per_token(double d, double h, double matrices = 2) {
  return 2.0 * matrices * d * h;
}

/// Linear surrogate per token, x W + b with W [d_in, d_out]: 2·d_in·d_out (= 2·d²).
constexpr double surrogate_per_token(double d_in, double d_out) {
  return 2.0 * d_in * d_out;
}

/// Hyperplane gate per token: one dot product of length d: 2·d.
constexpr double gate_per_token(double d) {
  return 2.0 * d;
}

/// A gated MLP per token with a share `linear_fraction` of tokens routed linear:
/// gate + (1 − f)·dense + f·surrogate (dense of `matrices` matrices).
constexpr double gated_mlp_per_token(double d, double h, double linear_fraction,
                                     double matrices = 2) {
  return gate_per_token(d) + (1.0 - linear_fraction) * dense_mlp_per_token(d, h, matrices) +
         linear_fraction * surrogate_per_token(d, d);
}

/// FLOPs saved per token against the dense MLP: f·(dense − surrogate) − gate
/// (= f·14·d² − 2d for a two-matrix MLP with h = 4d, ≈ 7f/8 of the MLP).
constexpr double mlp_saving_per_token(double d, double h, double linear_fraction,
                                      double matrices = 2) {
  return dense_mlp_per_token(d, h, matrices) - gated_mlp_per_token(d, h, linear_fraction, matrices);
}

/// The FLOP-predicted speedup of a gated over a dense MLP with h = 4d, ignoring the gate's
/// 2d: 16 / (16(1 − f) + 2f).
constexpr double predicted_mlp_speedup(double linear_fraction) {
  return 16.0 / (16.0 * (1.0 - linear_fraction) + 2.0 * linear_fraction);
}

/// The shape of a decoder-only transformer, for whole-forward accounting.
struct TransformerShape {
  double d_model = 0;   // residual width d
  double d_hidden = 0;  // MLP hidden width h (4d for GPT-2 and Pythia)
  double n_layers = 0;
  double context = 0;       // tokens each query attends to, on average
  double vocab = 0;         // unembedding width
  double mlp_matrices = 2;  // 3 for a SwiGLU MLP
  double kv_width = 0;      // key/value width (grouped-query attention); 0: d
};

/// One layer's attention per token: Q and output projections (2 GEMMs of d×d, 4·d²), K and V
/// (d×d_kv each, 4·d·d_kv; d_kv = d without grouped-query heads: 8·d² in all) plus scores and
/// the value mix (2·context·d each).
constexpr double attention_per_token(const TransformerShape& s) {
  const double kv = s.kv_width > 0 ? s.kv_width : s.d_model;
  return 4.0 * s.d_model * s.d_model + 4.0 * s.d_model * kv + 4.0 * s.context * s.d_model;
}

/// The whole forward pass per token: every layer's attention and dense MLP plus the
/// unembedding (2·d·vocab). LayerNorms, embeddings and softmax are O(d) and not counted.
constexpr double forward_per_token(const TransformerShape& s) {
  return s.n_layers *
             (attention_per_token(s) + dense_mlp_per_token(s.d_model, s.d_hidden, s.mlp_matrices)) +
         2.0 * s.d_model * s.vocab;
}

/// Share of the whole forward pass saved when every layer routes `linear_fraction` of its
/// tokens linear (per-layer fractions: average them first, as the cost is linear in f).
constexpr double forward_saving_fraction(const TransformerShape& s, double linear_fraction) {
  return s.n_layers * mlp_saving_per_token(s.d_model, s.d_hidden, linear_fraction, s.mlp_matrices) /
         forward_per_token(s);
}

}  // namespace nlb::flops

namespace nlb {

/// FLOPs saved by per-layer linear fractions (PAPERS §A5; analysis/flops.hpp), in % of the
/// dense MLPs and of the whole forward pass. A layer with `gated[l]` false has no gate and
/// saves nothing; a gated one saves f (dense − surrogate) − gate per token.
struct FlopSaving {
  double mlp_pct = 0;
  double forward_pct = 0;
};
inline FlopSaving flop_saving(const flops::TransformerShape& shape,
                              std::span<const double> fractions, const std::vector<bool>& gated) {
  double saved = 0;
  for (std::size_t l = 0; l < fractions.size(); ++l)
    if (gated[l])
      saved += flops::mlp_saving_per_token(shape.d_model, shape.d_hidden, fractions[l],
                                           shape.mlp_matrices);
  FlopSaving out;
  out.mlp_pct = 100.0 * saved /
                (shape.n_layers *
                 flops::dense_mlp_per_token(shape.d_model, shape.d_hidden, shape.mlp_matrices));
  out.forward_pct = 100.0 * saved / flops::forward_per_token(shape);
  return out;
}

}  // namespace nlb
