// Key/value cache for incremental decoding, for every backend: its matrices are those of the
// memory space the model runs in (host RowMatrix, device DeviceMatrix; nlb/core/storage.hpp).
#pragma once

#include <algorithm>
#include <cstddef>
#include <string>
#include <vector>

#include "nlb/core/backend.hpp"
#include "nlb/core/checks.hpp"
#include "nlb/core/errors.hpp"
#include "nlb/core/matrix.hpp"
#include "nlb/core/storage.hpp"

namespace nlb {

/// One layer's cached keys and values in memory space Memory: rows [0, length) are positions
/// 0 .. length − 1, each [d] (all heads side by side, keys already rotated).
template <class T, class Memory = backend::host_memory>
struct KVCacheLayer {
  using Matrix = typename matrix_in<Memory, T>::type;
  Matrix keys;    // [capacity, d]
  Matrix values;  // [capacity, d]
  Index length = 0;

  KVCacheLayer() = default;
  /// Room for `capacity` positions of width d (zeros on the host; unspecified on a device).
  KVCacheLayer(Index capacity, Index d) : keys(capacity, d), values(capacity, d) {
    if constexpr (std::is_same_v<Memory, backend::host_memory>) {
      keys.setZero();
      values.setZero();
    }
  }
  Index capacity() const { return keys.rows(); }
};

/// The cache of a whole model: one KVCacheLayer per layer, all of the same length. Allocates
/// n_layers · capacity · d · 2 values up front.
template <class T, class Memory = backend::host_memory>
struct KVCache {
  std::vector<KVCacheLayer<T, Memory>> layers;

  KVCache() = default;
  /// Room for `capacity` positions (the model's n_positions) in `n_layers` layers of width d.
  KVCache(Index n_layers, Index capacity, Index d) {
    layers.reserve(static_cast<std::size_t>(n_layers));
    for (Index l = 0; l < n_layers; ++l)
      layers.emplace_back(capacity, d);
  }
  Index length() const { return layers.empty() ? 0 : layers.front().length; }
  Index capacity() const { return layers.empty() ? 0 : layers.front().capacity(); }
  void clear() {
    for (auto& layer : layers)
      layer.length = 0;
  }
};

/// The cache layer type of a component on Backend.
template <class T, class Backend>
using KVCacheLayerOf = KVCacheLayer<T, typename Backend::memory_space>;

namespace detail {
/// Grows the work matrix m to at least [rows, cols] (keeping the larger of each size), so that a
/// buffer whose shape follows a growing KV cache, or the widest of the layers sharing a
/// workspace, allocates once (Eigen's resize reallocates whenever the size changes); its users
/// take views (topRows / leftCols). Contents are unspecified after growing.
template <class M>
void grow_to(M& m, Index rows, Index cols) {
  if (m.rows() < rows || m.cols() < cols)
    m.resize(std::max<Index>(m.rows(), rows), std::max<Index>(m.cols(), cols));
}

/// The checks every attention kind makes at the start of forward(ctx, X, Y, ws, cache): X and
/// Y [T, d], and a cache of width `cache_width` (d when negative; the key/value width with
/// grouped-query heads) with room for T more positions. Returns the cached length (0 without a
/// cache). ShapeError or ArgumentError naming `what` and the quantity. The messages are built
/// only on a mismatch: this runs once per layer and decoded token.
template <class X, class Y, class Cache>
Index check_attention_call(const char* what, Index d, const X& x, const Y& y, const Cache* cache,
                           Index cache_width = -1) {
  if (x.cols() != d || y.rows() != x.rows() || y.cols() != d) {
    check_dim(std::string(what) + ": input width (d)", d, x.cols());
    check_dim(std::string(what) + ": output rows (T)", x.rows(), y.rows());
    check_dim(std::string(what) + ": output width (d)", d, y.cols());
  }
  if (cache == nullptr)
    return 0;
  const Index width = cache_width < 0 ? d : cache_width;
  if (cache->keys.cols() != width || cache->values.cols() != width) {
    check_dim(std::string(what) + ": cache key width", width, cache->keys.cols());
    check_dim(std::string(what) + ": cache value width", width, cache->values.cols());
  }
  if (cache->length + x.rows() > cache->capacity())
    throw ArgumentError(expected_found(std::string(what) + ": cache positions",
                                       "at most " + std::to_string(cache->capacity()),
                                       cache->length + x.rows()));
  return cache->length;
}

}  // namespace detail

}  // namespace nlb
