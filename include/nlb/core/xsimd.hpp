// Includes xsimd with GCC 12's spurious AVX-512 -Wuninitialized reports switched off
// (see diagnostics.hpp). GCC attributes those reports to the xsimd lines on the inlining
// chain, so the pragma must be active where <xsimd/xsimd.hpp> is first included: kernel
// headers include this file before anything else. If a translation unit has already
// included xsimd without the guard, this is a no-op and the build flags decide.
#pragma once

#include "nlb/core/detail/diagnostics.hpp"

NLB_XSIMD_GUARD_BEGIN
#include <xsimd/xsimd.hpp>
NLB_XSIMD_GUARD_END
