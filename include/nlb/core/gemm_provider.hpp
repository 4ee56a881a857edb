// GEMM providers: which library multiplies the matrices of a CPU backend (DESIGN.md §4).
//
// The CPU backend's matrix products (nlb/ops/gemm.hpp) come from a provider chosen at compile
// time: Eigen's own kernel (always there), OpenBLAS, BLIS, oneDNN or LIBXSMM (optional Debian
// packages). Which one is fastest depends on the CPU and the product's shape (docs/benchmarks.md,
// "GEMM providers at the model's products"), so the default, `measured`, chooses per product from
// sweeps recorded in the library for each kind of CPU; CMake finds the libraries that are
// installed (NLB_GEMM_PROVIDER in docs/dependencies.md), and a program can still name another
// provider in its backend type, `backend::simd<Arch, gemm_provider::blis>`, and link
// `nlbudget::blis`.
#pragma once

#include <type_traits>

namespace nlb::gemm_provider {

/// Eigen 3.4's blocked GEMM (the oracle's provider; needs nothing beyond Eigen).
struct eigen {};
/// OpenBLAS's cblas_?gemm (NLB_HAVE_OPENBLAS: the target nlbudget::openblas links it).
struct openblas {};
/// BLIS's typed API bli_?gemm, which takes row and column strides (NLB_HAVE_BLIS:
/// nlbudget::blis links it).
struct blis {};
/// oneDNN's dnnl_sgemm, row-major float GEMM with kernels generated for the CPU (NLB_HAVE_ONEDNN:
/// nlbudget::onednn links it); its double products run in Eigen.
struct onednn {};
/// LIBXSMM's libxsmm_?gemm, kernels generated per small shape, larger products handed to
/// OpenBLAS (NLB_HAVE_LIBXSMM: nlbudget::libxsmm links both).
struct libxsmm {};
/// Per product, the provider that was fastest at the nearest recorded shape on this kind of CPU
/// (vendor, family, vector ISA) and thread count, among the providers of the build that can run
/// it: the measurements are recorded in the library (nlb/ops/detail/gemm_measurements.hpp,
/// written by benchmarks/gemm_measurements.py from bench_gemm's sweep). On a CPU kind with no
/// recorded measurements it uses OpenBLAS, else Eigen (NLB_HAVE_MEASURED: nlbudget::measured
/// links every provider found).
struct measured {};

/// True when the provider's library is part of this build.
template <class Provider>
inline constexpr bool is_available = false;
template <>
inline constexpr bool is_available<eigen> = true;
#if defined(NLB_HAVE_OPENBLAS)
template <>
inline constexpr bool is_available<openblas> = true;
#endif
#if defined(NLB_HAVE_BLIS)
template <>
inline constexpr bool is_available<blis> = true;
#endif
#if defined(NLB_HAVE_ONEDNN)
template <>
inline constexpr bool is_available<onednn> = true;
#endif
#if defined(NLB_HAVE_LIBXSMM)
template <>
inline constexpr bool is_available<libxsmm> = true;
#endif
#if defined(NLB_HAVE_MEASURED)
template <>
inline constexpr bool is_available<measured> = true;
#endif

/// The provider of `backend::cpu`: the one the CMake target nlbudget::nlbudget was configured
/// with (NLB_DEFAULT_GEMM_<NAME>, NLB_GEMM_PROVIDER in docs/dependencies.md), Eigen otherwise.
#if defined(NLB_DEFAULT_GEMM_OPENBLAS)
using default_provider = openblas;
#elif defined(NLB_DEFAULT_GEMM_BLIS)
using default_provider = blis;
#elif defined(NLB_DEFAULT_GEMM_ONEDNN)
using default_provider = onednn;
#elif defined(NLB_DEFAULT_GEMM_LIBXSMM)
using default_provider = libxsmm;
#elif defined(NLB_DEFAULT_GEMM_MEASURED)
using default_provider = measured;
#else
using default_provider = eigen;
#endif

static_assert(is_available<default_provider>,
              "nlb: the default GEMM provider's library is not part of this build "
              "(define NLB_HAVE_OPENBLAS / NLB_HAVE_BLIS through the nlbudget::openblas / "
              "nlbudget::blis targets)");

/// Calls f(Provider{}) for each library provider of this build (OpenBLAS, BLIS, oneDNN, LIBXSMM),
/// in that order: e.g. to set every pool's threads, or to register one benchmark per provider.
template <class F>
void for_each_library_provider(F&& f) {
  const auto call = [&](auto provider) {
    if constexpr (is_available<decltype(provider)>)
      f(provider);
  };
  call(openblas{});
  call(blis{});
  call(onednn{});
  call(libxsmm{});
}

/// A readable name, for reports and benchmark labels.
template <class Provider>
constexpr const char* name() {
  if constexpr (std::is_same_v<Provider, openblas>)
    return "openblas";
  else if constexpr (std::is_same_v<Provider, blis>)
    return "blis";
  else if constexpr (std::is_same_v<Provider, onednn>)
    return "onednn";
  else if constexpr (std::is_same_v<Provider, libxsmm>)
    return "libxsmm";
  else if constexpr (std::is_same_v<Provider, measured>)
    return "measured";
  else
    return "eigen";
}

}  // namespace nlb::gemm_provider
