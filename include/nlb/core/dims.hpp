// Compile-time or run-time sizes, following Eigen's convention.
#pragma once

#include <Eigen/Core>

namespace nlb {

/// A size only known at run time. Same value as Eigen::Dynamic, so sizes pass
/// straight through to Eigen matrix types.
inline constexpr int Dynamic = Eigen::Dynamic;

/// True when `N` is a compile-time size.
template <int N>
inline constexpr bool is_fixed_size = (N != Dynamic);

/// Product of two sizes (Dynamic if either is), e.g. the hidden width 4*D.
template <int A, int B>
inline constexpr int size_product = (A == Dynamic || B == Dynamic) ? Dynamic : A* B;

/// True when two sizes can describe the same dimension: equal, or either only known at run
/// time. Composites (GatedMLP, Block, BasicTransformer) assert it of their parts' widths.
template <int A, int B>
inline constexpr bool sizes_compatible = (A == Dynamic || B == Dynamic || A == B);

/// The more specific of two compatible sizes (the compile-time one if either is).
template <int A, int B>
inline constexpr int common_size = (A == Dynamic) ? B : A;

}  // namespace nlb
