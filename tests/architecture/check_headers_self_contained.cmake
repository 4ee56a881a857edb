# cmake -P check_headers_self_contained.cmake: compiles every public header of one folder family
# alone (a generated translation unit that includes it twice, so the include guard is tested
# too) with -fsyntax-only, and fails naming each header that does not compile by itself.
#
#   -DCXX=<compiler> -DFLAGS=<flags separated by |> -DINCLUDE_ROOT=<include dir> -DFAMILY=<core|mlp|...>
#   -DWORK_DIR=<scratch dir>
# FAMILY "umbrellas" checks the umbrella headers nlb/*.hpp.
cmake_minimum_required(VERSION 3.25)
foreach(var CXX INCLUDE_ROOT FAMILY WORK_DIR)
  if(NOT DEFINED ${var})
    message(FATAL_ERROR "check_headers_self_contained: -D${var}=... is required")
  endif()
endforeach()
if(FAMILY STREQUAL "umbrellas")
  file(GLOB headers RELATIVE "${INCLUDE_ROOT}" "${INCLUDE_ROOT}/nlb/*.hpp")
elseif(FAMILY STREQUAL "cuda")
  # The CUDA backend's headers (*.cuh), compiled as the host-system build sees them (the caller
  # passes -DTHRUST_DEVICE_SYSTEM=THRUST_DEVICE_SYSTEM_CPP in FLAGS), and its umbrella.
  file(GLOB_RECURSE headers RELATIVE "${INCLUDE_ROOT}" "${INCLUDE_ROOT}/nlb/cuda/*.cuh")
  list(APPEND headers nlb/cuda.cuh)
else()
  file(GLOB_RECURSE headers RELATIVE "${INCLUDE_ROOT}" "${INCLUDE_ROOT}/nlb/${FAMILY}/*.hpp")
endif()
list(SORT headers)
list(LENGTH headers count)
if(count EQUAL 0)
  message(FATAL_ERROR "check_headers_self_contained: no headers under ${INCLUDE_ROOT}/nlb/${FAMILY}")
endif()
string(REPLACE "|" ";" flags "${FLAGS}")
file(MAKE_DIRECTORY "${WORK_DIR}")
set(failed "")
foreach(header IN LISTS headers)
  string(MAKE_C_IDENTIFIER "${header}" id)
  set(unit "${WORK_DIR}/${id}.cpp")
  file(WRITE "${unit}" "#include \"${header}\"\n#include \"${header}\"\n")
  execute_process(COMMAND "${CXX}" ${flags} "-I${INCLUDE_ROOT}" -fsyntax-only "${unit}"
                  RESULT_VARIABLE rc OUTPUT_VARIABLE out ERROR_VARIABLE err)
  if(rc EQUAL 0)
    message(STATUS "self-contained: ${header}")
  else()
    message(STATUS "NOT self-contained: ${header}\n${err}")
    list(APPEND failed "${header}")
  endif()
endforeach()
if(failed)
  list(JOIN failed "\n  " names)
  message(FATAL_ERROR "headers that do not compile alone:\n  ${names}")
endif()
message(STATUS "${count} headers of nlb/${FAMILY} compile alone")
