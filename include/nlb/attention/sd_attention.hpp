// S–D attention (PAPERS.md §B2; docs/attention.md): multi-head causal attention whose logits are
// a skew-symmetric routing term minus a non-negative diagonal filter term, both acting on the
// attention input itself, with value and output projections as usual. A drop-in for
// DenseAttention inside nlb::Block.
#pragma once

// Calls the ops by qualified name: nlb/cuda.cuh must come first (nlb/cuda/ops.cuh checks).
#define NLB_OPS_CALLERS_INCLUDED

#include <algorithm>
#include <cmath>
#include <string>
#include <type_traits>
#include <utility>
#include <vector>

#include "nlb/attention/dense_attention.hpp"
#include "nlb/attention/detail/cache_append.hpp"
#include "nlb/attention/diagonal_filter.hpp"
#include "nlb/attention/kv_cache.hpp"
#include "nlb/attention/skew_routing.hpp"
#include "nlb/core.hpp"
#include "nlb/core/context.hpp"
#include "nlb/core/storage.hpp"
#include "nlb/ops/attention.hpp"
#include "nlb/ops/gemm.hpp"
#include "nlb/ops/narrow_gemm.hpp"
#include "nlb/ops/rows.hpp"
#include "nlb/ops/scratch.hpp"

namespace nlb {

/// Multi-head causal S–D attention over X [T, d] (ours: the "residual-space policy": S_h and
/// D_h act on the d-dim input x itself, there are no query/key projections and no biases in
/// the scores). With H heads, d_h = d / H, and for head h a routing S_h (RoutingT, e.g.
/// SkewSymmetricRouting<T, Rank>) and a filter D_h (FilterT: DiagonalFilter or ScalarFilter):
///   ℓ_ij = x_i (S_h − D_h) x_jᵀ / sqrt(d_h)   for j <= i,   P_h = softmax_j(ℓ),
///   V = X w_v + b_v [T, d];  C[:, h·d_h : (h+1)·d_h] = P_h V[:, h·d_h : (h+1)·d_h];
///   Y = C w_out + b_out [T, d].
/// Per head the logits are one causal product of fused features
///   [−X D_h | X U_h | X V_h] / sqrt(d_h)  times  [X | X V_h | −X U_h]ᵀ
/// (inner size d + Rank), run by ops::causal_attention with one head (on the CPU in tiles with
/// a streamed softmax, no [T, S] score matrix): the diagonal filter is full rank, so a head's
/// scores cost T²·(d + Rank)/2 multiply-adds, against T²·d_h/2 for a dense head; the value and
/// output projections cost 4·T·d² FLOPs.
/// KV cache (ours): the cache's "keys" rows hold the raw input rows x_j, its "values" rows hold
/// the V rows; the routing features of every cached key are recomputed each call
/// (O(S·d·Rank) per head, S = past + T). Runs on every backend whose routing and filter it holds
/// (on_backend / to_backend copy a host one); w_v and w_out are kept in the backend's weight
/// storage.
template <class RoutingT, class FilterT, class Backend = typename RoutingT::backend_type>
class SDAttention {
 public:
  using Scalar = typename RoutingT::Scalar;
  using backend_type = Backend;
  using Routing = RoutingT;
  using Filter = FilterT;
  static_assert(std::is_same_v<Scalar, typename FilterT::Scalar>,
                "SDAttention: routing and filter must have the same scalar type");
  static_assert(std::is_same_v<typename RoutingT::backend_type, Backend> &&
                    std::is_same_v<typename FilterT::backend_type, Backend>,
                "SDAttention: routing, filter and attention must run on one backend");

 private:
  using T = Scalar;
  using Storage = storage_traits<Backend, T>;
  using Matrix = typename Storage::template activations<>;

 public:
  static constexpr int size = FilterT::size;  // d when the filter fixes it, else Dynamic
  using Input = typename Storage::template activations<size>;
  using Output = typename Storage::template activations<size>;
  // Width-Dynamic views, as in DenseAttention: a wrong width is a ShapeError, not UB.
  using ConstView = typename Storage::const_view;
  using View = typename Storage::view;
  using Weight = typename Storage::template weights<>;  // w_v, w_out [d, d]
  using Bias = typename Storage::template vector<>;     // b_v, b_out [d]
  template <class B>
  using on_backend = SDAttention<on_backend_t<B, RoutingT>, on_backend_t<B, FilterT>, B>;

