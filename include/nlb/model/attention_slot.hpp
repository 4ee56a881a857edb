// What a loaded (Dynamic-size) model's layer runs as its attention: standard dense attention,
// S–D attention with a diagonal or a scalar filter (PAPERS §B2), or ELU+1 linear attention
// (PAPERS §B3), chosen at run time so tools can swap one layer and measure (DESIGN.md §3).
// The attention counterpart of MlpSlot; written once for every backend.
#pragma once

#include <string>
#include <tuple>
#include <type_traits>
#include <utility>
#include <variant>

#include "nlb/attention/dense_attention.hpp"
#include "nlb/attention/diagonal_filter.hpp"
#include "nlb/attention/factored_attention.hpp"
#include "nlb/attention/linear_attention.hpp"
#include "nlb/attention/sd_attention.hpp"
#include "nlb/attention/skew_routing.hpp"

namespace nlb {

namespace detail {
// std::tuple of every alternative's Workspace type.
template <class V>
struct slot_workspaces;
template <class... Kinds>
struct slot_workspaces<std::variant<Kinds...>> {
  using type = std::tuple<typename Kinds::Workspace...>;
};
}  // namespace detail

/// A per-layer variant of the attention kinds, all of width d fixed at run time:
///   Dense     DenseAttention<T, Dynamic>                       (GPT-2, GPT-NeoX)
///   SDDiagonal SDAttention<SkewSymmetricRouting<T, Dynamic>, DiagonalFilter<T, Dynamic>>
///   SDScalar   SDAttention<SkewSymmetricRouting<T, Dynamic>, ScalarFilter<T>>
///   Linear    LinearAttention<T, Dynamic>                      (ELU+1, no KV cache)
///   Factored  FactoredAttention<T, Dynamic>   (general low-rank score form: converted heads,
///             analysis/attention/conversions.hpp)
/// Implicitly constructible from each kind. forward() has DenseAttention's signature and
/// dispatches with std::visit once per call (per layer and batch, never per token); its cost is
/// the held kind's. The Workspace holds one workspace per kind (only the used one grows).
template <class T, class Backend = backend::cpu>
class AttentionSlot {
 public:
  using Scalar = T;
  using backend_type = Backend;
  static constexpr int size = Dynamic;
  using ConstView = typename storage_traits<Backend, T>::const_view;
  using View = typename storage_traits<Backend, T>::view;
  template <class B>
  using on_backend = AttentionSlot<T, B>;

  using Dense = DenseAttention<T, Dynamic, Backend>;
  using Routing = SkewSymmetricRouting<T, Dynamic, Backend>;
  using SDDiagonal = SDAttention<Routing, DiagonalFilter<T, Dynamic, Backend>, Backend>;
  using SDScalar = SDAttention<Routing, ScalarFilter<T, Backend>, Backend>;
  using Linear = LinearAttention<T, Dynamic, Backend>;
  using Factored = FactoredAttention<T, Dynamic, Backend>;
  using Variant = std::variant<Dense, SDDiagonal, SDScalar, Linear, Factored>;

  /// Scratch memory for forward(): one workspace per kind. Reuse it across calls.
  struct Workspace {
    typename detail::slot_workspaces<Variant>::type parts;
  };

  /// An empty Dense attention (width 0); assign a kind before use.
  AttentionSlot() = default;
  template <class Kind>
  requires std::is_constructible_v<Variant, Kind&&> AttentionSlot(Kind&& kind)
      : kind_(std::forward<Kind>(kind)) {}  // NOLINT: implicit by design

  /// The same slot on another backend: the held kind copied into this backend's storage.
  template <class From>
  requires(!std::is_same_v<From, Backend>) explicit AttentionSlot(
      const AttentionSlot<T, From>& other)
      : kind_(std::visit(
            [](const auto& kind) -> Variant {
              return on_backend_t<Backend, std::decay_t<decltype(kind)>>(kind);
            },
            other.kind())) {}

  /// Y = this layer's attention(X), X, Y [T, d], with the held kind's KV-cache semantics
  /// (Linear throws ArgumentError when given a cache). Shape errors as the held kind's.
  /// Defined below the class (not inline), so that nlb_model_instances can compile it once.
  void forward(Context<Backend>& ctx, const ConstView& X, View Y, Workspace& ws,
               KVCacheLayerOf<T, Backend>* cache = nullptr) const;

  /// Width d.
  Index features() const {
    return std::visit([](const auto& attn) { return attn.features(); }, kind_);
  }
  Index heads() const {
    return std::visit([](const auto& attn) { return attn.heads(); }, kind_);
  }
  Index head_dim() const {
    return std::visit([](const auto& attn) { return attn.head_dim(); }, kind_);
  }

  /// "dense", "sd-diagonal", "sd-scalar", "linear" or "factored".
  const char* kind_name() const {
    return std::visit(
        [](const auto& attn) -> const char* {
          using Kind = std::decay_t<decltype(attn)>;
          if constexpr (std::is_same_v<Kind, Dense>) {
            return "dense";
          } else if constexpr (std::is_same_v<Kind, SDDiagonal>) {
            return "sd-diagonal";
          } else if constexpr (std::is_same_v<Kind, SDScalar>) {
            return "sd-scalar";
          } else if constexpr (std::is_same_v<Kind, Factored>) {
            return "factored";
          } else {
            static_assert(std::is_same_v<Kind, Linear>, "AttentionSlot: name every kind");
            return "linear";
          }
        },
        kind_);
  }

  /// True when this slot holds `Kind`.
  template <class Kind>
  bool holds() const {
    return std::holds_alternative<Kind>(kind_);
  }
  /// The held `Kind`; ArgumentError naming the kind held when it is another one.
  template <class Kind>
  const Kind& get() const {
    const Kind* k = std::get_if<Kind>(&kind_);
    if (k == nullptr) {
      throw ArgumentError(detail::expected_found("AttentionSlot::get: attention kind",
                                                 "the requested kind", kind_name()));
    }
    return *k;
  }

  const Variant& kind() const { return kind_; }
  Variant& kind() { return kind_; }

 private:
  Variant kind_;
};

template <class T, class Backend>
void AttentionSlot<T, Backend>::forward(Context<Backend>& ctx, const ConstView& X, View Y,
                                        Workspace& ws, KVCacheLayerOf<T, Backend>* cache) const {
  std::visit(
      [&](const auto& attn) {
        using Kind = std::decay_t<decltype(attn)>;
        attn.forward(ctx, X, Y, std::get<typename Kind::Workspace>(ws.parts), cache);
      },
      kind_);
}

#ifdef NLB_EXTERN_MODEL_INSTANCES
// Compiled once in tools/instances/model_instances.cpp (docs/architecture.md, "Compile time").
extern template class AttentionSlot<float>;
extern template class AttentionSlot<double>;
#endif

}  // namespace nlb
