# Install + export: nlbudgetConfig.cmake, a SameMajorVersion version file, and nlbudget.pc.
include(CMakePackageConfigHelpers)

set(NLB_INSTALLED_TARGETS nlbudget)
foreach(provider IN LISTS NLB_GEMM_PROVIDERS_BUILT)
  list(APPEND NLB_INSTALLED_TARGETS nlbudget_${provider})
endforeach()
install(TARGETS ${NLB_INSTALLED_TARGETS} EXPORT nlbudgetTargets)
install(DIRECTORY "${PROJECT_SOURCE_DIR}/include/nlb" DESTINATION "${CMAKE_INSTALL_INCLUDEDIR}")
install(FILES "${NLB_GENERATED_INCLUDE_DIR}/nlb/version.hpp"
        DESTINATION "${CMAKE_INSTALL_INCLUDEDIR}/nlb")

set(NLB_CMAKE_INSTALL_DIR "${CMAKE_INSTALL_DATADIR}/cmake/nlbudget")
install(EXPORT nlbudgetTargets NAMESPACE nlbudget:: DESTINATION "${NLB_CMAKE_INSTALL_DIR}")
# The CUDA backend's target in an export set of its own: loaded only by
# find_package(nlbudget COMPONENTS cuda), which first finds the CUDA toolkit (CUDA::cublas).
install(TARGETS nlbudget_cuda EXPORT nlbudgetCudaTargets)
install(EXPORT nlbudgetCudaTargets NAMESPACE nlbudget:: DESTINATION "${NLB_CMAKE_INSTALL_DIR}")

configure_package_config_file(
  "${PROJECT_SOURCE_DIR}/cmake/nlbudgetConfig.cmake.in"
  "${PROJECT_BINARY_DIR}/nlbudgetConfig.cmake"
  INSTALL_DESTINATION "${NLB_CMAKE_INSTALL_DIR}")
write_basic_package_version_file(
  "${PROJECT_BINARY_DIR}/nlbudgetConfigVersion.cmake"
  COMPATIBILITY SameMajorVersion ARCH_INDEPENDENT)
install(FILES "${PROJECT_BINARY_DIR}/nlbudgetConfig.cmake"
              "${PROJECT_BINARY_DIR}/nlbudgetConfigVersion.cmake"
              "${PROJECT_SOURCE_DIR}/cmake/NlbDependencies.cmake"
              "${PROJECT_SOURCE_DIR}/cmake/Findutf8proc.cmake"
        DESTINATION "${NLB_CMAKE_INSTALL_DIR}")

# nlb/text adds libutf8proc (its pkg-config name on Debian) when it was built in.
set(NLB_PC_TEXT_REQUIRES "")
if(NLB_WITH_TEXT)
  set(NLB_PC_TEXT_REQUIRES ", libutf8proc")
endif()
# The default GEMM provider's header directories, definitions and libraries (none for Eigen;
# every library found for measured).
set(NLB_PC_GEMM_CFLAGS "")
set(NLB_PC_GEMM_LIBS "")
foreach(library IN LISTS NLB_DEFAULT_GEMM_LIBRARIES)
  string(TOUPPER "${library}" upper)
  string(APPEND NLB_PC_GEMM_CFLAGS " -I${NLB_${upper}_INCLUDE_DIR} -DNLB_HAVE_${upper}")
  string(APPEND NLB_PC_GEMM_LIBS " ${NLB_${upper}_LIBRARY}")
  if(library STREQUAL "onednn")
    string(APPEND NLB_PC_GEMM_LIBS " -lgomp")  # its OpenMP runtime, whose thread count it sets
  endif()
endforeach()
if(NOT NLB_DEFAULT_GEMM STREQUAL "eigen")
  string(TOUPPER "${NLB_DEFAULT_GEMM}" upper)
  if(NLB_DEFAULT_GEMM STREQUAL "measured")
    string(APPEND NLB_PC_GEMM_CFLAGS " -DNLB_HAVE_MEASURED")
  endif()
  string(APPEND NLB_PC_GEMM_CFLAGS " -DNLB_DEFAULT_GEMM_${upper}")
endif()
configure_file("${PROJECT_SOURCE_DIR}/cmake/nlbudget.pc.in" "${PROJECT_BINARY_DIR}/nlbudget.pc"
               @ONLY)
install(FILES "${PROJECT_BINARY_DIR}/nlbudget.pc" DESTINATION "${CMAKE_INSTALL_DATADIR}/pkgconfig")
