// LayerNorm over token rows, the operation of the CPU backends (DESIGN.md §4): the row kernel of
// nlb/kernels/layer_norm.hpp for the backend (scalar loop or xsimd batches). nlb/cuda/ops.cuh has
// the same operation for backend::cuda.
#pragma once

#include <Eigen/Core>

#include "nlb/core/backend.hpp"
#include "nlb/core/context.hpp"
#include "nlb/kernels/layer_norm.hpp"

namespace nlb::ops {

/// Y[t, :] = (X[t, :] − mean) / sqrt(var + eps) ⊙ gamma + beta for every row t (Y may be X).
/// X, Y [T, d] with contiguous rows; gamma, beta [d]. O(T d). Throws as kernels::layer_norm_rows.
template <class Backend, class XDerived, class GammaDerived, class BetaDerived, class Y>
requires backend::is_host<Backend>
void layer_norm_rows(const Context<Backend>&, const Eigen::MatrixBase<XDerived>& X,
                     const Eigen::MatrixBase<GammaDerived>& gamma,
                     const Eigen::MatrixBase<BetaDerived>& beta, Y&& y,
                     typename XDerived::Scalar eps) {
  kernels::layer_norm_rows(Backend{}, X, y, gamma, beta, eps);
}

}  // namespace nlb::ops
