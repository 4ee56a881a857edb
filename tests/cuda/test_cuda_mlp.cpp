// The MLP family on backend::cuda against the CPU: Mlp, RidgeSurrogate, HyperplaneGate and
// GatedMLP are one class template each, instantiated for the device by to_backend from the
// scalar CPU oracle (the same weights), and called the same way, forward(ctx, X, Y, ws). Float
// and double, T in {0, 1, odd sizes}, strided (padded) views, thresholds from -inf to +inf with
// equal RouteCounts, the callable gated_route that Block uses, and mismatched device parts.
// The device ops themselves are tested in test_cuda_ops.cpp.
//
// Built twice (docs/cuda.md): with g++ and thrust's host device system, where it runs on any
// machine and tests the algorithms; and with nvcc, where it reports Skipped (exit 77) unless a
// usable GPU is present.
#define BOOST_TEST_NO_MAIN
#include <algorithm>
#include <boost/test/unit_test.hpp>
#include <cmath>
#include <iostream>
#include <limits>
#include <type_traits>
#include <vector>

#include "nlb/cuda/context.cuh"
#include "nlb/cuda/device_matrix.cuh"
#include "nlb/cuda/ops.cuh"
#include "nlb/mlp/gated_mlp.hpp"
#include "nlb/mlp/hyperplane_gate.hpp"
#include "nlb/mlp/mlp.hpp"
#include "nlb/mlp/ridge_surrogate.hpp"
#include "nlb/mlp/swiglu_mlp.hpp"
#include "random_mlp.hpp"
#include "tolerances.hpp"

