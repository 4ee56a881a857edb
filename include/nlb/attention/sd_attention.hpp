// S–D attention (PAPERS.md §B2; docs/attention.md): multi-head causal attention whose logits are
// a skew-symmetric routing term minus a non-negative diagonal filter term, both acting on the
// attention input itself, with value and output projections as usual. A drop-in for
// DenseAttention inside nlb::Block.
#pragma once

#include <cmath>
#include <string>
#include <type_traits>
#include <utility>
#include <vector>

#include "nlb/attention/detail/tiled_attention.hpp"
#include "nlb/attention/diagonal_filter.hpp"
#include "nlb/attention/kv_cache.hpp"
#include "nlb/attention/skew_routing.hpp"
#include "nlb/core.hpp"
#include "nlb/ops/gemm.hpp"

namespace nlb {

/// Multi-head causal S–D attention over X [T, d] (ours: the "residual-space policy": S_h and
/// D_h act on the d-dim input x itself, there are no query/key projections and no biases in
/// the scores). With H heads, d_h = d / H, and for head h a routing S_h (RoutingT, e.g.
/// SkewSymmetricRouting<T, Rank>) and a filter D_h (FilterT: DiagonalFilter or ScalarFilter):
///   ℓ_ij = x_i (S_h − D_h) x_jᵀ / sqrt(d_h)   for j <= i,   P_h = softmax_j(ℓ),
///   V = X w_v + b_v [T, d];  C[:, h·d_h : (h+1)·d_h] = P_h V[:, h·d_h : (h+1)·d_h];
///   Y = C w_out + b_out [T, d].
/// Per head the logits are one causal GEMM of fused features
///   [−X D_h | X U_h | X V_h] / sqrt(d_h)  times  [X | X V_h | −X U_h]ᵀ
/// (inner size d + Rank), run in tiles with a streamed softmax (detail::tiled_causal_attention,
/// no [T, S] score matrix): the diagonal filter is full rank, so a head's scores cost
/// T²·(d + Rank)/2 multiply-adds, against T²·d_h/2 for a dense head; the value and output
/// projections cost 4·T·d² FLOPs.
/// KV cache (ours): the cache's "keys" rows hold the raw input rows x_j, its "values" rows hold
/// the V rows; the routing features of every cached key are recomputed each call
/// (O(S·d·Rank) per head, S = past + T).
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
  static constexpr int size = FilterT::size;  // d when the filter fixes it, else Dynamic
  using Input = Activations<Scalar, size>;
  using Output = Activations<Scalar, size>;
  // Width-Dynamic references, as in DenseAttention: a wrong width is a ShapeError, not UB.
  using AnyInput = Activations<Scalar>;
  using AnyOutput = Activations<Scalar>;

  /// Scratch memory for forward(); reuse it across calls. After a call with T rows and S
  /// positions, a call with T rows and at most S positions allocates nothing (the key features
  /// and scores grow with the KV cache, so they are grow-only storage used through views).
  struct Workspace {
    Activations<Scalar> values;  // [T, d]
    RowMatrix<Scalar> lq;        // [T, d + Rank]: one head's query-side features
    ScratchMatrix<Scalar> lk;    // [S, d + Rank]: key-side features (the keys, then routing)
    detail::TiledAttentionScratch<Scalar> attention;  // one score tile, its running softmax
    Activations<Scalar> context;                      // [T, d]
    GemmScratch<Scalar> gemm;                         // packing buffers of the projections and P V
    typename RoutingT::FeatureWorkspace features;     // the routing's key features
  };

  SDAttention() = default;

  /// One routing and one filter per head (heads = routing.size()), w_v, w_out [d, d] and
  /// b_v, b_out [d] in Y = X W + b layout. ShapeError when the head counts differ, H does not
  /// divide d, or a routing, filter or weight does not have width d (or the fixed width).
  SDAttention(std::vector<RoutingT> routing, std::vector<FilterT> filters, RowMatrix<Scalar> w_v,
              RowVector<Scalar> b_v, RowMatrix<Scalar> w_out, RowVector<Scalar> b_out)
      : routing_(std::move(routing)),
        filters_(std::move(filters)),
        w_v_(std::move(w_v)),
        b_v_(std::move(b_v)),
        w_out_(std::move(w_out)),
        b_out_(std::move(b_out)) {
    const Index d = w_out_.rows(), heads = static_cast<Index>(routing_.size());
    if constexpr (size != Dynamic)
      check_dim("SDAttention: width (compile-time d)", size, d);
    if (heads <= 0 || d % heads != 0) {
      throw ShapeError(detail::expected_found("SDAttention: head count (routing objects)",
                                              "a positive divisor of d = " + std::to_string(d),
                                              heads));
    }
    check_dim("SDAttention: head count (filter objects)", heads,
              static_cast<Index>(filters_.size()));
    check_dim("SDAttention: w_out cols (d)", d, w_out_.cols());
    check_dim("SDAttention: w_v rows (d)", d, w_v_.rows());
    check_dim("SDAttention: w_v cols (d)", d, w_v_.cols());
    check_dim("SDAttention: b_v size (d)", d, b_v_.size());
    check_dim("SDAttention: b_out size (d)", d, b_out_.size());
    for (Index h = 0; h < heads; ++h) {
      const std::string head = "SDAttention: head " + std::to_string(h);
      check_dim(head + " routing width (d)", d, routing_[static_cast<std::size_t>(h)].features());
      filters_[static_cast<std::size_t>(h)].check_width(head, d);
      max_rank_ = std::max(max_rank_, routing_[static_cast<std::size_t>(h)].rank());
    }
  }

