// Backends are empty tag types chosen at compile time (DESIGN.md §4).
//
// Kernels are overloaded on the tag. `simd<Arch>` derives from `scalar`, so a
// kernel that has no SIMD overload resolves to the scalar one by the ordinary
// derived-to-base conversion: a missing kernel falls back, never fails to build.
// The CUDA backend (`backend::cuda`, include/nlb/cuda/) is another tag: its components are
// specialisations of the same class templates that keep their weights in device memory and
// run in a Context<backend::cuda> (stream, cuBLAS handle); see docs/cuda.md.
//
// A CPU backend also names the library that multiplies its matrices (`gemm`, a provider of
// nlb/core/gemm_provider.hpp): the scalar oracle always uses Eigen's; `simd` takes the build's
// default unless told otherwise. nlb/ops/gemm.hpp dispatches on it. It also names how the
// components keep their large weight matrices (`weights`, nlb/core/weight_storage.hpp): float
// matrices unless a backend is wrapped in with_weights<storage::f16, bf16 or mapped>.
#pragma once

#include <type_traits>
#include "nlb/core/gemm_provider.hpp"
#include "nlb/core/weight_storage.hpp"
#include "nlb/core/xsimd.hpp"

namespace nlb::backend {

/// Memory spaces: where a backend's storage lives (nlb/core/storage.hpp).
struct host_memory {};
struct device_memory {};

/// Plain loops + Eigen: the readable reference and the test oracle.
struct scalar {
  using memory_space = host_memory;
  using gemm = gemm_provider::eigen;
  using weights = storage::f32;
};

/// xsimd batches for the instruction set `Arch` (default: the best the compiler targets), and
/// matrix products from `Gemm` (default: the build's; nlb/core/gemm_provider.hpp).
template <class Arch = xsimd::default_arch, class Gemm = gemm_provider::default_provider>
struct simd : scalar {
  using arch = Arch;
  using gemm = Gemm;
};

/// The default CPU backend.
using cpu = simd<>;

/// A CPU backend `Base` whose components keep their large weight matrices in `Weights`
/// (storage::f16 or storage::bf16: half the bytes; storage::q8: 8-bit blocks; products widen
/// them in registers and accumulate in the scalar type; storage::mapped: read where a loaded
/// checkpoint's mapping holds them). Kernels see `Base` (derived-to-base deduction), so every row
/// kernel and GEMM provider of Base serves it unchanged. Models of it run forwards (eval,
/// decoding); the analyses, which read weights as Eigen matrices they own, take storage::f32
/// models.
template <class Weights, class Base = cpu>
struct with_weights : Base {
  static_assert(storage::is_storage<Weights> && !std::is_same_v<Weights, storage::f32>,
                "backend::with_weights<Weights, Base>: Weights is storage::f16, storage::bf16, "
                "storage::q8 or storage::mapped (storage::f32 is every backend's default)");
  static_assert(std::is_base_of_v<scalar, Base> &&
                    std::is_same_v<typename Base::weights, storage::f32>,
                "backend::with_weights<Weights, Base>: Base is a CPU backend with float weights");
  using weights = Weights;
};

template <class B>
inline constexpr bool is_simd = false;
template <class Arch, class Gemm>
inline constexpr bool is_simd<simd<Arch, Gemm>> = true;
template <class Weights, class Base>
inline constexpr bool is_simd<with_weights<Weights, Base>> = is_simd<Base>;

/// The CUDA backend (device memory, cuBLAS and thrust; nlb/cuda/). Declared here, beside the
/// host backends, so that a host component asked for it refuses with its own static_assert.
struct cuda {
  using memory_space = device_memory;
  using weights = storage::device;
};

/// True for every CPU backend (host memory, Eigen GEMMs).
template <class B>
inline constexpr bool is_host = std::is_base_of_v<scalar, B>;

}  // namespace nlb::backend
