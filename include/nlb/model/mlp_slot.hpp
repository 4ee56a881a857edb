// What a loaded (Dynamic-size) model's layer runs as its MLP: the full Mlp (GELU) or SwiGluMlp,
// a RidgeSurrogate or a GatedMLP, chosen at run time so tools can swap one layer and measure
// (DESIGN.md §3). Written once for every backend: MlpSlot<T, backend::cuda> holds the same kinds on
// the device.
#pragma once

#include <utility>
#include <variant>

#include "nlb/mlp/gated_mlp.hpp"
#include "nlb/mlp/hyperplane_gate.hpp"
#include "nlb/mlp/mlp.hpp"
#include "nlb/mlp/ridge_surrogate.hpp"
#include "nlb/mlp/swiglu_mlp.hpp"

namespace nlb {

/// A per-layer variant of the MLP kinds. forward() dispatches with std::visit once per call
/// (per layer and batch, never per token).
template <class T, class Backend = backend::cpu>
class MlpSlot {
 public:
  using Scalar = T;
  using backend_type = Backend;
  static constexpr int in_size = Dynamic;
  static constexpr int out_size = Dynamic;
  using MlpTanh = Mlp<T, Dynamic, Dynamic, GeluTanh, Backend>;
  using MlpErf = Mlp<T, Dynamic, Dynamic, GeluErf, Backend>;
  using SwiGlu = SwiGluMlp<T, Dynamic, Dynamic, Backend>;
  using Surrogate = RidgeSurrogate<T, Dynamic, Dynamic, Backend>;
  using Gate = HyperplaneGate<T, Dynamic, Backend>;
  using GatedTanh = GatedMLP<MlpTanh, Surrogate, Gate>;
  using GatedErf = GatedMLP<MlpErf, Surrogate, Gate>;
  using GatedSwiGlu = GatedMLP<SwiGlu, Surrogate, Gate>;
  using Variant =
      std::variant<MlpTanh, MlpErf, SwiGlu, Surrogate, GatedTanh, GatedErf, GatedSwiGlu>;
  using ConstView = typename storage_traits<Backend, T>::const_view;
  using View = typename storage_traits<Backend, T>::view;
  template <class B>
  using on_backend = MlpSlot<T, B>;

  /// Scratch memory for forward(): one workspace per kind (only the used one grows). Reuse it
  /// across calls: a batch no larger than an earlier one then allocates nothing.
  struct Workspace {
    typename MlpTanh::Workspace tanh;
    typename MlpErf::Workspace erf;
    typename SwiGlu::Workspace swiglu;
    typename Surrogate::Workspace surrogate;
    typename GatedTanh::Workspace gated_tanh;
    typename GatedErf::Workspace gated_erf;
    typename GatedSwiGlu::Workspace gated_swiglu;
  };

  MlpSlot() = default;
  template <class Kind>
  requires std::is_constructible_v<Variant, Kind&&> MlpSlot(Kind&& kind)
      : kind_(std::forward<Kind>(kind)) {}  // NOLINT: implicit by design

  /// The same slot on another backend: the held kind copied into this backend's storage.
  template <class From>
  requires(!std::is_same_v<From, Backend>) explicit MlpSlot(const MlpSlot<T, From>& other)
      : kind_(std::visit(
            [](const auto& kind) -> Variant {
              return on_backend_t<Backend, std::decay_t<decltype(kind)>>(kind);
            },
            other.kind())) {}

  /// Y = this layer's MLP(X). X, Y [T, d]. Returns the rows per path (all full for an MLP, all
  /// linear for a surrogate, the gate's split for a gated MLP): the contract of every MLP kind.
  /// Defined below the class (not inline), so that nlb_model_instances can compile it once.
  RouteCounts forward(Context<Backend>& ctx, const ConstView& X, View Y, Workspace& ws) const;

  /// Y = the held full MLP(X) (any of the three), for a gated override that routes rows to the
  /// layer's own MLP (Block::forward). Throws ArgumentError when the slot holds another kind.
  void forward_full(Context<Backend>& ctx, const ConstView& X, View Y, Workspace& ws) const;

