# Library dependencies, found as installed CMake packages (Debian: libeigen3-dev,
# libxsimd-dev, nlohmann-json3-dev). Nothing is vendored or downloaded.
# Shared with nlbudgetConfig.cmake so consumers find the same versions.

# Eigen 3.4 up to (not including) 6. Eigen's own version file accepts only its own
# major version, so the range is checked here.
find_package(Eigen3 REQUIRED NO_MODULE)
if(Eigen3_VERSION VERSION_LESS 3.4 OR NOT Eigen3_VERSION VERSION_LESS 6)
  message(FATAL_ERROR "nlbudget needs Eigen >= 3.4 and < 6, found ${Eigen3_VERSION}")
endif()

# xsimd 8.x: the API this project is written against (hadd, batch<T, Arch>).
find_package(xsimd REQUIRED)
if(xsimd_VERSION VERSION_LESS 8 OR NOT xsimd_VERSION VERSION_LESS 9)
  message(FATAL_ERROR "nlbudget needs xsimd 8.x, found ${xsimd_VERSION}")
endif()
# Debian 12's xsimd 8.1 target lists a target "xtl" in its link interface without finding
# it, so a plain link adds "-lxtl". xtl only serves xsimd's xtl-complex support, which
# nlbudget does not use: use xtl's own package if installed, else an empty stand-in.
if(NOT TARGET xtl)
  find_package(xtl QUIET)
  if(NOT TARGET xtl)
    add_library(xtl INTERFACE IMPORTED GLOBAL)
  endif()
endif()

find_package(nlohmann_json 3.10 REQUIRED)

# utf8proc 2.5 or later (Debian: libutf8proc-dev) for nlb/text: NFC and the general categories
# of the GPT-2 split (docs/dependencies.md). Optional: without it nlbudget builds without the
# text family (NLB_WITH_TEXT OFF) and says so. nlbudgetConfig.cmake sets NLB_REQUIRE_UTF8PROC
# when the installed package was built with it, since its target then links utf8proc::utf8proc.
# Found by cmake/Findutf8proc.cmake (Debian ships no CMake package for it).
if(NLB_REQUIRE_UTF8PROC)
  find_package(utf8proc 2.5 REQUIRED)
else()
  find_package(utf8proc 2.5)
endif()

# GEMM providers for the CPU backend (nlb/core/gemm_provider.hpp; docs/dependencies.md): OpenBLAS
# (Debian: libopenblas-dev), BLIS (libblis-dev), oneDNN (libdnnl-dev) and LIBXSMM (libxsmm-dev),
# all optional; Eigen's own GEMM is always there. Each one found becomes an imported target,
# nlbudget_deps::<name>,
# with the library and the directory of its own header (Debian installs one per threading
# variant; the pthread one is preferred, so that the thread count is the program's to set).
# nlbudgetConfig.cmake sets NLB_REQUIRE_<NAME> for those the installed
# package was built with.
function(nlb_find_gemm_provider name header library required)
  string(TOUPPER "${name}" upper)
  find_path(NLB_${upper}_INCLUDE_DIR "${header}"
            PATH_SUFFIXES ${name}-pthread ${name}-openmp ${name}-serial ${name})
  find_library(NLB_${upper}_LIBRARY NAMES "${library}"
               PATH_SUFFIXES ${name}-pthread ${name}-openmp ${name}-serial)
  if(NLB_${upper}_INCLUDE_DIR AND NLB_${upper}_LIBRARY)
    if(NOT TARGET nlbudget_deps::${name})
      add_library(nlbudget_deps::${name} UNKNOWN IMPORTED GLOBAL)
      set_target_properties(nlbudget_deps::${name} PROPERTIES
        IMPORTED_LOCATION "${NLB_${upper}_LIBRARY}"
        INTERFACE_INCLUDE_DIRECTORIES "${NLB_${upper}_INCLUDE_DIR}")
    endif()
    set(NLB_HAVE_${upper} ON PARENT_SCOPE)
  elseif(required)
    message(FATAL_ERROR "nlbudget was built with the ${name} GEMM provider, which is not found "
                        "here (Debian: apt-get install lib${name}-dev)")
  else()
    set(NLB_HAVE_${upper} OFF PARENT_SCOPE)
  endif()
endfunction()
nlb_find_gemm_provider(openblas openblas_config.h openblas "${NLB_REQUIRE_OPENBLAS}")
nlb_find_gemm_provider(blis blis.h blis "${NLB_REQUIRE_BLIS}")
# oneDNN (libdnnl-dev; dnnl_sgemm) and LIBXSMM (libxsmm-dev: static libraries in /usr/lib, whose
# libxsmm_?gemm hands the products its kernels do not take to a BLAS: OpenBLAS's, linked with it,
# so LIBXSMM counts as found only beside OpenBLAS).
nlb_find_gemm_provider(onednn dnnl.h dnnl "${NLB_REQUIRE_ONEDNN}")
# oneDNN's threads are those of the OpenMP runtime it is built with (Debian: GNU OpenMP), which
# the provider sets with omp_set_num_threads: its programs link libgomp itself (not -fopenmp), so
# a program built without OpenMP still gives oneDNN the context's thread count.
if(NLB_HAVE_ONEDNN)
  set_property(TARGET nlbudget_deps::onednn PROPERTY INTERFACE_LINK_LIBRARIES gomp)
endif()
if(NLB_HAVE_OPENBLAS)
  nlb_find_gemm_provider(libxsmm libxsmm.h xsmm "${NLB_REQUIRE_LIBXSMM}")
elseif(NLB_REQUIRE_LIBXSMM)
  message(FATAL_ERROR "nlbudget was built with the libxsmm GEMM provider, which needs OpenBLAS "
                      "(Debian: apt-get install libopenblas-dev)")
else()
  set(NLB_HAVE_LIBXSMM OFF)
endif()
if(NLB_HAVE_LIBXSMM)
  find_package(Threads REQUIRED)
  set_property(TARGET nlbudget_deps::libxsmm PROPERTY INTERFACE_LINK_LIBRARIES
               nlbudget_deps::openblas Threads::Threads ${CMAKE_DL_LIBS} rt m)
endif()
