// The norm of a block (before attention, before the MLP) and of the head: LayerNorm (GPT-2,
// GPT-NeoX) or RMSNorm (the Llama family), its weights, and the one call that applies either.
// Written once for every backend: the ops layer's layer_norm_rows / rms_norm_rows (DESIGN.md §4).
#pragma once

// Calls the ops by qualified name: nlb/cuda.cuh must come first (nlb/cuda/ops.cuh checks).
#define NLB_OPS_CALLERS_INCLUDED

#include "nlb/core.hpp"
#include "nlb/ops/layer_norm.hpp"
#include "nlb/ops/rms_norm.hpp"

namespace nlb {

/// Which norm a model applies: LayerNorm (GPT-2, GPT-NeoX) or RMSNorm (the Llama family: no mean
/// subtracted, no bias).
enum class NormKind { layer_norm, rms_norm };

/// Norm parameters: gamma, beta [d], in memory space Memory (host row vectors, or device
/// matrices [1, d]). An RMSNorm has gamma only (beta empty).
template <class T, int D = Dynamic, class Memory = backend::host_memory>
struct LayerNormWeights {
  typename vector_in<Memory, T, D>::type gamma;
  typename vector_in<Memory, T, D>::type beta;
};

/// y = norm(x) row by row (y may be x): LayerNorm with gamma and beta, or RMSNorm with gamma.
/// x, y [T, d]; weights [d]. O(T·d).
template <class Backend, class X, class Weights, class Y, class T>
void normalize_rows(Context<Backend>& ctx, NormKind kind, const X& x, const Weights& w, Y&& y,
                    T eps) {
  if (kind == NormKind::rms_norm)
    ops::rms_norm_rows(ctx, x, w.gamma, y, eps);
  else
    ops::layer_norm_rows(ctx, x, w.gamma, w.beta, y, eps);
}

}  // namespace nlb
