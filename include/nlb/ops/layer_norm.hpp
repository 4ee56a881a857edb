// LayerNorm over token rows, the operation of the CPU backends (DESIGN.md §4): the row kernel of
// nlb/kernels/layer_norm.hpp for the backend tag (scalar loop or xsimd batches).
#pragma once

#include <Eigen/Core>

#include "nlb/core/backend.hpp"
#include "nlb/kernels/layer_norm.hpp"

namespace nlb::ops {

/// Y[t, :] = (X[t, :] − mean) / sqrt(var + eps) ⊙ gamma + beta for every row t (Y may be X).
/// X, Y [T, d] with contiguous rows; gamma, beta [d]. O(T d). Throws as kernels::layer_norm_rows.
template <class Backend, class XDerived, class YDerived, class GammaDerived, class BetaDerived>
void layer_norm_rows(Backend backend, const Eigen::MatrixBase<XDerived>& X,
                     const Eigen::MatrixBase<YDerived>& Y,
                     const Eigen::MatrixBase<GammaDerived>& gamma,
                     const Eigen::MatrixBase<BetaDerived>& beta, typename XDerived::Scalar eps) {
  static_assert(backend::is_host<Backend>, "ops::layer_norm_rows: a CPU backend");
  kernels::layer_norm_rows(backend, X, Y, gamma, beta, eps);
}

}  // namespace nlb::ops
