# cmake -P check_compile_fail.cmake: one compile-fail case (Eigen's failtest pattern). SOURCE has
# a line "// expect: <text>". Built as it is, it must compile (so the case tests what it says);
# built with -DNLB_SHOULD_FAIL it must fail, and the compiler's output must contain <text> (the
# case's own static_assert message).
#
#   -DCXX=<compiler> -DFLAGS=<flags separated by |> -DINCLUDE_ROOT=<dir> -DSOURCE=<case.cpp>
cmake_minimum_required(VERSION 3.25)
foreach(var CXX INCLUDE_ROOT SOURCE)
  if(NOT DEFINED ${var})
    message(FATAL_ERROR "check_compile_fail: -D${var}=... is required")
  endif()
endforeach()
string(REPLACE "|" ";" flags "${FLAGS}")
file(STRINGS "${SOURCE}" expect_lines REGEX "^// expect: ")
list(LENGTH expect_lines n)
if(NOT n EQUAL 1)
  message(FATAL_ERROR "${SOURCE}: expected exactly one '// expect: <message>' line, found ${n}")
endif()
string(REGEX REPLACE "^// expect: " "" expected "${expect_lines}")

execute_process(COMMAND "${CXX}" ${flags} "-I${INCLUDE_ROOT}" -fsyntax-only "${SOURCE}"
                RESULT_VARIABLE rc OUTPUT_VARIABLE out ERROR_VARIABLE err)
if(NOT rc EQUAL 0)
  message(FATAL_ERROR "${SOURCE}: the valid variant (no NLB_SHOULD_FAIL) does not compile:\n${err}")
endif()
execute_process(COMMAND "${CXX}" ${flags} "-I${INCLUDE_ROOT}" -DNLB_SHOULD_FAIL -fsyntax-only
                        "${SOURCE}"
                RESULT_VARIABLE rc OUTPUT_VARIABLE out ERROR_VARIABLE err)
if(rc EQUAL 0)
  message(FATAL_ERROR "${SOURCE}: built with NLB_SHOULD_FAIL, expected a compile error, but it compiled")
endif()
string(FIND "${out}${err}" "${expected}" at)
if(at EQUAL -1)
  message(FATAL_ERROR "${SOURCE}: failed to compile, but without the expected message\n"
                      "  expected: ${expected}\n  found:\n${err}")
endif()
message(STATUS "${SOURCE}: fails to compile with \"${expected}\"")
