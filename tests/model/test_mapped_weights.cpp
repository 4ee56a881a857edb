// Weights used where the checkpoint's mapping holds them (storage::mapped,
// docs/safetensors.md "Memory"): which tensors are views and which are converted copies, the
// models against their PyTorch fixtures, lifetime past the loader and copies, and map_matrix's
// fallbacks (another dtype, a misaligned tensor).
#include <boost/test/unit_test.hpp>
#include <filesystem>
#include <memory>
#include <string>
#include <variant>

#include "model_copy.hpp"
#include "model_fixture.hpp"
#include "nlb/core/mapped_matrix.hpp"
#include "nlb/io/safetensors.hpp"
#include "nlb/io/safetensors_writer.hpp"
#include "nlb/model/load_model.hpp"
#include "scratch_dir.hpp"
#include "tolerances.hpp"

namespace {

using nlb::Index;
namespace tol = nlb::test::tol;
using Mapped = nlb::backend::with_weights<nlb::storage::mapped>;
using MappedModel = nlb::Transformer<float, Mapped>;
const std::filesystem::path source_dir = NLB_SOURCE_DIR;

std::filesystem::path model_dir(const std::string& name) {
  return source_dir / "models" / name;
}
std::filesystem::path fixture(const std::string& name) {
  return source_dir / "tests/fixtures" / name;
}

// Counts the model's large weight matrices that are views of a file and those it owns.
struct ViewCount {
  int views = 0, owned = 0;
  void add(const auto& m) {
    if (m.size() > 0)
      ++(m.is_view() ? views : owned);
  }
};

ViewCount count_views(const MappedModel& model) {
  ViewCount c;
  c.add(model.embeddings().token);
  c.add(model.embeddings().position);
  c.add(model.embeddings().unembedding);
  model.for_each_layer([&](const auto& block, Index) {
    const auto& attention =
        block.attention().template get<nlb::DenseAttention<float, nlb::Dynamic, Mapped>>();
    c.add(attention.weights().w_qkv);
    c.add(attention.weights().w_out);
    std::visit(
        [&](const auto& mlp) {
          if constexpr (requires { mlp.w_fc(); }) {
            c.add(mlp.w_fc());
            c.add(mlp.w_proj());
          }
        },
        block.mlp().kind());
  });
  return c;
}

// Logits of window 0 of the model's fixture, with the max-relative error to PyTorch's.
double window0_error(const MappedModel& model, const std::string& name) {
  const auto ref = nlb::io::SafetensorsFile::open(fixture(name + "-reference.safetensors"));
  nlb::Context<Mapped> ctx;
  MappedModel::Workspace ws;
  nlb::RowMatrix<float> logits;
  model.forward(ctx, nlb::test::window_tokens(ref, 0), logits, ws);
  return nlb::test::relative_to_max(logits, nlb::test::window_of(ref, "logits_f64", 0));
}

}  // namespace

// GPT-2 stores every weight matrix as y = x W uses it (Conv1D [in, out]) and its embeddings
// [vocab, d]: an F32 file is used as it lies, all 2 + 4 · layers matrices views.
BOOST_AUTO_TEST_CASE(gpt2_f32_weights_are_views_and_match_pytorch) {
  const auto model = nlb::load_model<float, Mapped>(model_dir("tiny-gpt2"));
  const ViewCount c = count_views(model);
  BOOST_TEST(c.views == 2 + 4 * model.config().n_layers);
  BOOST_TEST(c.owned == 0);
  nlb::test::check_model_against_fixture<float, Mapped>(
      model_dir("tiny-gpt2"), fixture("tiny-gpt2-reference.safetensors"), tol::model_f32_rel,
      tol::model_f32_rel, tol::model_loss_f32_abs);
}

// GPT-NeoX stores torch.nn.Linear [out, in]: the layers' matrices are transposed (copies of
// their own); the embeddings embed_in and embed_out lie as used (views).
BOOST_AUTO_TEST_CASE(neox_embeddings_are_views_and_linear_weights_copies) {
  const auto model = nlb::load_model<float, Mapped>(model_dir("tiny-neox"));
  const ViewCount c = count_views(model);
  BOOST_TEST(c.views == 2);
  BOOST_TEST(c.owned == 4 * model.config().n_layers);
  nlb::test::check_model_against_fixture<float, Mapped>(
      model_dir("tiny-neox"), fixture("tiny-neox-reference.safetensors"), tol::model_f32_rel,
      tol::model_f32_rel, tol::model_loss_f32_abs);
}

// The views keep the mapping alive: the loader's files are closed when load_model returns, and a
// copy of the model still computes after the model it was copied from is gone.
BOOST_AUTO_TEST_CASE(views_outlive_the_loader_and_the_model_they_were_copied_from) {
  auto first =
      std::make_unique<MappedModel>(nlb::load_model<float, Mapped>(model_dir("tiny-gpt2")));
  MappedModel copy = *first;
  first.reset();
  BOOST_TEST(count_views(copy).views == 2 + 4 * copy.config().n_layers);
  BOOST_TEST(window0_error(copy, "tiny-gpt2") <= tol::model_f32_rel);
}

