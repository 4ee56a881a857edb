// The loaded (Dynamic-size) model's heavy code in float and double, compiled once: the loaders
// and the per-layer slots' forward passes (about 50 s of a 70 s translation unit at -O2, four
// times that under the sanitizers). The model headers declare these instantiations `extern`
// when NLB_EXTERN_MODEL_INSTANCES is defined, so a translation unit built with it compiles
// none of this and links it from here (docs/architecture.md, "Compile time"). Without the macro
// nothing changes: the library stays header-only, and a consumer may compile this file into
// its own build to get the same saving.
#include <filesystem>

#include "nlb/model/attention_slot.hpp"
#include "nlb/model/hf_loader.hpp"
#include "nlb/model/load_model.hpp"
#include "nlb/model/mlp_slot.hpp"
#include "nlb/model/sd_loader.hpp"
#include "nlb/model/weights.hpp"

namespace nlb {
template class AttentionSlot<float>;
template class AttentionSlot<double>;
template class MlpSlot<float>;
template class MlpSlot<double>;
template ModelWeights<float> load_model_weights<float>(const std::filesystem::path&);
template ModelWeights<double> load_model_weights<double>(const std::filesystem::path&);
template Transformer<float> load_sd_model<float>(const std::filesystem::path&);
template Transformer<double> load_sd_model<double>(const std::filesystem::path&);
template Transformer<float> load_model<float>(const std::filesystem::path&);
template Transformer<double> load_model<double>(const std::filesystem::path&);
template Transformer<float> make_transformer<float>(const ModelWeights<float>&);
template Transformer<double> make_transformer<double>(const ModelWeights<double>&);
template Transformer<float> make_transformer<float>(ModelWeights<float>&&);
template Transformer<double> make_transformer<double>(ModelWeights<double>&&);
}  // namespace nlb
