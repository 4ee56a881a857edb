// The scratch memory of the ops layer, per backend (DESIGN.md §4): what the operations need
// besides their operands — packing buffers of the products, one tile of attention scores, the
// rotary tables. Components hold one ops::Scratch<Backend, T> in their workspace and hand it to
// every operation; only the ops read it, so the components are the same code on every backend.
// nlb/cuda/ops.cuh gives backend::cuda its own.
#pragma once

#include <type_traits>
#include <vector>

#include "nlb/core/backend.hpp"
#include "nlb/core/context.hpp"
#include "nlb/core/gemm_scratch.hpp"
#include "nlb/kernels/rotary.hpp"
#include "nlb/ops/detail/tiled_attention.hpp"

namespace nlb::ops {

/// The scratch of the CPU backends: a GemmScratch (it is one, so every product takes it), one
/// tile of attention scores with its running softmax, the rotary cos/sin tables and linear
/// attention's running state. Grow-only: after a call with T rows (and S cached positions) a call
/// no larger allocates nothing.
template <class T>
struct HostScratch : GemmScratch<T> {
  detail::TiledAttentionScratch<T> attention;
  kernels::RotaryAngles<T> angles;
  RowMatrix<T> linear_state, linear_chunk;  // [d_k, d_v], [64, 64]
  RowVector<T> linear_sums;                 // [d_k]
  /// [threads − 1]: the scratch of the other threads when ops::causal_attention splits the heads
  /// over a context's threads (the calling thread uses the members above).
  std::vector<detail::AttentionThreadScratch<T>> attention_threads;
};

/// The scratch type of Backend for scalar T (specialised for backend::cuda in nlb/cuda/ops.cuh).
template <class Backend, class T, class = void>
struct scratch_of {
  static_assert(nlb::detail::dependent_false<Backend>,
                "ops::Scratch<Backend, T>: no scratch for this backend (CPU backends; CUDA: "
                "include <nlb/cuda/ops.cuh>)");
};
template <class Backend, class T>
struct scratch_of<Backend, T, std::enable_if_t<backend::is_host<Backend>>> {
  using type = HostScratch<T>;
};

/// The scratch of Backend's operations for scalar T.
template <class Backend, class T>
using Scratch = typename scratch_of<Backend, T>::type;

}  // namespace nlb::ops