// An F16 checkpoint's values are not float values as they lie: every matrix is converted, and
// the model meets PyTorch's logits of the same rounded weights (tests/fixtures/README.md).
BOOST_AUTO_TEST_CASE(f16_checkpoint_is_converted) {
  const nlb::test::ScratchDir dir("mapped-f16");
  const auto logits_fixture = fixture("tiny-gpt2-f16-logits.safetensors");
  nlb::test::write_rounded_copy(model_dir("tiny-gpt2"), nlb::io::DType::F16, logits_fixture,
                                dir.path);
  const auto model = nlb::load_model<float, Mapped>(dir.path);
  const ViewCount c = count_views(model);
  BOOST_TEST(c.views == 0);
  BOOST_TEST(c.owned == 2 + 4 * model.config().n_layers);
  const auto ref = nlb::io::SafetensorsFile::open(logits_fixture);
  nlb::Context<Mapped> ctx;
  MappedModel::Workspace ws;
  nlb::RowMatrix<float> logits;
  model.forward(ctx, nlb::test::window_tokens(ref, 0), logits, ws);
  BOOST_TEST(nlb::test::relative_to_max(logits, nlb::test::window_of(ref, "logits", 0)) <=
             tol::model_f32_rel);
}

// map_matrix: an F32 tensor at an address that is not a multiple of 4 (after a 2-byte F16
// tensor) is read as a copy with the same values; an aligned one is a view; shapes are checked.
BOOST_AUTO_TEST_CASE(map_matrix_views_aligned_f32_and_copies_the_rest) {
  nlb::io::SafetensorsWriter w;
  w.add("a", nlb::io::DType::F16, {1}, std::vector<double>{1.5});
  w.add("b", nlb::io::DType::F32, {2, 3}, std::vector<double>{1, 2, 3, 4, 5, 6});
  w.add("c", nlb::io::DType::F32, {2, 2}, std::vector<double>{-1, -2, -3, -4});
  const auto file = nlb::io::SafetensorsFile::from_bytes(w.to_bytes(), "map_matrix.safetensors");
  const auto offset = [&](const char* name) {
    return reinterpret_cast<std::uintptr_t>(file.raw_bytes(name).data()) % alignof(float);
  };
  BOOST_REQUIRE(offset("b") != 0u);  // "a" is 2 bytes long
  const auto b = file.map_matrix<float>("b", 2, 3);
  BOOST_TEST(!b.is_view());
  BOOST_TEST(b(1, 2) == 6.0f);
  BOOST_TEST(b(0, 1) == 2.0f);
  // "c" starts 2 + 24 bytes into the data section: misaligned too; shift by writing a second
  // 2-byte tensor ahead of it to make it aligned.
  nlb::io::SafetensorsWriter w2;
  w2.add("a", nlb::io::DType::F16, {2}, std::vector<double>{1.5, 2.5});
  w2.add("c", nlb::io::DType::F32, {2, 2}, std::vector<double>{-1, -2, -3, -4});
  const auto file2 = nlb::io::SafetensorsFile::from_bytes(w2.to_bytes(), "map_matrix2.safetensors");
  BOOST_REQUIRE(reinterpret_cast<std::uintptr_t>(file2.raw_bytes("c").data()) % alignof(float) ==
                0u);
  const auto c = file2.map_matrix<float>("c", 2, 2);
  BOOST_TEST(c.is_view());
  BOOST_TEST(static_cast<const void*>(c.data()) ==
             static_cast<const void*>(file2.raw_bytes("c").data()));
  BOOST_TEST(c(1, 0) == -3.0f);
  BOOST_CHECK_THROW(file2.map_matrix<float>("c", 4, 1), nlb::FormatError);
  BOOST_CHECK_THROW(file2.map_matrix<float>("a", 1, 2), nlb::FormatError);  // 1-D [2]
  BOOST_CHECK_THROW(file2.map_matrix<float>("c", -2, -2), nlb::ArgumentError);
}

// MappedMatrix itself: a matrix moved in is owned (not a view) at the same address; row(),
// transpose() and element access read the row-major values; copies and assignments share the
// elements (same address, nothing copied) and keep them alive after the original is gone.
BOOST_AUTO_TEST_CASE(mapped_matrix_owns_moved_matrices_and_shares_on_copy) {
  nlb::RowMatrix<float> m(2, 3);
  m << 1, 2, 3, 4, 5, 6;
  const float* at = m.data();
  auto owned = std::make_unique<nlb::MappedMatrix<float>>(std::move(m));
  BOOST_TEST(!owned->is_view());
  BOOST_TEST(owned->data() == at);
  BOOST_TEST(owned->rows() == 2);
  BOOST_TEST(owned->cols() == 3);
  BOOST_TEST((*owned)(1, 0) == 4.0f);
  BOOST_TEST(owned->row(1)(2) == 6.0f);
  BOOST_TEST(owned->transpose()(2, 1) == 6.0f);
  BOOST_TEST(owned->transpose().rows() == 3);
  nlb::MappedMatrix<float> assigned;
  BOOST_TEST(assigned.size() == 0);
  const nlb::MappedMatrix<float> copy = *owned;
  assigned = copy;
  owned.reset();
  BOOST_TEST(assigned.data() == at);
  BOOST_TEST(assigned.map().sum() == 21.0f);
}
