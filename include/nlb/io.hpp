// Umbrella for nlb/io: safetensors reading (memory-mapped) and writing, dtypes, token-id files. See
// docs/safetensors.md.
#pragma once

#include "nlb/io/dtype.hpp"
#include "nlb/io/safetensors.hpp"
#include "nlb/io/safetensors_writer.hpp"
#include "nlb/io/token_file.hpp"