  /// Scratch memory for forward(); reuse it across calls. After a call with T rows and S
  /// positions, a call with T rows and at most S positions allocates nothing (the key features
  /// grow with the KV cache, so they are grow-only storage used through views; with a cache
  /// they are sized for its capacity at once).
  struct Workspace {
    Matrix values;   // [T, d]
    Matrix lq;       // [T, d + Rank]: one head's query-side features
    Matrix lk;       // [>= S, >= d + Rank]: key-side features (the keys, then the routing's)
    Matrix context;  // [T, d]
    ops::Scratch<Backend, T> scratch;  // packing buffers, score tile
    // (rows, rank) pairs the scratch is sized for by the routings' reserve (heads and layers
    // sharing this workspace may differ in rank).
    std::vector<std::pair<Index, Index>> reserved;
  };

  SDAttention() = default;

  /// One routing and one filter per head (heads = routing.size()), w_v, w_out [d, d] and
  /// b_v, b_out [d] in Y = X W + b layout (host matrices; the two weights are moved into the
  /// backend's weight storage). ShapeError when the head counts differ, H does not divide d, or a
  /// routing, filter or weight does not have width d (or the fixed width).
  SDAttention(std::vector<RoutingT> routing, std::vector<FilterT> filters, RowMatrix<T> w_v,
              RowVector<T> b_v, RowMatrix<T> w_out,
              RowVector<T> b_out) requires backend::is_host<Backend>
      : routing_(std::move(routing)),
        filters_(std::move(filters)),
        w_v_(to_weight_storage<typename Backend::weights>(std::move(w_v))),
        b_v_(std::move(b_v)),
        w_out_(to_weight_storage<typename Backend::weights>(std::move(w_out))),
        b_out_(std::move(b_out)) {
    check_parts();
  }

  /// The same attention on another backend: every head's routing and filter converted, w_v and
  /// w_out copied into this backend's weight storage, the biases into its vectors (uploaded
  /// once for backend::cuda). O(d² + H·d·Rank).
  template <class OtherRouting, class OtherFilter, class From>
  requires(!std::is_same_v<From, Backend>) explicit SDAttention(
      const SDAttention<OtherRouting, OtherFilter, From>& from)
      : w_v_(Storage::template from_host<>(from.w_v())),
        b_v_(Storage::template vector_from_host<>(from.b_v())),
        w_out_(Storage::template from_host<>(from.w_out())),
        b_out_(Storage::template vector_from_host<>(from.b_out())) {
    for (Index h = 0; h < from.heads(); ++h) {
      routing_.emplace_back(from.routing(h));
      filters_.emplace_back(from.filter(h));
    }
    check_parts();
  }

  /// Y = attention(X), X, Y [T, d] (Y must not alias X). Without a cache X holds positions
  /// [0, T); with one, X's tokens follow the cached ones, and X's rows and V rows are appended
  /// to the cache's keys and values (ArgumentError when full; ShapeError when its width is not
  /// d). ShapeError on a width or row mismatch of X or Y.
  void forward(Context<Backend>& ctx, const ConstView& X, View Y, Workspace& ws,
               KVCacheLayerOf<T, Backend>* cache = nullptr) const {
    const Index d = features(), rows = X.rows(), dh = head_dim();
    const Index past = detail::check_attention_call("SDAttention::forward", d, X, Y, cache);
    if (rows == 0)
      return;
    ws.values.resize(rows, d);
    ops::gemm_bias(ctx, X, w_v_, b_v_, ws.values, ws.scratch);  // [T, d]
    // keys and values [S, d]: S = past + T, every position a new token may attend to
    const auto [span, keys, values] = detail::append_raw_rows(ctx, X, ws.values, cache, past);
    if (cache)
      reserve_features(ctx, ws, cache->capacity());  // once: S grows with every decoded token

    const T scale = T(1) / std::sqrt(static_cast<T>(dh));
    ws.lq.resize(rows, d + max_rank_);
    detail::grow_to(ws.lk, cache ? cache->capacity() : span, d + max_rank_);
    auto lk = ws.lk.topRows(span);         // [S, >= d + Rank]
    ops::copy(ctx, keys, lk.leftCols(d));  // the filter's key side, shared by every head
    ws.context.resize(rows, d);
    for (Index h = 0; h < heads(); ++h) {
      const auto& routing = routing_[static_cast<std::size_t>(h)];
      const auto& filter = filters_[static_cast<std::size_t>(h)];
      const Index r = routing.rank(), width = d + r;
      filter.query_features(ctx, X, ws.lq.leftCols(d), -scale);  // −(X D_h)/sqrt(d_h)
      routing.query_features(ctx, X, ws.lq.middleCols(d, r), ws.scratch);
      ops::scale(ctx, ws.lq.middleCols(d, r), scale);  // X [U V]/sqrt(d_h)
      routing.key_features(ctx, keys, lk.middleCols(d, r), ws.scratch);
      ops::causal_attention(ctx, ws.lq.leftCols(width), lk.leftCols(width),
                            values.middleCols(h * dh, dh), ws.context.middleCols(h * dh, dh), 1,
                            T(1), past, ws.scratch);
    }
    ops::gemm_bias(ctx, ws.context, w_out_, b_out_, Y, ws.scratch);  // [T, d]
  }

