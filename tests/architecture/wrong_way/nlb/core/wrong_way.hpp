// Test input for check_layering.cmake: a core header that reaches up into model/. The layering
// test must fail on this tree (CTest test layering_rejects_wrong_way_include).
#pragma once

#include "nlb/model/transformer.hpp"
