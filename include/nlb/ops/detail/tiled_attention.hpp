// Causal softmax attention of one head in tiles, without its [T, S] score matrix: the CPU
// implementation of ops::causal_attention (nlb/ops/attention.hpp). Internal to nlb/ops.
//
// The queries go in tiles of `tiles.queries` rows; for each, the keys it may attend to go in
// tiles of `tiles.keys` rows. A key tile's scores are one GEMM; the softmax over a row is
// streamed through the key tiles (kernels::softmax_tile: the running maximum m and sum l of
// exp(logit − m)); the output rows accumulate P·V per key tile, rescaled by exp(m_old − m_new)
// whenever a row's maximum grows, and are divided by l at the end. The arithmetic is the
// online softmax of Milakov and Gimelshein (arXiv:1805.02867) as tiled attention kernels use it
// (Dao et al., FlashAttention, arXiv:2205.14135). Key tiles past a query tile's last position are
// never computed, so the causal half of the scores and of P·V is skipped (about half the
// FLOPs of the [T, S] form at past = 0), and memory is O(tiles.queries · tiles.keys) per call,
// independent of T and S.
#pragma once

#include <algorithm>
#include <cmath>
#include <limits>
#include <vector>

#include "nlb/core/context.hpp"
#include "nlb/core/matrix.hpp"
#include "nlb/core/scratch_matrix.hpp"
#include "nlb/kernels/softmax.hpp"
#include "nlb/ops/gemm.hpp"

namespace nlb::ops::detail {

/// Tile sizes of tiled_causal_attention. The defaults keep a score tile (64 KiB of float) and
/// the key and value tiles it multiplies in L2; measured in bench_attention (BM_attention_block).
struct AttentionTiles {
  Index queries = 64;  // query rows per tile
  Index keys = 256;    // key rows per tile
};

/// Scratch of tiled_causal_attention; reuse it across calls (it allocates only on first use or
/// when the tile sizes grow).
template <class T>
struct TiledAttentionScratch {
  ScratchMatrix<T> scores;  // [queries, keys]: one tile's scores, then its unnormalised weights
  std::vector<T> maximum;   // [queries]: each row's running maximum
  std::vector<T> sum;       // [queries]: each row's running sum of exp(logit − maximum)
};

/// What one more thread needs to run heads of ops::causal_attention beside the calling thread:
/// its own score tile and packing buffers.
template <class T>
struct AttentionThreadScratch {
  TiledAttentionScratch<T> attention;
  GemmScratch<T> gemm;
};

/// out = softmax_causal(scale · q kᵀ) v for one head: q [T, w] the queries at positions
/// [past, past + T), k [past + T, w] and v [past + T, d_v] every key and value position, out
/// [T, d_v] (must not alias an operand); query i attends to keys j <= past + i. scale > 0.
/// Cost: about 2·T·(past + T/2)·(w + d_v) flops plus one exp per causal score.
template <class Backend, class T>
void tiled_causal_attention(const Context<Backend>& ctx, const Eigen::Ref<const RowMatrix<T>>& q,
                            const Eigen::Ref<const RowMatrix<T>>& k,
                            const Eigen::Ref<const RowMatrix<T>>& v, T scale, Index past,
                            Eigen::Ref<RowMatrix<T>> out, TiledAttentionScratch<T>& ws,
                            GemmScratch<T>& gemm, AttentionTiles tiles = {}) {
  const Backend backend;
  const Index rows = q.rows();
  eigen_assert(k.rows() == past + rows && v.rows() == k.rows() && k.cols() == q.cols());
  eigen_assert(out.rows() == rows && out.cols() == v.cols());
  eigen_assert(tiles.queries > 0 && tiles.keys > 0);
  if (ws.maximum.size() < static_cast<std::size_t>(tiles.queries)) {
    ws.maximum.resize(static_cast<std::size_t>(tiles.queries));
    ws.sum.resize(static_cast<std::size_t>(tiles.queries));
  }
  for (Index i0 = 0; i0 < rows; i0 += tiles.queries) {
    const Index n = std::min(tiles.queries, rows - i0);
    const Index end = past + i0 + n;   // this query tile sees keys [0, end)
    auto acc = out.middleRows(i0, n);  // [n, d_v]: Σ exp(logit − m) v, normalised at the end
    for (Index j0 = 0; j0 < end; j0 += tiles.keys) {
      const Index nk = std::min(tiles.keys, end - j0);
      auto s = ws.scores.view(n, nk);  // [n, nk]
      ops::gemm_nt(ctx, q.middleRows(i0, n), k.middleRows(j0, nk), s, gemm);
      for (Index r = 0; r < n; ++r) {
        const Index limit = std::min(nk, past + i0 + r + 1 - j0);  // keys row r sees here
        const auto ri = static_cast<std::size_t>(r);
        T* row = s.row(r).data();
        if (limit <= 0) {  // the whole tile lies after this query: it adds nothing
          std::fill(row, row + nk, T(0));
        } else if (j0 == 0) {  // the first tile (key 0 is visible to every query)
          const auto state = kernels::softmax_tile(backend, row, nk, limit, scale,
                                                   std::numeric_limits<T>::lowest());
          ws.maximum[ri] = state.maximum;
          ws.sum[ri] = state.sum;
        } else {
          const auto state = kernels::softmax_tile(backend, row, nk, limit, scale, ws.maximum[ri]);
          if (state.maximum != ws.maximum[ri]) {  // the row's maximum grew: rescale what it has
            const T shrink = std::exp(ws.maximum[ri] - state.maximum);
            ws.sum[ri] *= shrink;
            acc.row(r) *= shrink;
          }
          ws.maximum[ri] = state.maximum;
          ws.sum[ri] += state.sum;
        }
      }
      ops::gemm(ctx, s, v.middleRows(j0, nk), acc, gemm, /*accumulate=*/j0 > 0);
    }
    for (Index r = 0; r < n; ++r)
      acc.row(r) *= T(1) / ws.sum[static_cast<std::size_t>(r)];
  }
}

}  // namespace nlb::ops::detail
