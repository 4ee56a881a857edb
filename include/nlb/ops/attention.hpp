// The attention products of the CPU backends (DESIGN.md §4): causal softmax attention of several
// heads at once, in tiles with a streamed softmax (ops/detail/tiled_attention.hpp), and causal
// ELU+1 linear attention by chunked prefix sums (ops/detail/linear_attention.hpp). The attention
// components (nlb/attention/) call these on every backend; nlb/cuda/ops.cuh has the same
// operations for backend::cuda.
#pragma once

#include <algorithm>
#include <exception>
#include <string>
#include <utility>
#if defined(_OPENMP)
#include <omp.h>
#endif

#include "nlb/core/backend.hpp"
#include "nlb/core/checks.hpp"
#include "nlb/core/context.hpp"
#include "nlb/core/errors.hpp"
#include "nlb/core/matrix.hpp"
#include "nlb/ops/detail/attention_heads.hpp"
#include "nlb/ops/detail/linear_attention.hpp"
#include "nlb/ops/detail/tiled_attention.hpp"
#include "nlb/ops/gemm.hpp"
#include "nlb/ops/scratch.hpp"

namespace nlb::ops {

/// out = softmax_causal(scale · q_h k_gᵀ) v_g for every query head h and its key/value head
/// g = h / (H / H_kv): q [T, H·w_q] the queries at positions [past, past + T), k [past + T,
/// H_kv·w_q] and v [past + T, H_kv·w_v] every key and value position, out [T, H·w_v] (must not
/// alias an operand); head h owns columns [h·w, (h+1)·w) of q and out, g those of k and v
/// (H_kv = H: multi-head attention; H_kv < H, read from k's width: grouped-query attention,
/// detail::HeadLayout). Query i attends to keys j <= past + i. Only the causal scores are
/// computed, in tiles, and no [T, S] score matrix is formed. Cost: about
/// 2·T·(past + T/2)·(w_q + w_v)·H flops plus one exp per causal score. ShapeError on mismatched
/// shapes.
///
/// With a context of n > 1 threads, in a program built with OpenMP, the heads are split into n
/// contiguous ranges, one per OpenMP thread, each thread's products on one thread (the provider's
/// pool is set to one for the team) with its own scratch: each head's arithmetic is then exactly
/// that of a one-thread context. Calls under 2¹⁶ multiply-adds per thread, and calls from inside
/// a parallel region, stay on the calling thread.
template <class Backend, class Q, class K, class V, class Out, class T>
requires backend::is_host<Backend>
void causal_attention(const Context<Backend>& ctx, const Q& q, const K& k, const V& v, Out&& out,
                      Index heads, T scale, Index past, HostScratch<T>& scratch) {
  const auto layout =
      detail::check_heads("ops::causal_attention", heads, q.rows(), q.cols(), k.rows(), k.cols(),
                          v.rows(), v.cols(), out.rows(), out.cols(), past);
  const Index wq = layout.w_q, wv = layout.w_v;
  const auto run_heads = [&](const Context<Backend>& head_ctx, Index begin, Index end,
                             detail::TiledAttentionScratch<T>& tiles, GemmScratch<T>& gemm) {
    for (Index h = begin; h < end; ++h) {
      const Index g = layout.kv_head(h);
      detail::tiled_causal_attention<Backend, T>(
          head_ctx, q.middleCols(h * wq, wq), k.middleCols(g * wq, wq), v.middleCols(g * wv, wv),
          scale, past, out.middleCols(h * wv, wv), tiles, gemm);
    }
  };
#if defined(_OPENMP)
  const int team = static_cast<int>(std::min<Index>(ctx.threads(), heads));
  // Multiply-adds of the causal scores and their weighted values, all heads.
  const double work = static_cast<double>(heads) * static_cast<double>(q.rows()) *
                      static_cast<double>(past + q.rows()) * static_cast<double>(wq + wv) / 2;
  if (team > 1 && !omp_in_parallel() &&
      work >= static_cast<double>(detail::parallel_vector_min_work) * team) {
    if (scratch.attention_threads.size() < static_cast<std::size_t>(team - 1))
      scratch.attention_threads.resize(static_cast<std::size_t>(team - 1));
    Context<Backend> one(ctx);
    one.set_threads(1);
    apply_threads(one);  // before the team starts, so no thread changes the pool inside it
    std::exception_ptr failure;
#pragma omp parallel num_threads(team)
    {
      const Index threads = omp_get_num_threads(), part = omp_get_thread_num();
      auto& mine = part == 0
                       ? scratch.attention
                       : scratch.attention_threads[static_cast<std::size_t>(part - 1)].attention;
      GemmScratch<T>& gemm =
          part == 0 ? static_cast<GemmScratch<T>&>(scratch)
                    : scratch.attention_threads[static_cast<std::size_t>(part - 1)].gemm;
      try {
        run_heads(one, heads * part / threads, heads * (part + 1) / threads, mine, gemm);
      } catch (...) {  // an exception must not leave the parallel region
#pragma omp critical(nlb_causal_attention_failure)
        failure = std::current_exception();
      }
    }
    if (failure)
      std::rethrow_exception(failure);
    return;
  }
#endif
  run_heads(ctx, 0, heads, scratch.attention, scratch);
}

/// Causal ELU+1 linear attention of every head (PAPERS.md §B3) on features fq, fk [T, H·w_k]
/// (φ already applied: entries > 0) and values v [T, H·w_v]: out [T, H·w_v], head h's row i
/// φq_i Σ_{j<=i} φk_jᵀ v_j / (φq_i Σ_{j<=i} φk_jᵀ) over its own columns. Chunked prefix sums of
/// 64 rows: O(T·w_k·(w_v + 64)) per head. ShapeError on mismatched shapes.
template <class Backend, class Q, class K, class V, class Out, class T>
requires backend::is_host<Backend>
void linear_attention(const Context<Backend>&, const Q& fq, const K& fk, const V& v, Out&& out,
                      Index heads, HostScratch<T>& scratch) {
  const auto layout =
      detail::check_heads("ops::linear_attention", heads, fq.rows(), fq.cols(), fk.rows(),
                          fk.cols(), v.rows(), v.cols(), out.rows(), out.cols(), 0);
  if (layout.kv_heads != heads)  // the features of one head are its own queries' and keys'
    check_dim("ops::linear_attention: key width (query width)", fq.cols(), fk.cols());
  const Index wk = layout.w_q, wv = layout.w_v;
  for (Index h = 0; h < heads; ++h) {
    detail::linear_attention_features<T>(fq.middleCols(h * wk, wk), fk.middleCols(h * wk, wk),
                                         v.middleCols(h * wv, wv), out.middleCols(h * wv, wv),
                                         scratch.linear_state, scratch.linear_sums,
                                         scratch.linear_chunk);
  }
}

}  // namespace nlb::ops
