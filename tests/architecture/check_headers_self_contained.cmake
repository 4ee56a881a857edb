# cmake -P check_headers_self_contained.cmake: compiles every public header of one folder family
# alone (a generated translation unit that includes it twice, so the include guard is tested
# too) with -fsyntax-only, and fails naming each header that does not compile by itself.
#
#   -DCXX=<compiler> -DFLAGS=<flags separated by |> -DINCLUDE_ROOT=<include dir> -DFAMILY=<core|mlp|...>
#   -DWORK_DIR=<scratch dir>
# FAMILY "umbrellas" checks the umbrella headers nlb/*.hpp: nlb/nlb.hpp (which includes every
# other umbrella) is compiled alone; the others are checked by reading them, since a header that
# holds nothing but include lines of headers that each compile alone compiles alone too (each
# family's check compiles those). Compiling each of them again cost 86 of CI's test seconds.
cmake_minimum_required(VERSION 3.25)
foreach(var CXX INCLUDE_ROOT FAMILY WORK_DIR)
  if(NOT DEFINED ${var})
    message(FATAL_ERROR "check_headers_self_contained: -D${var}=... is required")
  endif()
endforeach()
if(FAMILY STREQUAL "umbrellas")
  file(GLOB umbrellas RELATIVE "${INCLUDE_ROOT}" "${INCLUDE_ROOT}/nlb/*.hpp")
  set(not_only_includes "")
  foreach(umbrella IN LISTS umbrellas)
    if(umbrella STREQUAL "nlb/nlb.hpp" OR umbrella STREQUAL "nlb/version.hpp")
      continue()
    endif()
    string(REGEX REPLACE "^nlb/([a-z_]+)\\.hpp$" "\\1" family "${umbrella}")
    # Read whole (comments may hold ';' or '[', which CMake lists would split or join), then
    # remove what an umbrella may hold: what is left is named.
    file(READ "${INCLUDE_ROOT}/${umbrella}" text)
    string(REGEX MATCHALL "#include \"nlb/${family}/[a-z0-9_/]+\\.hpp\"" includes "${text}")
    foreach(include IN LISTS includes)
      string(REGEX REPLACE "^#include \"(.*)\"$" "\\1" included "${include}")
      if(NOT EXISTS "${INCLUDE_ROOT}/${included}")
        string(APPEND not_only_includes "\n  ${umbrella}: ${include} (no such header)")
      endif()
    endforeach()
    string(REGEX REPLACE "//[^\n]*" "" rest "${text}")
    string(REGEX REPLACE "#pragma once|#include \"nlb/${family}/[a-z0-9_/]+\\.hpp\"" "" rest
                         "${rest}")
    string(STRIP "${rest}" rest)
    if(NOT rest STREQUAL "")
      string(APPEND not_only_includes "\n  ${umbrella}: ${rest}")
    endif()
  endforeach()
  if(not_only_includes)
    message(FATAL_ERROR "umbrella headers may hold only comments, #pragma once and includes of "
                        "their own family's headers; found:${not_only_includes}")
  endif()
  set(headers nlb/nlb.hpp)
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
