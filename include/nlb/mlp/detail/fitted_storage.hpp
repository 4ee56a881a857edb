// Where the MLP family keeps its small fitted parameters (a surrogate's W and b, a gate's folded
// weight) on every backend. They are fitted in double and stored in T whatever the backend's
// weight storage: 16-bit or mapped storage (backend::with_weights) is for a model's large
// matrices, and a surrogate of d² values rounded to 16 bits would change every linear row's
// result. On a device they live in its memory like every other matrix.
#pragma once

#include <type_traits>
#include <utility>

#include "nlb/core/backend.hpp"
#include "nlb/core/matrix.hpp"
#include "nlb/core/storage.hpp"

namespace nlb::mlp::detail {

/// A [Rows, Cols] matrix of T in Backend's memory: RowMatrix<T, Rows, Cols> on every host
/// backend (whatever its weight storage; for Cols = 1 a ColVector<T, Rows>), the backend's matrix
/// (storage_traits::matrix) on a device.
template <class Backend, class T, int Rows, int Cols>
using fitted_matrix = std::conditional_t<backend::is_host<Backend>, RowMatrix<T, Rows, Cols>,
                                         typename storage_traits<Backend, T>::matrix>;

/// The host matrix `m` as a `Stored` (a fitted_matrix or a storage_traits vector) of Backend:
/// moved (or copied, from an lvalue) on the host, uploaded to a device by
/// storage_traits::from_host. O(size).
template <class Stored, class Backend, class Host>
Stored to_fitted(Host&& m) {
  if constexpr (backend::is_host<Backend>) {
    return Stored(std::forward<Host>(m));
  } else {
    using T = typename std::remove_cvref_t<Host>::Scalar;
    return storage_traits<Backend, T>::template from_host<Dynamic, Dynamic>(m);
  }
}

}  // namespace nlb::mlp::detail
