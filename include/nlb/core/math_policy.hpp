// Math policies: which implementation of transcendental functions a kernel uses.
#pragma once

namespace nlb::math {

/// std:: functions in the scalar backend, xsimd's accurate (≈1 ulp) versions in SIMD.
/// The default everywhere; what the PyTorch comparisons are made with.
struct exact {};

/// Cheaper approximations (for tanh: a clamped rational form). Relative error is
/// bounded in the kernel's documentation; opt-in only.
struct fast {};

}  // namespace nlb::math
