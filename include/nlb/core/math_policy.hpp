// Math policies: which implementation of transcendental functions a kernel uses.
#pragma once

#include <type_traits>

namespace nlb::math {

/// std:: functions in the scalar backend, xsimd's accurate (≈1 ulp) versions in SIMD.
/// The default everywhere; what the PyTorch comparisons are made with.
struct exact {};

/// Cheaper approximations (for tanh: a clamped rational form). Relative error is
/// bounded in the kernel's documentation; opt-in only.
struct fast {};

/// True for the math policies above.
template <class Math>
inline constexpr bool is_policy = std::is_same_v<Math, exact> || std::is_same_v<Math, fast>;

}  // namespace nlb::math
