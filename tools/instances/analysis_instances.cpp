// The budget pipeline's stages (nlb/analysis/budget/pipeline.hpp) for float on the CPU backend,
// compiled once: 25-40 s of each -O2 translation unit that runs the pipeline (the nlb program, the
// pipeline, distributed and CUDA host suites, the docs' budget examples), more under the
// sanitizers. The header declares the same list `extern template` when
// NLB_EXTERN_ANALYSIS_INSTANCES is defined (docs/architecture.md, "Compile time"); one macro writes
// both, so they cannot drift apart.
#include "nlb/analysis/budget/pipeline.hpp"

namespace nlb {
NLB_BUDGET_STAGE_INSTANCES(template, float)
template class ModelRunner<float, backend::cpu>;
}  // namespace nlb
