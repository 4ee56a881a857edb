// RMSNorm over token rows, the operation of the CPU backends (DESIGN.md §4): the row kernel of
// nlb/kernels/rms_norm.hpp for the backend (scalar loop or xsimd batches). nlb/cuda/row_ops.cuh
// has the same operation for backend::cuda.
#pragma once

#include <Eigen/Core>

#include "nlb/core/backend.hpp"
#include "nlb/core/context.hpp"
#include "nlb/kernels/rms_norm.hpp"

namespace nlb::ops {

/// Y[t, :] = X[t, :] / sqrt(mean(X[t, :]²) + eps) ⊙ weight for every row t (Y may be X): the
/// Llama family's norm. X, Y [T, d] with contiguous rows; weight [d]. O(T d). Throws as
/// kernels::rms_norm_rows.
template <class Backend, class XDerived, class WeightDerived, class Y>
requires backend::is_host<Backend>
void rms_norm_rows(const Context<Backend>&, const Eigen::MatrixBase<XDerived>& X,
                   const Eigen::MatrixBase<WeightDerived>& weight, Y&& y,
                   typename XDerived::Scalar eps) {
  kernels::rms_norm_rows(Backend{}, X, y, weight, eps);
}

}  // namespace nlb::ops
