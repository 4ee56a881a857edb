// Key/value cache for incremental decoding.
#pragma once

#include <vector>

#include "nlb/core.hpp"

namespace nlb {

/// One layer's cached keys and values: rows [0, length) are positions 0 .. length − 1,
/// each [d] (all heads side by side, keys already rotated).
template <class T>
struct KVCacheLayer {
  RowMatrix<T> keys;    // [capacity, d]
  RowMatrix<T> values;  // [capacity, d]
  Index length = 0;

  KVCacheLayer() = default;
  KVCacheLayer(Index capacity, Index d)
      : keys(RowMatrix<T>::Zero(capacity, d)), values(RowMatrix<T>::Zero(capacity, d)) {}
  Index capacity() const { return keys.rows(); }
};

/// The cache of a whole model: one KVCacheLayer per layer, all of the same length.
template <class T>
struct KVCache {
  std::vector<KVCacheLayer<T>> layers;

  KVCache() = default;
  /// Room for `capacity` positions (the model's n_positions) in `n_layers` layers of width d.
  KVCache(Index n_layers, Index capacity, Index d)
      : layers(static_cast<std::size_t>(n_layers), KVCacheLayer<T>(capacity, d)) {}
  Index length() const { return layers.empty() ? 0 : layers.front().length; }
  Index capacity() const { return layers.empty() ? 0 : layers.front().capacity(); }
  void clear() {
    for (auto& layer : layers)
      layer.length = 0;
  }
};

}  // namespace nlb
