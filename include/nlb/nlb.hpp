// nlbudget: everything CPU-side, one umbrella per folder. Include this, or a folder's umbrella
// (nlb/mlp.hpp, ...), or the one header you need.
#pragma once

#include "nlb/analysis.hpp"
#include "nlb/attention.hpp"
#include "nlb/core.hpp"
#include "nlb/io.hpp"
#include "nlb/kernels.hpp"
#include "nlb/mlp.hpp"
#include "nlb/model.hpp"
#include "nlb/version.hpp"  // generated from project(VERSION) into the build tree