namespace {

using nlb::Index;
using nlb::test::normal_matrix;
using Cuda = nlb::backend::cuda;
using Host = nlb::backend::scalar;
using DeviceContext = nlb::Context<Cuda>;
using HostContext = nlb::Context<Host>;

constexpr double inf = std::numeric_limits<double>::infinity();

// max |a - b| / max(1, max |b|): normwise relative to the reference's scale.
template <class A, class B>
double scaled_error(const A& a, const B& b) {
  if (a.rows() != b.rows() || a.cols() != b.cols())
    return inf;
  if (b.size() == 0)
    return 0.0;
  const Eigen::MatrixXd bd = b.template cast<double>();
  const double scale = std::max(1.0, bd.cwiseAbs().maxCoeff());
  return (a.template cast<double>() - bd).cwiseAbs().maxCoeff() / scale;
}

template <class T>
double mlp_rel() {
  return std::is_same_v<T, float> ? nlb::test::tol::mlp_float_rel : nlb::test::tol::mlp_double_rel;
}

// A device copy of m stored with `pad` extra columns (row stride cols + pad, the padding 7), and
// the [rows, cols] view of it: the components run on strided views as on matrices.
template <class T>
struct Padded {
  nlb::cuda::DeviceMatrix<T> storage;
  nlb::cuda::DeviceView<T> view;
  Padded(DeviceContext& ctx, const nlb::RowMatrix<T>& m, Index pad) {
    nlb::RowMatrix<T> padded = nlb::RowMatrix<T>::Constant(m.rows(), m.cols() + pad, T(7));
    padded.leftCols(m.cols()) = m;
    storage = nlb::cuda::upload(ctx, padded);
    view = storage.leftCols(m.cols());
  }
};

template <class T, class Act>
using HostMlp = nlb::Mlp<T, nlb::Dynamic, nlb::Dynamic, Act, Host>;
template <class T>
using HostSurrogate = nlb::RidgeSurrogate<T, nlb::Dynamic, nlb::Dynamic, Host>;
template <class T>
using HostGate = nlb::HyperplaneGate<T, nlb::Dynamic, Host>;
template <class T, class Act>
using HostGated = nlb::GatedMLP<HostMlp<T, Act>, HostSurrogate<T>, HostGate<T>>;

template <class T, class Act>
HostGated<T, Act> host_layer(Index d, Index h, std::uint64_t seed) {
  HostMlp<T, Act> mlp(normal_matrix<T>(d, h, 0.3, seed), normal_matrix<T>(1, h, 0.1, seed + 1),
                      normal_matrix<T>(h, d, 0.3, seed + 2), normal_matrix<T>(1, d, 0.1, seed + 3));
  HostSurrogate<T> surrogate(normal_matrix<T>(d, d, 0.3, seed + 4),
                             normal_matrix<T>(1, d, 0.1, seed + 5));
  const nlb::RowMatrix<T> w = normal_matrix<T>(d, 1, 1.0, seed + 6);
  HostGate<T> gate(nlb::ColVector<T>(w.col(0)), T(0.1), T(0));
  return HostGated<T, Act>(std::move(mlp), std::move(surrogate), std::move(gate));
}

// Each part on the device against the same part on the host, one workspace per part reused
// over batches of every size (so a smaller batch after a larger one is covered).
template <class T, class Act>
void check_mlp_family() {
  DeviceContext ctx;
  HostContext host_ctx;
  const Index d = 12, h = 40;
  const auto host = host_layer<T, Act>(d, h, 7);
  const auto mlp = nlb::to_backend(Cuda{}, host.mlp());
  const auto surrogate = nlb::to_backend(Cuda{}, host.surrogate());
  const auto gate = nlb::to_backend(Cuda{}, host.gate());
  static_assert(std::is_same_v<std::remove_const_t<decltype(mlp)>,
                               nlb::Mlp<T, nlb::Dynamic, nlb::Dynamic, Act, Cuda>>);
  typename std::remove_const_t<decltype(mlp)>::Workspace mlp_ws;
  typename std::remove_const_t<decltype(surrogate)>::Workspace surrogate_ws;
  nlb::ops::Scratch<Cuda, T> gate_scratch;
  typename HostMlp<T, Act>::Workspace host_mlp_ws;
  typename HostSurrogate<T>::Workspace host_surrogate_ws;
  nlb::ops::Scratch<Host, T> host_scratch;
  for (const Index rows : {Index{33}, Index{0}, Index{1}, Index{7}}) {
    for (const Index pad : {Index{0}, Index{3}}) {
      BOOST_TEST_CONTEXT("T = " << rows << ", pad " << pad) {
        const nlb::RowMatrix<T> X =
            normal_matrix<T>(rows, d, 1.0, 50 + static_cast<unsigned>(rows));
        const Padded<T> dX(ctx, X, pad);
        Padded<T> dY(ctx, nlb::RowMatrix<T>::Zero(rows, d), pad);
        Padded<T> dscores(ctx, nlb::RowMatrix<T>::Zero(rows, 1), pad);
        nlb::RowMatrix<T> Y(rows, d);
        nlb::ColVector<T> scores(rows);

        const nlb::RouteCounts counts = mlp.forward(ctx, dX.view, dY.view, mlp_ws);
        BOOST_TEST(counts.full == rows);
        host.mlp().forward(host_ctx, X, Y, host_mlp_ws);
        const double mlp_err = scaled_error(nlb::cuda::download(ctx, dY.view), Y);
        BOOST_TEST_MESSAGE("Mlp: " << mlp_err);
        BOOST_TEST(mlp_err <= mlp_rel<T>());

        BOOST_TEST(surrogate.forward(ctx, dX.view, dY.view, surrogate_ws).linear == rows);
        host.surrogate().forward(host_ctx, X, Y, host_surrogate_ws);
        BOOST_TEST(scaled_error(nlb::cuda::download(ctx, dY.view), Y) <= mlp_rel<T>());

        gate.score(ctx, dX.view, dscores.view, gate_scratch);
        host.gate().score(host_ctx, X, scores, host_scratch);
        BOOST_TEST(scaled_error(nlb::cuda::download(ctx, dscores.view), scores) <= mlp_rel<T>());
      }
    }
  }
}

// SwiGluMlp (the Llama family's MLP, one product for both input projections) on the device
// against the same weights on the host, over padded views and batches of every size.
template <class T>
void check_swiglu() {
  DeviceContext ctx;
  HostContext host_ctx;
  const Index d = 12, h = 28;
  using HostSwiGlu = nlb::SwiGluMlp<T, nlb::Dynamic, nlb::Dynamic, Host>;
  const HostSwiGlu host(normal_matrix<T>(d, h, 0.3, 21), normal_matrix<T>(d, h, 0.3, 22),
                        normal_matrix<T>(h, d, 0.3, 23));
  const auto device = nlb::to_backend(Cuda{}, host);
  static_assert(std::is_same_v<std::remove_const_t<decltype(device)>,
                               nlb::SwiGluMlp<T, nlb::Dynamic, nlb::Dynamic, Cuda>>);
  typename std::remove_const_t<decltype(device)>::Workspace ws;
  typename HostSwiGlu::Workspace host_ws;
  for (const Index rows : {Index{33}, Index{0}, Index{1}, Index{7}}) {
    for (const Index pad : {Index{0}, Index{3}}) {
      BOOST_TEST_CONTEXT("T = " << rows << ", pad " << pad) {
        const nlb::RowMatrix<T> X =
            normal_matrix<T>(rows, d, 1.0, 60 + static_cast<unsigned>(rows));
        const Padded<T> dX(ctx, X, pad);
        Padded<T> dY(ctx, nlb::RowMatrix<T>::Zero(rows, d), pad);
        nlb::RowMatrix<T> Y(rows, d);
        BOOST_TEST(device.forward(ctx, dX.view, dY.view, ws).full == rows);
        host.forward(host_ctx, X, Y, host_ws);
        const double err = scaled_error(nlb::cuda::download(ctx, dY.view), Y);
        BOOST_TEST_MESSAGE("SwiGluMlp: " << err);
        BOOST_TEST(err <= mlp_rel<T>());
      }
    }
  }
}

// Thresholds between consecutive host scores (where no rounding can move a row across), plus
// ±inf: the device must route the same rows and agree on every output, through GatedMLP::forward
// and through the callable gated_route as Block runs it (the device parts referred to).
template <class T, class Act>
void check_gated() {
  DeviceContext ctx;
  HostContext host_ctx;
  const Index d = 12, h = 40, rows = 41;
  auto host = host_layer<T, Act>(d, h, 11);
  const nlb::RowMatrix<T> X = normal_matrix<T>(rows, d, 1.0, 12);
  const nlb::ColVector<T> scores = host.gate().score(X);
  std::vector<T> sorted(scores.data(), scores.data() + scores.size());
  std::sort(sorted.begin(), sorted.end());
  std::vector<T> thresholds = {static_cast<T>(-inf)};
  for (const std::size_t i : {std::size_t{0}, std::size_t{9}, std::size_t{20}, std::size_t{39}})
    thresholds.push_back((sorted[i] + sorted[i + 1]) / 2);
  thresholds.push_back(static_cast<T>(inf));
  const Padded<T> dX(ctx, X, 2);
  Padded<T> dY(ctx, nlb::RowMatrix<T>::Zero(rows, d), 1);
  typename HostGated<T, Act>::Workspace host_ws;
  for (const T threshold : thresholds) {
    BOOST_TEST_CONTEXT("threshold " << threshold) {
      host.gate().set_threshold(threshold);
      const auto device = nlb::to_backend(Cuda{}, host);
      static_assert(std::is_same_v<std::remove_const_t<decltype(device)>,
                                   typename HostGated<T, Act>::template on_backend<Cuda>>);
      typename std::remove_const_t<decltype(device)>::Workspace ws;
      nlb::Activations<T> Y(rows, d);
      const nlb::RouteCounts want = host.forward(host_ctx, X, Y, host_ws);
      const nlb::RouteCounts got = device.forward(ctx, dX.view, dY.view, ws);
      BOOST_TEST(got.linear == want.linear);
      BOOST_TEST(got.full == want.full);
      const nlb::RowMatrix<T> Y_device = nlb::cuda::download(ctx, dY.view);
      const double err = scaled_error(Y_device, Y);
      BOOST_TEST_MESSAGE("GatedMLP, " << got.linear << " linear rows: " << err);
      BOOST_TEST(err <= mlp_rel<T>());

      // The same routing through the callable form, into a fresh output.
      nlb::RoutingWorkspace<T, nlb::Dynamic, Cuda> routing;
      nlb::cuda::DeviceMatrix<T> dY2(rows, d);
      const nlb::RouteCounts routed = nlb::gated_route(
          ctx, dX.view, dY2, device.gate(), routing,
          [&](const auto& in, auto&& out) {
            device.surrogate().forward(ctx, in, out, ws.mlp.scratch);
          },
          [&](const auto& in, auto&& out) { device.mlp().forward(ctx, in, out, ws.mlp); });
      BOOST_TEST(routed.linear == got.linear);
      BOOST_TEST((nlb::cuda::download(ctx, dY2).array() == Y_device.array()).all());
    }
  }
}

}  // namespace

