// nlbudget: everything CPU-side, one umbrella per folder. Include this, or a folder's umbrella
// (nlb/mlp.hpp, ...), or the one header you need.
#pragma once

#include "nlb/analysis.hpp"
#include "nlb/attention.hpp"
#include "nlb/core.hpp"
#include "nlb/distributed.hpp"
#include "nlb/io.hpp"
#include "nlb/kernels.hpp"
#include "nlb/mlp.hpp"
#include "nlb/model.hpp"
#include "nlb/ops.hpp"
// nlb/text needs utf8proc, an optional dependency (docs/dependencies.md): included where its
// header is installed.
#if __has_include(<utf8proc.h>)
#include "nlb/text.hpp"
#endif
#include "nlb/version.hpp"  // generated from project(VERSION) into the build tree
