// The head layout of the attention ops and its checks, shared by the CPU's (nlb/ops/attention.hpp)
// and the device's (nlb/cuda/row_ops.cuh): one contract, one set of messages.
#pragma once

#include <string>

#include "nlb/core/errors.hpp"
#include "nlb/core/matrix.hpp"

namespace nlb::ops::detail {

/// How the columns of q, k, v and out split into heads. Grouped-query attention (Llama 2 70B and
/// later, Qwen2, Mistral) when kv_heads < heads: query head h reads key/value head h / group(),
/// so the `group` query heads of one key/value head are adjacent, as Hugging Face's repeat_kv
/// expands them. kv_heads == heads is ordinary multi-head attention.
struct HeadLayout {
  Index heads, kv_heads;  // query heads H, key/value heads H_kv (a divisor of H)
  Index w_q, w_v;         // per head: query/key width, value/output width
  Index group() const { return heads / kv_heads; }
  Index kv_head(Index h) const { return h / group(); }
};

/// The layout of q [T, H·w_q], k [S, H_kv·w_q], v [S, H_kv·w_v], out [T, H·w_v] with `heads` = H
/// query heads, H_kv read from k's width, and S = past + T. ShapeError, naming `what` and the
/// operand, unless H > 0 divides q's width, H_kv is a positive divisor of H, and every shape fits.
inline HeadLayout check_heads(const char* what, Index heads, Index q_rows, Index q_cols,
                              Index k_rows, Index k_cols, Index v_rows, Index v_cols,
                              Index out_rows, Index out_cols, Index past) {
  // The messages are built only on a failure: this runs once per layer and decoded token.
  const auto named = [what](const std::string& entry) { return std::string(what) + ": " + entry; };
  if (heads <= 0 || q_cols % heads != 0)
    throw ShapeError(nlb::detail::expected_found(named("head count"),
                                                 "a positive divisor of the query width", heads));
  const Index w_q = q_cols / heads;
  const Index kv_heads = w_q > 0 ? k_cols / w_q : heads;
  if (kv_heads <= 0 || kv_heads * w_q != k_cols || heads % kv_heads != 0)
    throw ShapeError(nlb::detail::expected_found(
        named("key width (key/value heads × query head width " + std::to_string(w_q) + ")"),
        "a multiple dividing the query width " + std::to_string(q_cols), k_cols));
  if (v_cols % kv_heads != 0)
    throw ShapeError(nlb::detail::expected_found(
        named("value width"), "a multiple of the " + std::to_string(kv_heads) + " key/value heads",
        v_cols));
  const Index w_v = v_cols / kv_heads;
  if (k_rows != past + q_rows || v_rows != k_rows || out_rows != q_rows ||
      out_cols != heads * w_v) {
    check_dim(named("key rows (past + T)"), past + q_rows, k_rows);
    check_dim(named("value rows (key rows)"), k_rows, v_rows);
    check_dim(named("output rows (T)"), q_rows, out_rows);
    check_dim(named("output width (heads × value head width)"), heads * w_v, out_cols);
  }
  return {heads, kv_heads, w_q, w_v};
}

}  // namespace nlb::ops::detail
