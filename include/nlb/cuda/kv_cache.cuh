// Key/value cache for incremental decoding on backend::cuda: the device counterpart of
// nlb/attention/kv_cache.hpp.
#pragma once

#include <cstddef>
#include <vector>

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

}  // namespace nlb::cuda
