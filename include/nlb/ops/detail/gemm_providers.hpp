// The calls of every GEMM provider library this build has (NLB_HAVE_<NAME>, defined by linking
// nlbudget::<name>): what ops::gemm and the measured provider dispatch to. Internal to nlb/ops.
#pragma once

#if defined(NLB_HAVE_OPENBLAS)
#include "nlb/ops/detail/gemm_openblas.hpp"
#endif
#if defined(NLB_HAVE_BLIS)
#include "nlb/ops/detail/gemm_blis.hpp"
#endif
#if defined(NLB_HAVE_ONEDNN)
#include "nlb/ops/detail/gemm_onednn.hpp"
#endif
#if defined(NLB_HAVE_LIBXSMM)
#include "nlb/ops/detail/gemm_libxsmm.hpp"
#endif
