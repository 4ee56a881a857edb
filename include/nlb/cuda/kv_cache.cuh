// Key/value cache for incremental decoding on backend::cuda: the device counterpart of
// nlb/attention/kv_cache.hpp.
#pragma once

#include <cstddef>
#include <string>
#include <vector>

#include "nlb/core/checks.hpp"
#include "nlb/core/errors.hpp"
#include "nlb/core/matrix.hpp"
#include "nlb/cuda/device_matrix.cuh"

namespace nlb::cuda {

/// One layer's cached keys and values in device memory: rows [0, length) are positions
/// 0 .. length − 1, each [d] (all heads side by side, keys already rotated).
template <class T>
struct KVCacheLayer {
  DeviceMatrix<T> keys;    // [capacity, d]
  DeviceMatrix<T> values;  // [capacity, d]
  Index length = 0;

  KVCacheLayer() = default;
  KVCacheLayer(Index capacity, Index d) : keys(capacity, d), values(capacity, d) {}
  Index capacity() const { return keys.rows(); }
};

/// The device cache of a whole model: one KVCacheLayer per layer, all of the same length.
/// Allocates n_layers · capacity · d · 2 values of device memory up front.
template <class T>
struct KVCache {
  std::vector<KVCacheLayer<T>> layers;

  KVCache() = default;
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

namespace detail {

/// The checks of every device attention's forward(X, Y, ws, cache): X and Y [T, d], and a cache
/// of width d with room for T more positions. Returns the cached length (0 without a cache).
/// ShapeError or ArgumentError naming `what` and the quantity.
template <class T>
Index check_attention_call(const char* what, Index d, DeviceView<const T> X, DeviceView<T> Y,
                           const KVCacheLayer<T>* cache) {
  // The messages are built only on a mismatch: this runs once per layer and decoded token.
  if (X.cols != d || Y.rows != X.rows || Y.cols != d) {
    check_dim(std::string(what) + ": input width (d)", d, X.cols);
    check_dim(std::string(what) + ": output rows (T)", X.rows, Y.rows);
    check_dim(std::string(what) + ": output width (d)", d, Y.cols);
  }
  if (cache == nullptr)
    return 0;
  if (cache->keys.cols() != d)
    check_dim(std::string(what) + ": cache width (d)", d, cache->keys.cols());
  if (cache->length + X.rows > cache->capacity())
    throw ArgumentError(nlb::detail::expected_found(std::string(what) + ": cache positions",
                                                    "at most " + std::to_string(cache->capacity()),
                                                    cache->length + X.rows));
  return cache->length;
}

}  // namespace detail

}  // namespace nlb::cuda
