// A whole model against its PyTorch fixture (tools/python/make_fixtures.py): the fixture's
// windows, logits, every tap and the per-position losses; and the error measure of the tolerance
// table for whole tensors.
#pragma once

#include <Eigen/Core>
#include <algorithm>
#include <boost/test/unit_test.hpp>
#include <cmath>
#include <cstdint>
#include <filesystem>
#include <string>
#include <type_traits>
#include <vector>

#include "nlb/io/safetensors.hpp"
#include "nlb/model/load_model.hpp"
#include "nlb/model/loss.hpp"

namespace nlb::test {

/// max |a − b| / max |b| (b's scale floored at 1e-30): whole-tensor error, tolerances.hpp.
template <class A, class B>
double relative_to_max(const A& a, const B& b) {
  const Eigen::MatrixXd bd = b.template cast<double>();
  const double scale = std::max(bd.cwiseAbs().maxCoeff(), 1e-30);
  return (a.template cast<double>() - bd).cwiseAbs().maxCoeff() / scale;
}

/// Window w of a [windows, T, n] fixture tensor as a [T, n] matrix.
inline Eigen::MatrixXd window_of(const io::SafetensorsFile& f, const std::string& name, Index w) {
  const auto& info = f.info(name);
  BOOST_REQUIRE(info.shape.size() == 3u);
  BOOST_REQUIRE(w >= 0 && w < info.shape[0]);
  const auto all = f.read<double>(name);
  const Index T = info.shape[1], n = info.shape[2];
  Eigen::MatrixXd m(T, n);
  for (Index t = 0; t < T; ++t) {
    for (Index j = 0; j < n; ++j)
      m(t, j) = all[static_cast<std::size_t>((w * T + t) * n + j)];
  }
  return m;
}

/// The token ids of window w of the fixture's [windows, T] "tokens" tensor.
inline std::vector<std::int32_t> window_tokens(const io::SafetensorsFile& f, Index w) {
  const auto& info = f.info("tokens");
  const auto all = f.read<std::int64_t>("tokens");
  const Index T = info.shape[1];
  return std::vector<std::int32_t>(all.begin() + w * T, all.begin() + (w + 1) * T);
}

/// The name of a tap in the fixtures: "tap.embedding", "tap.<layer>.<name>".
inline std::string tap_key(Tap tap, Index layer) {
  return tap == Tap::embedding ? "tap.embedding"
                               : "tap." + std::to_string(layer) + "." + std::string(to_string(tap));
}

/// The fixture's tensor that holds a tap's reference value. The reference files store no
/// "tap.<i>.block_input": block i's input is block i − 1's output ("tap.embedding" for i = 0,
/// tools/python/make_fixtures.py checks the equality when it writes them).
inline std::string reference_tap_key(Tap tap, Index layer) {
  if (tap != Tap::block_input) {
    return tap_key(tap, layer);
  }
  return layer == 0 ? tap_key(Tap::embedding, 0) : tap_key(Tap::block_output, layer - 1);
}

/// Loads the model in `model_dir` as Transformer<T, Backend>, runs every window of the fixture and
/// checks max-relative errors of the logits (against "logits_f64", at the fixture's
/// "logit_positions" where it has them) and of every tap
/// (reference_tap_key; the taps are stored for the first windows only, [tap windows, T, d]), and
/// the absolute error of every per-position loss ("loss", [windows, T − 1]) against the bounds;
/// prints the worst of each.
template <class T, class Backend = backend::cpu>
void check_model_against_fixture(const std::filesystem::path& model_dir,
                                 const std::filesystem::path& fixture_file, double logits_bound,
                                 double tap_bound, double loss_bound) {
  const auto model = load_model<T, Backend>(model_dir);
  const auto ref = io::SafetensorsFile::open(fixture_file);
  const Index windows = ref.info("tokens").shape[0];
  const Index tap_windows = ref.info("tap.embedding").shape[0];
  BOOST_REQUIRE(windows >= 1);
  BOOST_REQUIRE(tap_windows >= 1 && tap_windows <= windows);
  const auto ref_loss = ref.read<double>("loss");
  Context<Backend> ctx;
  typename std::decay_t<decltype(model)>::Workspace ws;
  double worst_logits = 0, worst_tap = 0, worst_loss = 0;
  std::string worst_tap_name;
  for (Index w = 0; w < windows; ++w) {
    const auto tokens = window_tokens(ref, w);
    std::size_t tap_count = 0;
    RowMatrix<T> logits;
    model.forward(ctx, tokens, logits, ws, [&](Tap tap, Index layer, const auto& m) {
      ++tap_count;
      if (w >= tap_windows) {
        return;
      }
      const double err = relative_to_max(m, window_of(ref, reference_tap_key(tap, layer), w));
      if (err > worst_tap) {
        worst_tap = err;
        worst_tap_name = tap_key(tap, layer);
      }
    });
    // A fixture with a large vocabulary keeps the logits at some positions only
    // ("logit_positions", tests/fixtures/README.md); the losses cover every position.
    if (ref.contains("logit_positions")) {
      const auto positions = ref.read<std::int64_t>("logit_positions");
      RowMatrix<T> kept(static_cast<Index>(positions.size()), logits.cols());
      for (std::size_t k = 0; k < positions.size(); ++k)
        kept.row(static_cast<Index>(k)) = logits.row(static_cast<Index>(positions[k]));
      worst_logits = std::max(worst_logits, relative_to_max(kept, window_of(ref, "logits_f64", w)));
    } else {
      worst_logits =
          std::max(worst_logits, relative_to_max(logits, window_of(ref, "logits_f64", w)));
    }
    BOOST_TEST(tap_count == 1u + 5u * static_cast<std::size_t>(model.config().n_layers));
    const auto loss = next_token_losses(logits, tokens);
    for (std::size_t t = 0; t < loss.size(); ++t) {
      worst_loss = std::max(
          worst_loss, std::abs(loss[t] - ref_loss[static_cast<std::size_t>(w) * loss.size() + t]));
    }
  }
  BOOST_TEST_MESSAGE(model_dir.filename().string()
                     << " <" << (sizeof(T) == 4 ? "float" : "double")
                     << ">: logits max error / max |logit| " << worst_logits << ", worst tap "
                     << worst_tap_name << " " << worst_tap << ", worst loss " << worst_loss);
  BOOST_TEST(worst_logits <= logits_bound);
  BOOST_TEST(worst_tap <= tap_bound);
  BOOST_TEST(worst_loss <= loss_bound);
}

}  // namespace nlb::test
