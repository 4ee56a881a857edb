// Where a backend keeps its matrices (DESIGN.md §4): storage and view types per backend.
//
// Components and composites are written once for every backend: they name their weights,
// activations, views and row lists through storage_traits<Backend, T> and hand them to the ops
// layer, which is the only code that differs per backend. Host backends store Eigen row-major
// matrices and pass Eigen references; backend::cuda stores device matrices and passes device
// views (nlb/cuda/device_matrix.cuh) with the same member names (rows(), cols(), topRows(),
// middleRows(), middleCols(), resize()), so the code above the ops reads the same on both.
// The primary template refuses an unknown backend by name.
#pragma once

#include <Eigen/Core>
#include <type_traits>
#include <utility>
#include <vector>

#include "nlb/core/backend.hpp"
#include "nlb/core/context.hpp"
#include "nlb/core/half_matrix.hpp"
#include "nlb/core/mapped_matrix.hpp"
#include "nlb/core/matrix.hpp"
#include "nlb/core/weight_storage.hpp"

namespace nlb {

/// The owning row-major matrix type of a memory space (host_memory: RowMatrix<T>; device_memory:
/// cuda::DeviceMatrix<T>, specialised in nlb/cuda/device_matrix.cuh). What is shared by every
/// backend of one memory space, such as a KV cache, is named by it.
template <class Memory, class T>
struct matrix_in {
  static_assert(detail::dependent_false<Memory>,
                "nlb::matrix_in<Memory, T>: no matrix for this memory space (host_memory; "
                "device_memory: include <nlb/cuda/device_matrix.cuh>)");
};
template <class T>
struct matrix_in<backend::host_memory, T> {
  using type = RowMatrix<T>;
};

/// The row vector [1, N] of a memory space (biases, norms): RowVector<T, N> on the host,
/// cuda::DeviceMatrix<T> [1, n] on a device.
template <class Memory, class T, int N = Dynamic>
struct vector_in {
  using type = typename matrix_in<Memory, T>::type;
};
template <class T, int N>
struct vector_in<backend::host_memory, T, N> {
  using type = RowVector<T, N>;
};

namespace storage {
/// The memory space a weight storage policy keeps its matrices in.
template <class S>
using memory_of =
    std::conditional_t<std::is_same_v<S, device>, backend::device_memory, backend::host_memory>;
}  // namespace storage

/// Storage and view types of Backend for scalar T:
/// - `activations<Cols>`: an owning row-major [rows, Cols] work matrix (Cols may be Dynamic);
///   `matrix` is activations<Dynamic>;
/// - `view`, `const_view`: non-owning row-major views with an outer stride;
/// - `weights<Rows, Cols>`: a large weight matrix in the backend's weight storage;
///   `vector<N>`: a bias or norm row [1, N];
/// - `index_vector`: a list of row indices (routing);
/// - `from_host(m)`: a host matrix (Eigen, HalfMatrix or MappedMatrix) as this backend's
///   weights (copied to the device; converted or moved through on the host).
/// Specialised for the CPU backends here and for backend::cuda in nlb/cuda/device_matrix.cuh.
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
  template <int Cols = Dynamic>
  using activations = Activations<T, Cols>;
  using matrix = RowMatrix<T>;
  using view = Eigen::Ref<RowMatrix<T>, 0, Eigen::OuterStride<>>;
  using const_view = Eigen::Ref<const RowMatrix<T>, 0, Eigen::OuterStride<>>;
  template <int Rows = Dynamic, int Cols = Dynamic>
  using weights = weight_matrix<typename Backend::weights, T, Rows, Cols>;
  template <int N = Dynamic>
  using vector = typename vector_in<memory_space, T, N>::type;
  using index_vector = std::vector<Index>;

  /// `m` in this backend's weight storage (a copy, rounded to 16 bits for f16/bf16).
  template <int Rows = Dynamic, int Cols = Dynamic, class Source>
  static weights<Rows, Cols> from_host(const Source& m) {
    if constexpr (requires { m.template widened<T>(); })
      return to_weight_storage<typename Backend::weights>(
          RowMatrix<T, Rows, Cols>(m.template widened<T>()));
    else if constexpr (requires { m.map(); })
      return to_weight_storage<typename Backend::weights>(RowMatrix<T, Rows, Cols>(m.map()));
    else
      return to_weight_storage<typename Backend::weights>(RowMatrix<T, Rows, Cols>(m));
  }
  /// A bias or norm row [1, N] (a copy).
  template <int N = Dynamic, class Source>
  static vector<N> vector_from_host(const Source& v) {
    return vector<N>(v);
  }
};

/// The owning matrix type of Backend.
template <class Backend, class T>
using backend_matrix = typename storage_traits<Backend, T>::matrix;

/// The same component on backend B: every component names itself on another backend as
/// `C::on_backend<B>` and has an explicit constructor from its form on another backend (weights
/// copied into B's storage: uploaded to a device, converted to 16 bits, …).
template <class B, class C>
using on_backend_t = typename C::template on_backend<B>;

/// `component` copied onto backend B (to_backend(backend::cuda{}, host_mlp) uploads its weights
/// once). O(its weights).
template <class B, class C>
on_backend_t<B, C> to_backend(B, const C& component) {
  return on_backend_t<B, C>(component);
}

}  // namespace nlb
