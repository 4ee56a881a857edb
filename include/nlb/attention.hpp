// Umbrella for nlb/attention: DenseAttention, SkewSymmetricRouting, DiagonalFilter, SDAttention,
// LinearAttention, FactoredAttention and the per-layer KV cache (PAPERS §B). See docs/attention.md.
#pragma once

#include "nlb/attention/dense_attention.hpp"
#include "nlb/attention/diagonal_filter.hpp"
#include "nlb/attention/factored_attention.hpp"
#include "nlb/attention/kv_cache.hpp"
#include "nlb/attention/linear_attention.hpp"
#include "nlb/attention/sd_attention.hpp"
#include "nlb/attention/skew_routing.hpp"
