// NLB_UNROLL_LOOP before a loop asks GCC to unroll it (up to 16 times), so that loop-indexed
// registers (row pointers, accumulators) stay registers. nvcc, which compiles these headers for
// the CUDA build's host code, does not know GCC's pragma: there it expands to nothing.
#pragma once

#if defined(__CUDACC__)
#define NLB_UNROLL_LOOP
#else
#define NLB_UNROLL_LOOP _Pragma("GCC unroll 16")
#endif
