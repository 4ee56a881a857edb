// The nvcc build of test_cuda_ops.cpp (the same suite on the real CUDA backend).
#include "test_cuda_ops.cpp"
