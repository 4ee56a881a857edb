// Where a backend keeps its matrices (DESIGN.md §4): storage and view types per backend.
//
// Components name their weights and activations through storage_traits<Backend, T>, so one
// spelling serves every memory space: host backends store Eigen row-major matrices and pass
// Eigen references; backend::cuda stores device matrices and passes device views
// (nlb/cuda/device_matrix.cuh). The primary template refuses an unknown backend by name.
#pragma once

#include <Eigen/Core>
#include <type_traits>

#include "nlb/core/backend.hpp"
#include "nlb/core/context.hpp"
#include "nlb/core/matrix.hpp"

namespace nlb {

/// Storage and view types of Backend for scalar T: `matrix` (owning, row-major [rows, cols]),
/// `view` and `const_view` (non-owning, row-major with an outer stride). Specialised for the CPU
/// backends here and for backend::cuda in nlb/cuda/device_matrix.cuh.
template <class Backend, class T, class = void>
struct storage_traits {
  static_assert(detail::dependent_false<Backend>,
                "nlb::storage_traits<Backend, T>: no storage for this backend (CPU backends: "
                "backend::scalar, backend::simd<Arch, Gemm>; CUDA: include "
                "<nlb/cuda/device_matrix.cuh>)");
};

/// Host memory: Eigen row-major matrices and references to them.
template <class Backend, class T>
struct storage_traits<Backend, T, std::enable_if_t<backend::is_host<Backend>>> {
  using memory_space = backend::host_memory;
  using matrix = RowMatrix<T>;
  using view = Eigen::Ref<RowMatrix<T>, 0, Eigen::OuterStride<>>;
  using const_view = Eigen::Ref<const RowMatrix<T>, 0, Eigen::OuterStride<>>;
};

/// The owning matrix type of Backend.
template <class Backend, class T>
using backend_matrix = typename storage_traits<Backend, T>::matrix;

}  // namespace nlb
