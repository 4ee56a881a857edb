// nlb/model/model_summary.hpp: summarize_model against PyTorch's parameter counts of the shipped
// models (metrics.json, written by tools/python/train.py), per-dtype shares against the file
// headers, stored causal-mask buffers counted apart from the parameters, and the errors.
#include <boost/test/unit_test.hpp>

#include "nlb/model/model_summary.hpp"

#include <filesystem>
#include <fstream>
#include <nlohmann/json.hpp>
#include <string>

#include "model_copy.hpp"
#include "scratch_dir.hpp"

namespace {

namespace fs = std::filesystem;
const fs::path source_dir = NLB_SOURCE_DIR;

std::int64_t pytorch_parameters(const fs::path& model) {
  std::ifstream in(model / "metrics.json");
  BOOST_TEST_REQUIRE(in.good(), (model / "metrics.json").string() << " is missing");
  return nlohmann::json::parse(in).at("parameters").get<std::int64_t>();
}

}  // namespace

BOOST_AUTO_TEST_CASE(parameter_counts_equal_pytorchs) {
  for (const char* name : {"tiny-gpt2", "tiny-neox", "tiny-sd", "tiny-gpt2-bpe"}) {
    const fs::path dir = source_dir / "models" / name;
    const nlb::ModelSummary s = nlb::summarize_model(dir);
    BOOST_TEST(s.parameters == pytorch_parameters(dir), name);
    BOOST_TEST(s.buffer_elements == 0, name);
    BOOST_TEST(s.weight_bytes<float>() == 4u * static_cast<std::uint64_t>(s.parameters), name);
    BOOST_TEST(s.weight_bytes<double>() == 8u * static_cast<std::uint64_t>(s.parameters), name);
    BOOST_TEST_REQUIRE(s.files.size() == 1u, name);
    BOOST_TEST(s.file_bytes() == fs::file_size(dir / "model.safetensors"), name);
    BOOST_TEST(s.config.n_layers == 4, name);
  }
}

BOOST_AUTO_TEST_CASE(dtype_shares_follow_the_headers) {
  // tiny-gpt2-bpe: the token embedding [50257, 64] as BF16, the other 51 tensors as F32.
  const fs::path dir = source_dir / "models/tiny-gpt2-bpe";
  const nlb::ModelSummary s = nlb::summarize_model(dir);
  const auto file = nlb::io::SafetensorsFile::open(dir / "model.safetensors");
  BOOST_TEST_REQUIRE(s.by_dtype.size() == 2u);
  const auto& bf16 = s.by_dtype.at(nlb::io::DType::BF16);
  BOOST_TEST(bf16.tensors == 1);
  BOOST_TEST(bf16.elements == 50257 * 64);
  BOOST_TEST(bf16.bytes == 2u * 50257u * 64u);
  const auto& f32 = s.by_dtype.at(nlb::io::DType::F32);
  BOOST_TEST(f32.tensors + bf16.tensors == static_cast<std::int64_t>(file.tensors().size()));
  BOOST_TEST(f32.elements + bf16.elements == s.parameters);
}

BOOST_AUTO_TEST_CASE(stored_buffers_are_not_parameters) {
  // tiny-gpt2 with the causal masks older GPT-2 files store (h.{i}.attn.bias [1, 1, P, P]).
  nlb::test::ScratchDir dir{"summary-buffers"};
  const fs::path model = source_dir / "models/tiny-gpt2";
  auto tensors = nlb::test::read_all_tensors(model / "model.safetensors");
  const std::int64_t P = 128;
  for (int layer = 0; layer < 4; ++layer) {
    tensors["transformer.h." + std::to_string(layer) + ".attn.bias"] = {
        {1, 1, P, P}, std::vector<float>(static_cast<std::size_t>(P * P), 1.0f)};
  }
  std::ifstream in(model / "config.json");
  nlb::test::write_model_dir(dir.path / "m", tensors, nlohmann::json::parse(in));
  const nlb::ModelSummary s = nlb::summarize_model(dir.path / "m");
  BOOST_TEST(s.parameters == pytorch_parameters(model));
  BOOST_TEST(s.buffer_elements == 4 * P * P);
}

BOOST_AUTO_TEST_CASE(not_a_model_directory_is_a_format_error) {
  nlb::test::ScratchDir dir{"summary-missing"};
  BOOST_CHECK_THROW(nlb::summarize_model(dir.path / "absent"), nlb::FormatError);
  std::ofstream(dir.path / "config.json")
      << nlohmann::json::parse(std::ifstream(source_dir / "models/tiny-gpt2/config.json"));
  // A config without weights: the tensor source names what is missing.
  BOOST_CHECK_THROW(nlb::summarize_model(dir.path), nlb::FormatError);
}
