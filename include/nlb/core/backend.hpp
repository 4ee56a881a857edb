// Backends are empty tag types chosen at compile time (DESIGN.md §4).
//
// Kernels are overloaded on the tag. `simd<Arch>` derives from `scalar`, so a
// kernel that has no SIMD overload resolves to the scalar one by the ordinary
// derived-to-base conversion: a missing kernel falls back, never fails to build.
// A CUDA backend (`backend::cuda`, include/nlb/cuda/) is another tag whose kernels
// take device buffers; the component interfaces do not change.
#pragma once

#include <type_traits>
#include "nlb/core/detail/xsimd_include.hpp"

namespace nlb::backend {

/// Plain loops + Eigen: the readable reference and the test oracle.
struct scalar {};

/// xsimd batches for the instruction set `Arch` (default: the best the compiler targets).
template <class Arch = xsimd::default_arch>
struct simd : scalar {
  using arch = Arch;
};

/// The default CPU backend.
using cpu = simd<>;

template <class B>
inline constexpr bool is_simd = false;
template <class Arch>
inline constexpr bool is_simd<simd<Arch>> = true;

/// The CUDA backend (device memory, cuBLAS and thrust). Declared here, beside the host
/// backends, so that a host component asked for it refuses with its own static_assert.
struct cuda {};

/// True for every CPU backend (host memory, Eigen GEMMs).
template <class B>
inline constexpr bool is_host = std::is_base_of_v<scalar, B>;

}  // namespace nlb::backend