  /// Width d (input and output).
  Index features() const {
    return std::visit([](const auto& mlp) { return mlp.features(); }, kind_);
  }

  const Variant& kind() const { return kind_; }
  Variant& kind() { return kind_; }
  /// True when this slot runs a full MLP (a GELU Mlp or a SwiGluMlp).
  bool is_full() const {
    return std::holds_alternative<MlpTanh>(kind_) || std::holds_alternative<MlpErf>(kind_) ||
           std::holds_alternative<SwiGlu>(kind_);
  }

  /// A GatedMLP of `full` (a full kind of this slot), `surrogate` and `gate`: the slot of a gated
  /// layer. ArgumentError when `full` is not a full MLP.
  static MlpSlot gated(MlpSlot full, Surrogate surrogate, Gate gate) {
    return std::visit(
        [&](auto&& mlp) -> MlpSlot {
          using Kind = std::decay_t<decltype(mlp)>;
          if constexpr (std::is_same_v<Kind, MlpTanh>)
            return GatedTanh(std::move(mlp), std::move(surrogate), std::move(gate));
          else if constexpr (std::is_same_v<Kind, MlpErf>)
            return GatedErf(std::move(mlp), std::move(surrogate), std::move(gate));
          else if constexpr (std::is_same_v<Kind, SwiGlu>)
            return GatedSwiGlu(std::move(mlp), std::move(surrogate), std::move(gate));
          else
            throw ArgumentError(detail::expected_found("MlpSlot::gated: the MLP to gate",
                                                       "a full MLP", "a surrogate or gated MLP"));
        },
        std::move(full.kind_));
  }

 private:
  template <class Kind>
  static auto& workspace_of(Workspace& ws) {
    if constexpr (std::is_same_v<Kind, Surrogate>) {
      return ws.surrogate;
    } else if constexpr (std::is_same_v<Kind, MlpTanh>) {
      return ws.tanh;
    } else if constexpr (std::is_same_v<Kind, MlpErf>) {
      return ws.erf;
    } else if constexpr (std::is_same_v<Kind, SwiGlu>) {
      return ws.swiglu;
    } else if constexpr (std::is_same_v<Kind, GatedTanh>) {
      return ws.gated_tanh;
    } else if constexpr (std::is_same_v<Kind, GatedSwiGlu>) {
      return ws.gated_swiglu;
    } else {
      static_assert(std::is_same_v<Kind, GatedErf>, "MlpSlot: every kind has a workspace");
      return ws.gated_erf;
    }
  }

  Variant kind_;
};

template <class T, class Backend>
RouteCounts MlpSlot<T, Backend>::forward(Context<Backend>& ctx, const ConstView& X, View Y,
                                         Workspace& ws) const {
  return std::visit(
      [&](const auto& mlp) -> RouteCounts {
        using Kind = std::decay_t<decltype(mlp)>;
        return mlp.forward(ctx, X, Y, workspace_of<Kind>(ws));
      },
      kind_);
}

template <class T, class Backend>
void MlpSlot<T, Backend>::forward_full(Context<Backend>& ctx, const ConstView& X, View Y,
                                       Workspace& ws) const {
  if (const auto* m = std::get_if<MlpTanh>(&kind_)) {
    m->forward(ctx, X, Y, ws.tanh);
  } else if (const auto* e = std::get_if<MlpErf>(&kind_)) {
    e->forward(ctx, X, Y, ws.erf);
  } else if (const auto* g = std::get_if<SwiGlu>(&kind_)) {
    g->forward(ctx, X, Y, ws.swiglu);
  } else {
    throw ArgumentError(detail::expected_found("MlpSlot::forward_full: the layer's MLP slot",
                                               "a full MLP", "a surrogate or gated MLP"));
  }
}

#ifdef NLB_EXTERN_MODEL_INSTANCES
// Compiled once in tools/instances/model_instances.cpp (docs/architecture.md, "Compile time").
extern template class MlpSlot<float>;
extern template class MlpSlot<double>;
#endif

}  // namespace nlb
