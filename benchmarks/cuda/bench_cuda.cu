// The nvcc build of bench_cuda.cpp (the real CUDA backend).
#include "bench_cuda.cpp"
