// The run-time context of a backend (DESIGN.md §4): what a backend needs beyond its type.
//
// A backend is a compile-time tag (nlb/core/backend.hpp); its Context is the run-time state the
// operations of that backend run in — on the CPU the number of threads, on CUDA the stream, the
// cuBLAS handle and a scratch arena (nlb/cuda/context.cuh). The primary template refuses a
// backend it does not know, by name, instead of failing deep inside an operation.
#pragma once

#include <algorithm>
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

/// The context of a CPU backend: how many threads its operations may use. Cheap to copy.
/// ops::set_gemm_threads(backend, ctx.threads()) applies it to the GEMM provider.
template <class Backend>
class Context<Backend, std::enable_if_t<backend::is_host<Backend>>> {
 public:
  using backend_type = Backend;
  /// A context with `threads` threads (at least 1).
  explicit Context(int threads = 1) : threads_(std::max(1, threads)) {}
  int threads() const { return threads_; }

 private:
  int threads_;
};

}  // namespace nlb
