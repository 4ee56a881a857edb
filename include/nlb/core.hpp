// Umbrella for nlb/core: sizes, matrix aliases, backends, errors, buffers, math policies.
#pragma once

#include "nlb/core/aligned_buffer.hpp"
#include "nlb/core/backend.hpp"
#include "nlb/core/checks.hpp"
#include "nlb/core/component_types.hpp"
#include "nlb/core/context.hpp"
#include "nlb/core/dims.hpp"
#include "nlb/core/errors.hpp"
#include "nlb/core/gemm_provider.hpp"
#include "nlb/core/gemm_scratch.hpp"
#include "nlb/core/half_matrix.hpp"
#include "nlb/core/host_device.hpp"
#include "nlb/core/math_policy.hpp"
#include "nlb/core/matrix.hpp"
#include "nlb/core/scratch_matrix.hpp"
#include "nlb/core/storage.hpp"
#include "nlb/core/weight_storage.hpp"
