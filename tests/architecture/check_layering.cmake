# cmake -P check_layering.cmake -DINCLUDE_ROOT=<dir holding nlb/>: checks every #include of the
# library's own headers against the layering rule of docs/architecture.md and fails naming each
# include that points the wrong way.
#
# A header's family is its folder under nlb/ (nlb/mlp/gated_mlp.hpp: mlp); an umbrella nlb/X.hpp
# belongs to family X, and nlb/nlb.hpp (everything) may be included by no library header.
# Dependencies point down: core <- kernels <- ops <- {mlp, attention} <- model <- analysis <-
# distributed; io depends on core only; text on core and io; cuda (the device low layer) on core,
# kernels and ops.
cmake_minimum_required(VERSION 3.25)
if(NOT DEFINED INCLUDE_ROOT)
  message(FATAL_ERROR "check_layering: -DINCLUDE_ROOT=... is required")
endif()

set(allowed_core core)
set(allowed_kernels core kernels)
set(allowed_ops core kernels ops)
set(allowed_mlp core kernels ops mlp)
set(allowed_attention core kernels ops attention)
set(allowed_io core io)
set(allowed_text core io text)
set(allowed_model core kernels ops mlp attention io model)
set(allowed_analysis core kernels ops mlp attention io model analysis)
set(allowed_cuda core kernels ops cuda)  # the device low layer only (one model stack)
set(allowed_distributed core kernels ops mlp attention model analysis distributed)
set(families core kernels ops mlp attention io text model analysis cuda distributed)

# family_of(<out> <path relative to INCLUDE_ROOT>)
function(family_of out path)
  if(path MATCHES "^nlb/([a-z_]+)/")
    set(${out} "${CMAKE_MATCH_1}" PARENT_SCOPE)
  elseif(path MATCHES "^nlb/([a-z_]+)\\.(hpp|cuh)$")
    set(${out} "${CMAKE_MATCH_1}" PARENT_SCOPE)
  else()
    set(${out} "" PARENT_SCOPE)
  endif()
endfunction()

file(GLOB_RECURSE headers RELATIVE "${INCLUDE_ROOT}" "${INCLUDE_ROOT}/nlb/*.hpp"
     "${INCLUDE_ROOT}/nlb/*.cuh")
list(SORT headers)
set(violations "")
set(checked 0)
foreach(header IN LISTS headers)
  if(header STREQUAL "nlb/nlb.hpp")
    continue()  # the everything-umbrella sits above every family
  endif()
  if(header STREQUAL "nlb/cuda.cuh")
    continue()  # the device umbrella: the low layer first, then the model stack over it
  endif()
  family_of(from "${header}")
  if(NOT from IN_LIST families)
    list(APPEND violations "${header}: folder '${from}' has no place in the layering rule")
    continue()
  endif()
  file(STRINGS "${INCLUDE_ROOT}/${header}" lines REGEX "^[ \t]*#[ \t]*include[ \t]*[<\"]nlb/")
  foreach(line IN LISTS lines)
    string(REGEX REPLACE "^[ \t]*#[ \t]*include[ \t]*[<\"]([^>\"]+)[>\"].*$" "\\1" target "${line}")
    math(EXPR checked "${checked} + 1")
    if(target STREQUAL "nlb/nlb.hpp")
      list(APPEND violations "${header} includes ${target} (library headers include what they use)")
      continue()
    endif()
    family_of(to "${target}")
    if(NOT to IN_LIST allowed_${from})
      list(JOIN allowed_${from} ", " may)
      list(APPEND violations
           "${header} includes ${target}: ${from} may include only ${may}")
    endif()
  endforeach()
endforeach()
if(violations)
  list(JOIN violations "\n  " text)
  message(FATAL_ERROR "wrong-way includes (docs/architecture.md):\n  ${text}")
endif()
list(LENGTH headers count)
message(STATUS "layering: ${checked} includes in ${count} headers point down the layers")
