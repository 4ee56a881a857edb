// The member types that every component (the MLP kinds, the attention kinds, the filters, the
// gate) declares alike, written once: Block, GatedMLP and the slots read Scalar and
// backend_type, and callers bind their arguments through ConstView and View. A component of
// one's own may derive from it too (docs/architecture.md, "Component contracts").
#pragma once

#include <type_traits>

#include "nlb/core/storage.hpp"

namespace nlb {

/// Scalar, backend_type and the argument views of a component computing in T on Backend. A
/// component derives from it and names the views it uses in its own signatures with
/// `using typename Types::ConstView;` (names of a dependent base are not found unqualified).
template <class T, class Backend>
struct ComponentTypes {
  using Scalar = T;
  using backend_type = Backend;
  // Arguments bind as width-Dynamic views, never as fixed-width ones: a fixed-width Eigen::Ref
  // bound to data of another width is undefined behaviour in release builds (Eigen only
  // asserts), so the width could not be checked. With these the components' width checks are
  // real.
  using ConstView = typename storage_traits<Backend, T>::const_view;
  using View = typename storage_traits<Backend, T>::view;
};

/// True when components A and B compute in one scalar type (their Scalar). Composites (GatedMLP,
/// Block) assert it of each pair of parts, so the message names the pair that differs.
template <class A, class B>
inline constexpr bool same_scalar = std::is_same_v<typename A::Scalar, typename B::Scalar>;

/// True when components A and B run on one backend (their backend_type).
template <class A, class B>
inline constexpr bool same_backend =
    std::is_same_v<typename A::backend_type, typename B::backend_type>;

}  // namespace nlb