  Index features() const { return w_out_.rows(); }
  Index heads() const { return static_cast<Index>(routing_.size()); }
  Index head_dim() const { return heads() > 0 ? features() / heads() : 0; }
  const RoutingT& routing(Index h) const { return routing_.at(static_cast<std::size_t>(h)); }
  const FilterT& filter(Index h) const { return filters_.at(static_cast<std::size_t>(h)); }
  /// The value and output projections [d, d] in this backend's weight storage, and their
  /// biases [d].
  const Weight& w_v() const { return w_v_; }
  const Bias& b_v() const { return b_v_; }
  const Weight& w_out() const { return w_out_; }
  const Bias& b_out() const { return b_out_; }

  /// Free parameters: Σ_h (d·Rank_h + filter parameters) + 2·d² + 2·d.
  Index parameter_count() const {
    const Index d = features();
    Index n = 2 * d * d + 2 * d;
    for (Index h = 0; h < heads(); ++h)
      n += routing(h).parameter_count() + filter(h).parameter_count();
    return n;
  }

 private:
  // ShapeError unless the heads, their routings and filters and the projections fit d.
  void check_parts() {
    const Index d = w_out_.rows(), n = heads();
    if constexpr (size != Dynamic)
      check_dim("SDAttention: width (compile-time d)", size, d);
    if (n <= 0 || d % n != 0) {
      throw ShapeError(detail::expected_found("SDAttention: head count (routing objects)",
                                              "a positive divisor of d = " + std::to_string(d), n));
    }
    check_dim("SDAttention: head count (filter objects)", n, static_cast<Index>(filters_.size()));
    check_dim("SDAttention: w_out cols (d)", d, w_out_.cols());
    check_dim("SDAttention: w_v rows (d)", d, w_v_.rows());
    check_dim("SDAttention: w_v cols (d)", d, w_v_.cols());
    check_dim("SDAttention: b_v size (d)", d, b_v_.size());
    check_dim("SDAttention: b_out size (d)", d, b_out_.size());
    max_rank_ = 0;
    for (Index h = 0; h < n; ++h) {
      const std::string head = "SDAttention: head " + std::to_string(h);
      check_dim(head + " routing width (d)", d, routing_[static_cast<std::size_t>(h)].features());
      filters_[static_cast<std::size_t>(h)].check_width(head, d);
      max_rank_ = std::max(max_rank_, routing_[static_cast<std::size_t>(h)].rank());
    }
  }

  // Sizes ws.scratch for the routings' features of up to `rows` rows, once per (rows, rank).
  void reserve_features(Context<Backend>& ctx, Workspace& ws, Index rows) const {
    for (const auto& routing : routing_) {
      const std::pair<Index, Index> key{rows, routing.rank()};
      if (std::find(ws.reserved.begin(), ws.reserved.end(), key) != ws.reserved.end())
        continue;
      routing.reserve(ctx, ws.scratch, rows);
      ws.reserved.push_back(key);
    }
  }

  std::vector<RoutingT> routing_;
  std::vector<FilterT> filters_;
  Weight w_v_;
  Bias b_v_;
  Weight w_out_;
  Bias b_out_;
  Index max_rank_ = 0;
};

}  // namespace nlb
