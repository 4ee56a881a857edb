// Activation taps: read-only hooks into a forward pass, free when unused.
#pragma once

#include <string_view>
#include <type_traits>

#include "nlb/core.hpp"

namespace nlb {

/// Where in the model a tap fires. Per layer, in this order: block_input, attn_output
/// (after the output projection, before the residual add), mlp_input (after the pre-MLP
/// LayerNorm: the x of PAPERS §A1), mlp_output (before the residual add), block_output.
/// `embedding` fires once before layer 0 with the token (+ position) embedding.
enum class Tap { embedding, block_input, attn_output, mlp_input, mlp_output, block_output };

/// The fixture name of a tap: "embedding", "block_input", ...
constexpr std::string_view to_string(Tap tap) {
  switch (tap) {
    case Tap::embedding:
      return "embedding";
    case Tap::block_input:
      return "block_input";
    case Tap::attn_output:
      return "attn_output";
    case Tap::mlp_input:
      return "mlp_input";
    case Tap::mlp_output:
      return "mlp_output";
    case Tap::block_output:
      return "block_output";
  }
  return "unknown";
}

/// The default tap: does nothing, and the forward pass compiles its calls away.
struct NoTaps {
  template <class Matrix>
  void operator()(Tap, Index /*layer*/, const Matrix&) const {}
};

namespace detail {
template <class Taps>
inline constexpr bool is_no_taps = std::is_same_v<std::remove_cvref_t<Taps>, NoTaps>;

// Calls taps(tap, layer, m) unless Taps is NoTaps (no call, no argument evaluation).
template <class Taps, class Matrix>
inline void fire(Taps& taps, Tap tap, Index layer, const Matrix& m) {
  if constexpr (!is_no_taps<Taps>)
    taps(tap, layer, m);
}
}  // namespace detail

}  // namespace nlb
