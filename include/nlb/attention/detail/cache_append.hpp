// Appending a call's new positions to a layer's KV cache, and the keys and values the new rows
// then attend over: the step every attention kind with a cache takes after computing its key
// and value rows. Internal to nlb/attention.
#pragma once

// Calls the ops by qualified name: nlb/cuda.cuh must come first (nlb/cuda/ops.cuh checks).
#define NLB_OPS_CALLERS_INCLUDED

#include "nlb/attention/kv_cache.hpp"
#include "nlb/core.hpp"
#include "nlb/core/context.hpp"
#include "nlb/ops/rows.hpp"

namespace nlb::detail {

/// Copies `keys` and `values` [T, d] (the new positions' rows) into `cache` at rows
/// [past, past + T) and sets its length to past + T; without a cache, nothing. Returns
/// S = past + T, the positions a new token may attend to. The caller has checked the cache's
/// width and room (check_attention_call). O(T·d).
template <class Backend, class K, class V, class Cache>
Index append_to_cache(Context<Backend>& ctx, const K& keys, const V& values, Cache* cache,
                      Index past) {
  const Index rows = keys.rows();
  if (cache) {
    ops::copy(ctx, keys, cache->keys.middleRows(past, rows));
    ops::copy(ctx, values, cache->values.middleRows(past, rows));
    cache->length = past + rows;
  }
  return past + rows;
}

/// What the new rows attend over: S positions, keys [S, d] and values [S, d].
template <class ConstView>
struct AttendedRows {
  Index span;
  ConstView keys;
  ConstView values;
};

/// For the kinds whose cache keeps the raw input rows as keys (SDAttention, FactoredAttention:
/// their key features are recomputed from them): appends X's rows and the value rows to the
/// cache, then returns the cache's first S rows, or X and `values` themselves without a cache.
template <class ConstView, class Backend, class V, class Cache>
AttendedRows<ConstView> append_raw_rows(Context<Backend>& ctx, const ConstView& X, const V& values,
                                        Cache* cache, Index past) {
  const Index span = append_to_cache(ctx, X, values, cache, past);
  if (cache)
    return {span, ConstView(cache->keys.topRows(span)), ConstView(cache->values.topRows(span))};
  return {span, X, ConstView(values)};
}

}  // namespace nlb::detail
