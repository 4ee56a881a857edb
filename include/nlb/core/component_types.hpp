// The member types that every component (the MLP kinds, the attention kinds, the filters, the
// gate) declares alike, written once: Block, GatedMLP and the slots read Scalar and
// backend_type, and callers bind their arguments through ConstView and View. A component of
// one's own may derive from it too (docs/architecture.md, "Component contracts").
#pragma once

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

}  // namespace nlb
