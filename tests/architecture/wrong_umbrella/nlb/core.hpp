// An umbrella with code in it: check_headers_self_contained.cmake must name this line.
#pragma once

#include "nlb/core/errors.hpp"

inline int not_only_includes = 1;
