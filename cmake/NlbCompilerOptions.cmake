# Options for in-tree targets only (tests, benchmarks, examples, tools).
# The exported nlbudget target carries no warning or ISA flags: those are the consumer's choice.

function(nlb_apply_project_options target)
  target_compile_options(${target} PRIVATE -Wall -Wextra -Wpedantic -Wshadow -Wconversion
                         -Wno-sign-conversion)
  # GCC 12.2 reports false "(may be) used uninitialized" inside its own avx512fintrin.h when
  # Eigen's or xsimd's AVX-512 code is inlined (GCC bug 105593, fixed in 12.3); the report
  # lands on whichever caller inlines it, so it cannot be silenced per header.
  if(CMAKE_CXX_COMPILER_ID STREQUAL "GNU" AND CMAKE_CXX_COMPILER_VERSION VERSION_LESS 12.3)
    target_compile_options(${target} PRIVATE -Wno-uninitialized -Wno-maybe-uninitialized)
  endif()
  if(NLB_WARNINGS_AS_ERRORS)
    target_compile_options(${target} PRIVATE -Werror)
  endif()
  if(NLB_ISA_FLAGS)
    separate_arguments(_nlb_isa UNIX_COMMAND "${NLB_ISA_FLAGS}")
    target_compile_options(${target} PRIVATE ${_nlb_isa})
  endif()
  # Sanitizer builds: Eigen's GEMM kernel comes uninstrumented from one library (72x faster
  # there; tools/instances/uninstrumented_gemm.hpp says what loses its checks).
  if(NLB_UNINSTRUMENTED_GEMM AND NOT target STREQUAL "nlb_uninstrumented_gemm")
    target_compile_options(${target} PRIVATE -include
                           "${PROJECT_SOURCE_DIR}/tools/instances/uninstrumented_gemm.hpp")
    target_link_libraries(${target} PRIVATE nlb_uninstrumented_gemm)
  endif()
endfunction()

# In-tree programs that load models link the model code compiled once (tools/instances) instead
# of compiling it in each translation unit (nlb/model/model_instances.hpp). Benchmarks do not:
# they measure the code as a consumer compiles it, some with OpenMP.
# NLB_MODEL_INSTANCES=OFF (the portable preset, whose suites are kernels and components: one of
# them includes a model block) compiles what a target uses in its own translation units instead.
function(nlb_use_model_instances target)
  if(NOT NLB_MODEL_INSTANCES)
    return()
  endif()
  target_compile_definitions(${target} PRIVATE NLB_EXTERN_MODEL_INSTANCES
                                                NLB_EXTERN_ANALYSIS_INSTANCES)
  target_link_libraries(${target} PRIVATE nlb_model_instances)
endfunction()

# CUDA sources of in-tree targets (docs/cuda.md): the project's warnings, passed to the host
# compiler through -Xcompiler (nvcc rejects GCC's options given directly), as errors. C++20 comes
# from nlbudget::cuda.
function(nlb_apply_cuda_options target)
  target_compile_options(${target} PRIVATE
    $<$<COMPILE_LANGUAGE:CUDA>:-Xcompiler=-Wall,-Wextra,-Wshadow,-Wconversion,-Wno-sign-conversion>)
  if(NLB_WARNINGS_AS_ERRORS)
    target_compile_options(${target} PRIVATE $<$<COMPILE_LANGUAGE:CUDA>:--Werror=all-warnings>)
  endif()
  # The host code of a .cu file gets the ISA flags of the C++ files it links with: Eigen's heap
  # alignment (EIGEN_MAX_ALIGN_BYTES) follows them, and a matrix allocated in one translation
  # unit and freed in another must agree on it.
  if(NLB_ISA_FLAGS)
    separate_arguments(_nlb_isa UNIX_COMMAND "${NLB_ISA_FLAGS}")
    foreach(flag IN LISTS _nlb_isa)
      target_compile_options(${target} PRIVATE $<$<COMPILE_LANGUAGE:CUDA>:-Xcompiler=${flag}>)
    endforeach()
    # GCC 12.2's false reports inside avx512fintrin.h (nlb_apply_project_options above).
    if(CMAKE_CXX_COMPILER_ID STREQUAL "GNU" AND CMAKE_CXX_COMPILER_VERSION VERSION_LESS 12.3)
      target_compile_options(${target} PRIVATE
        $<$<COMPILE_LANGUAGE:CUDA>:-Xcompiler=-Wno-uninitialized,-Wno-maybe-uninitialized>)
    endif()
  endif()
endfunction()
