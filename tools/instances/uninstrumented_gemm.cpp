// The definitions that uninstrumented_gemm.hpp declares, compiled with -fno-sanitize=all
// (tools/instances/CMakeLists.txt).
#define NLB_UNINSTRUMENTED_GEMM_DEFINITIONS
#include "uninstrumented_gemm.hpp"

NLB_GEMM_INSTANCES(, float)
NLB_GEMM_INSTANCES(, double)