BOOST_AUTO_TEST_CASE(mlp_family_float_tanh) {
  check_mlp_family<float, nlb::GeluTanh>();
}
BOOST_AUTO_TEST_CASE(mlp_family_double_erf) {
  check_mlp_family<double, nlb::GeluErf>();
}
BOOST_AUTO_TEST_CASE(swiglu_mlp_float) {
  check_swiglu<float>();
}
BOOST_AUTO_TEST_CASE(swiglu_mlp_double) {
  check_swiglu<double>();
}
BOOST_AUTO_TEST_CASE(gated_float_tanh) {
  check_gated<float, nlb::GeluTanh>();
}
BOOST_AUTO_TEST_CASE(gated_double_erf) {
  check_gated<double, nlb::GeluErf>();
}

BOOST_AUTO_TEST_CASE(gated_mlp_refuses_mismatched_parts) {
  const auto host = host_layer<float, nlb::GeluTanh>(12, 40, 1);
  const auto other = host_layer<float, nlb::GeluTanh>(8, 32, 1);
  using Device = HostGated<float, nlb::GeluTanh>::on_backend<Cuda>;
  BOOST_CHECK_THROW(
      Device(nlb::to_backend(Cuda{}, host.mlp()), nlb::to_backend(Cuda{}, other.surrogate()),
             nlb::to_backend(Cuda{}, host.gate())),
      nlb::ShapeError);
  // A width mismatch of the call itself, before anything runs.
  DeviceContext ctx;
  const auto device = nlb::to_backend(Cuda{}, host);
  Device::Workspace ws;
  nlb::cuda::DeviceMatrix<float> X(4, 8), Y(4, 12);
  BOOST_CHECK_THROW(device.forward(ctx, X, Y, ws), nlb::ShapeError);
}

// Without a usable device the nvcc build reports Skipped to CTest (SKIP_RETURN_CODE 77), never
// Passed; the host-system build always runs.
int main(int argc, char* argv[]) {
  const nlb::cuda::DeviceStatus status = nlb::cuda::device_status();
  if (!status.usable) {
    std::cout << "test_cuda_mlp: skipped: " << status.description << "\n";
    return 77;
  }
  return boost::unit_test::unit_test_main(&init_unit_test, argc, argv);
}