  /// Y = attention(X), X, Y [T, d]. Without a cache X holds positions [0, T); with one, X's
  /// tokens follow the cached ones, and X's rows and V rows are appended to the cache's keys
  /// and values (ArgumentError when full; ShapeError when its width is not d).
  void forward(const Eigen::Ref<const AnyInput>& X, Eigen::Ref<AnyOutput> Y, Workspace& ws,
               KVCacheLayer<Scalar>* cache = nullptr) const {
    using T = Scalar;
    const Index d = features(), rows = X.rows(), dh = head_dim();
    check_dim("SDAttention::forward: input width (d)", d, X.cols());
    check_dim("SDAttention::forward: output rows (T)", rows, Y.rows());
    check_dim("SDAttention::forward: output width (d)", d, Y.cols());
    const Index past = cache ? cache->length : 0;
    if (cache) {
      check_dim("SDAttention::forward: cache key width (d)", d, cache->keys.cols());
      check_dim("SDAttention::forward: cache value width (d)", d, cache->values.cols());
      if (past + rows > cache->capacity()) {
        throw ArgumentError(detail::expected_found("SDAttention::forward: cache positions",
                                                   "at most " + std::to_string(cache->capacity()),
                                                   past + rows));
      }
    }
    ws.values.resize(rows, d);
    ops::gemm_bias(Backend{}, ws.values, X, w_v_, b_v_, ws.gemm);
    const Index span = past + rows;
    if (cache) {
      cache->keys.middleRows(past, rows) = X;
      cache->values.middleRows(past, rows) = ws.values;
      cache->length = span;
    }
    const Eigen::Ref<const AnyInput> keys =
        cache ? Eigen::Ref<const AnyInput>(cache->keys.topRows(span)) : X;
    const Eigen::Ref<const AnyInput> values =
        cache ? Eigen::Ref<const AnyInput>(cache->values.topRows(span))
              : Eigen::Ref<const AnyInput>(ws.values);

    const T scale = T(1) / std::sqrt(static_cast<T>(dh));
    ws.lq.resize(rows, d + max_rank_);
    if (cache) {  // once: S grows with every decoded token
      ws.lk.reserve(cache->capacity() * (d + max_rank_));
      for (const auto& routing : routing_)
        routing.reserve(ws.features, cache->capacity());
    }
    auto lk = ws.lk.view(span, d + max_rank_);
    lk.leftCols(d) = keys;  // the filter's key side, shared by every head
    ws.context.resize(rows, d);
    for (Index h = 0; h < heads(); ++h) {
      const auto& routing = routing_[static_cast<std::size_t>(h)];
      const auto& filter = filters_[static_cast<std::size_t>(h)];
      const Index r = routing.rank(), width = d + r;
      filter.query_features(X, ws.lq.leftCols(d));
      ws.lq.leftCols(d) *= -scale;
      routing.query_features(X, ws.lq.middleCols(d, r));
      ws.lq.middleCols(d, r) *= scale;
      routing.key_features(keys, lk.middleCols(d, r), ws.features);
      detail::tiled_causal_attention<Backend, T>(
          Backend{}, ws.lq.leftCols(width), lk.leftCols(width), values.middleCols(h * dh, dh), T(1),
          past, ws.context.middleCols(h * dh, dh), ws.attention, ws.gemm);
    }
    ops::gemm_bias(Backend{}, Y, ws.context, w_out_, b_out_, ws.gemm);
  }

  Index features() const { return w_out_.rows(); }
  Index heads() const { return static_cast<Index>(routing_.size()); }
  Index head_dim() const { return heads() > 0 ? features() / heads() : 0; }
  const RoutingT& routing(Index h) const { return routing_.at(static_cast<std::size_t>(h)); }
  const FilterT& filter(Index h) const { return filters_.at(static_cast<std::size_t>(h)); }
  const RowMatrix<Scalar>& w_v() const { return w_v_; }
  const RowVector<Scalar>& b_v() const { return b_v_; }
  const RowMatrix<Scalar>& w_out() const { return w_out_; }
  const RowVector<Scalar>& b_out() const { return b_out_; }

  /// Free parameters: Σ_h (d·Rank_h + filter parameters) + 2·d² + 2·d.
  Index parameter_count() const {
    const Index d = features();
    Index n = 2 * d * d + 2 * d;
    for (Index h = 0; h < heads(); ++h)
      n += routing(h).parameter_count() + filter(h).parameter_count();
    return n;
  }

 private:
  std::vector<RoutingT> routing_;
  std::vector<FilterT> filters_;
  RowMatrix<Scalar> w_v_;
  RowVector<Scalar> b_v_;
  RowMatrix<Scalar> w_out_;
  RowVector<Scalar> b_out_;
  Index max_rank_ = 0;
};

}  // namespace nlb
