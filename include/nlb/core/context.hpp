// The run-time context of a backend (DESIGN.md §4): what a backend needs beyond its type.
//
// A backend is a compile-time tag (nlb/core/backend.hpp); its Context is the run-time state its
// operations run in — on the CPU the threads one operation may use, on CUDA the stream, the
// cuBLAS handle and a scratch arena (nlb/cuda/context.cuh). Every component is called the same
// way on every backend, `forward(ctx, in, out, ws)`, and passes the context down to the ops
// layer, the only code that reads it. The two contexts have the same members where they share a
// meaning (synchronize(), synchronizations()), as Eigen's host and GPU devices do. The
// primary template refuses a backend it does not know, by name, instead of failing deep inside
// an operation.
#pragma once

#include <algorithm>
#include <cstdint>
#include <type_traits>

#include "nlb/core/backend.hpp"

namespace nlb {

namespace detail {
template <class>
inline constexpr bool dependent_false = false;
}  // namespace detail

/// The run-time context of Backend. Specialised for the CPU backends here and for
/// backend::cuda in nlb/cuda/context.cuh (include that header to use it).
template <class Backend, class = void>
class Context {
  static_assert(
      detail::dependent_false<Backend>,
      "nlb::Context<Backend>: no context for this backend (CPU backends: "
      "backend::scalar, backend::simd<Arch, Gemm>; CUDA: include <nlb/cuda/context.cuh>)");
};

/// The context of a CPU backend: how many threads one operation may use (the GEMM provider's
/// pool, and the split of vector products over OpenMP threads in programs built with OpenMP),
/// and whether products of 2 … 64 rows may run in kernels::small_gemm (nlb/ops/gemm.hpp).
/// Cheap to copy; hold one per calling thread. The providers' thread pools are one per process,
/// so ops::gemm applies threads() to the provider when it differs from what was applied last:
/// contexts used at the same time from several threads should agree on it.
template <class Backend>
class Context<Backend, std::enable_if_t<backend::is_host<Backend>>> {
 public:
  using backend_type = Backend;

  /// A context whose operations use `threads` threads (at least 1).
  explicit Context(int threads = 1) : threads_(std::max(1, threads)) {}

  /// The settings of another CPU backend's context (e.g. for a model with 16-bit weights).
  template <class Other>
  requires(backend::is_host<Other> &&
           !std::is_same_v<Other, Backend>) explicit Context(const Context<Other>& other)
      : threads_(other.threads()),
        small_gemm_(other.small_gemm()),
        allocation_free_(other.allocation_free()) {}

  int threads() const { return threads_; }
  Context& set_threads(int threads) {
    threads_ = std::max(1, threads);
    return *this;
  }

  /// Whether ops::gemm may send products of few rows to kernels::small_gemm (on by default); off
  /// gives the provider every product (the benchmarks' side-by-side comparison).
  bool small_gemm() const { return small_gemm_; }
  Context& set_small_gemm(bool enabled) {
    small_gemm_ = enabled;
    return *this;
  }

  /// Whether products must not allocate heap memory after warm-up (off by default). The measured
  /// GEMM provider then leaves oneDNN out of its choice: dnnl_sgemm allocates its own scratch on
  /// every call (docs/ops.md). For callers that must not allocate in steady state (a real-time
  /// engine; tests/model/test_forward_allocations.cpp); decoding's vector products never reach
  /// a library either way.
  bool allocation_free() const { return allocation_free_; }
  Context& set_allocation_free(bool required) {
    allocation_free_ = required;
    return *this;
  }

  /// The CPU runs every operation before it returns: nothing to wait for.
  void synchronize() const {}
  /// Waits for queued work (always 0 on the CPU; a device context counts its own).
  std::int64_t synchronizations() const { return 0; }

 private:
  int threads_ = 1;
  bool small_gemm_ = true;
  bool allocation_free_ = false;
};

}  // namespace nlb
