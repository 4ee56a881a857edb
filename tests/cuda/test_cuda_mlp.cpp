// The CUDA backend's operations and MLP family against the CPU: ops::gemm (cuda) against a
// double triple loop at every transpose, stride and scalar factor, with two planted errors in
// the operand swap that the check must catch; gathers, scatters and the stable partition against
// std::; Mlp, RidgeSurrogate, HyperplaneGate and GatedMLP on backend::cuda against the scalar CPU
// oracle with the same weights (float and double, T in {0, 1, odd sizes}, thresholds from -inf
// to +inf with equal RouteCounts).
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
#include <numeric>
#include <string>
#include <vector>

#include "nlb/cuda/gated_mlp.cuh"
#include "nlb/mlp/gated_mlp.hpp"
#include "random_mlp.hpp"
#include "test_random.hpp"
#include "tolerances.hpp"

namespace {

using nlb::Index;
using nlb::test::normal_matrix;
using Cuda = nlb::backend::cuda;
using DeviceContext = nlb::Context<Cuda>;

constexpr double inf = std::numeric_limits<double>::infinity();

// max |a - b| / max(1, max |b|): normwise relative to the reference's scale.
template <class A, class B>
double scaled_error(const A& a, const B& b) {
  if (b.size() == 0)
    return a.size() == 0 ? 0.0 : inf;
  const Eigen::MatrixXd bd = b.template cast<double>();
  const double scale = std::max(1.0, bd.cwiseAbs().maxCoeff());
  return (a.template cast<double>() - bd).cwiseAbs().maxCoeff() / scale;
}

template <class T>
double mlp_rel() {
  return std::is_same_v<T, float> ? nlb::test::tol::mlp_float_rel : nlb::test::tol::mlp_double_rel;
}

// ---- ops::gemm ---------------------------------------------------------------------------

// The largest |got - exact| / bound over the entries, with exact = c0·beta + alpha·op(a)·op(b)
// in double and bound = factor · γ_(k+2) · (|alpha|·|op(a)|·|op(b)| + |beta c0|) (tolerances.hpp).
template <class T>
double gemm_error_over_bound(const nlb::RowMatrix<T>& got, const Eigen::MatrixXd& a,
                             const Eigen::MatrixXd& b, const Eigen::MatrixXd& c0, double alpha,
                             double beta) {
  const double u = std::numeric_limits<T>::epsilon() / 2;
  const double kk = static_cast<double>(a.cols() + 2);
  const double gamma = kk * u / (1 - kk * u);
  double worst = 0;
  for (Index i = 0; i < got.rows(); ++i) {
    for (Index j = 0; j < got.cols(); ++j) {
      double exact = beta * c0(i, j), scale = std::abs(beta * c0(i, j));
      for (Index p = 0; p < a.cols(); ++p) {
        exact += alpha * a(i, p) * b(p, j);
        scale += std::abs(alpha * a(i, p) * b(p, j));
      }
      const double bound =
          nlb::test::tol::gemm_bound_factor * gamma * scale + std::numeric_limits<T>::min();
      worst = std::max(worst, std::abs(static_cast<double>(got(i, j)) - exact) / bound);
    }
  }
  return worst;
}

// A device matrix of shape [rows, cols] stored with row stride cols + pad, holding `values`.
template <class T>
struct PaddedDevice {
  nlb::cuda::DeviceMatrix<T> storage;
  nlb::cuda::DeviceView<T> view;
  PaddedDevice(const Eigen::MatrixXd& values, Index pad) {
    nlb::RowMatrix<T> padded =
        nlb::RowMatrix<T>::Constant(values.rows(), values.cols() + pad, T(7));
    padded.leftCols(values.cols()) = values.cast<T>();
    storage = nlb::cuda::upload(padded);
    view = storage.view();
    view.cols = values.cols();
  }
};

template <class T>
void check_gemm_shapes() {
  DeviceContext ctx;
  struct Shape {
    Index m, k, n;
  };
  const Shape shapes[] = {{1, 1, 1}, {3, 5, 7}, {17, 1, 9}, {8, 33, 1}, {13, 40, 21}, {4, 0, 3}};
  std::uint64_t seed = 100;
  for (const Shape& s : shapes) {
    for (const bool ta : {false, true}) {
      for (const bool tb : {false, true}) {
        for (const Index pad : {Index{0}, Index{3}}) {
          const Eigen::MatrixXd a = nlb::test::gaussian(s.m, s.k, seed++);
          const Eigen::MatrixXd b = nlb::test::gaussian(s.k, s.n, seed++);
          const Eigen::MatrixXd c0 = nlb::test::gaussian(s.m, s.n, seed++);
          // Operands as stored: op(x) = x, or x stored transposed.
          const Eigen::MatrixXd a_stored = ta ? Eigen::MatrixXd(a.transpose()) : a;
          const Eigen::MatrixXd b_stored = tb ? Eigen::MatrixXd(b.transpose()) : b;
          // Round the operands to T first, so the reference multiplies what the device sees.
          const Eigen::MatrixXd ar = a.cast<T>().template cast<double>();
          const Eigen::MatrixXd br = b.cast<T>().template cast<double>();
          const Eigen::MatrixXd cr = c0.cast<T>().template cast<double>();
          for (const auto& [alpha, beta] : {std::pair{1.0, 0.0}, std::pair{-0.5, 1.5}}) {
            PaddedDevice<T> da(a_stored, pad), db(b_stored, pad), dc(c0, pad);
            nlb::ops::gemm<T>(ctx, da.view, db.view, dc.view, static_cast<T>(alpha),
                              static_cast<T>(beta), ta, tb);
            const auto got = nlb::cuda::download(dc.view);
            BOOST_TEST_CONTEXT("m " << s.m << " k " << s.k << " n " << s.n << " ta " << ta << " tb "
                                    << tb << " pad " << pad << " alpha " << alpha << " beta "
                                    << beta) {
              BOOST_TEST(gemm_error_over_bound<T>(got, ar, br, cr, alpha, beta) <= 1.0);
            }
          }
        }
      }
    }
  }
}

template <class T>
nlb::RowMatrix<T> run_mutant(DeviceContext& ctx, const Eigen::MatrixXd& a, const Eigen::MatrixXd& b,
                             Index pad, bool unswap, bool drop_stride) {
  PaddedDevice<T> da(a, pad), db(b, pad), dc(Eigen::MatrixXd::Zero(a.rows(), b.cols()), pad);
  auto call =
      nlb::cuda::detail::column_major_call<T>(da.view, false, db.view, false, dc.view, T(1), T(0));
  if (unswap) {  // the row-major operands passed to the column-major library as they are
    std::swap(call.a, call.b);
    std::swap(call.lda, call.ldb);
  }
  if (drop_stride)  // the width taken for the leading dimension
    call.lda = db.view.cols;
  nlb::cuda::detail::run_gemm(ctx, call);
  return nlb::cuda::download(dc.view);
}

// ---- the MLP family ------------------------------------------------------------------------

template <class T, class Act>
using HostMlp = nlb::Mlp<T, nlb::Dynamic, nlb::Dynamic, Act, nlb::backend::scalar>;
template <class T>
using HostSurrogate = nlb::RidgeSurrogate<T, nlb::Dynamic, nlb::Dynamic, nlb::backend::scalar>;
template <class T>
using HostGate = nlb::HyperplaneGate<T, nlb::Dynamic, nlb::backend::scalar>;
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

template <class T, class Act>
void check_mlp_family() {
  DeviceContext ctx;
  const Index d = 12, h = 40;
  auto host = host_layer<T, Act>(d, h, 7);
  const auto device_mlp = nlb::to_backend(Cuda{}, host.mlp());
  const auto device_surrogate = nlb::to_backend(Cuda{}, host.surrogate());
  const auto device_gate = nlb::to_backend(Cuda{}, host.gate());
  typename std::remove_const_t<decltype(device_mlp)>::Workspace ws;
  for (const Index rows : {Index{0}, Index{1}, Index{7}, Index{33}}) {
    BOOST_TEST_CONTEXT("T = " << rows) {
      const nlb::RowMatrix<T> X = normal_matrix<T>(rows, d, 1.0, 50 + static_cast<unsigned>(rows));
      const auto dX = nlb::cuda::upload(X);
      nlb::cuda::DeviceMatrix<T> dY(rows, d), dscores(rows, 1);

      device_mlp.forward(ctx, dX.view(), dY.view(), ws);
      const nlb::RowMatrix<T> mlp_ref = host.mlp().forward(X);
      const double mlp_err = scaled_error(nlb::cuda::download(dY.view()), mlp_ref);
      BOOST_TEST_MESSAGE("Mlp: " << mlp_err);
      BOOST_TEST(mlp_err <= mlp_rel<T>());

      device_surrogate.forward(ctx, dX.view(), dY.view());
      const nlb::RowMatrix<T> lin_ref = host.surrogate().forward(X);
      BOOST_TEST(scaled_error(nlb::cuda::download(dY.view()), lin_ref) <= mlp_rel<T>());

      device_gate.score(ctx, dX.view(), dscores.view());
      const nlb::ColVector<T> score_ref = host.gate().score(X);
      BOOST_TEST(scaled_error(nlb::cuda::download(dscores.view()), score_ref) <= mlp_rel<T>());
    }
  }
}

// Thresholds between consecutive host scores (where no rounding can move a row across), plus
// ±inf: the device must route the same rows and agree on every output.
template <class T, class Act>
void check_gated() {
  DeviceContext ctx;
  const Index d = 12, h = 40, rows = 41;
  auto host = host_layer<T, Act>(d, h, 11);
  nlb::RowMatrix<T> X = normal_matrix<T>(rows, d, 1.0, 12);
  const nlb::ColVector<T> scores = host.gate().score(X);
  std::vector<T> sorted(scores.data(), scores.data() + scores.size());
  std::sort(sorted.begin(), sorted.end());
  std::vector<T> thresholds = {static_cast<T>(-inf)};
  for (const std::size_t i : {std::size_t{0}, std::size_t{9}, std::size_t{20}, std::size_t{39}})
    thresholds.push_back((sorted[i] + sorted[i + 1]) / 2);
  thresholds.push_back(static_cast<T>(inf));
  const auto dX = nlb::cuda::upload(X);
  nlb::cuda::DeviceMatrix<T> dY(rows, d);
  for (const T threshold : thresholds) {
    BOOST_TEST_CONTEXT("threshold " << threshold) {
      host.gate().set_threshold(threshold);
      auto device = nlb::to_backend(Cuda{}, host);
      typename decltype(device)::Workspace ws;
      nlb::Activations<T> Y(rows, d);
      const nlb::RouteCounts want = host.forward(X, Y);
      const nlb::RouteCounts got = device.forward(ctx, dX.view(), dY.view(), ws);
      BOOST_TEST(got.linear == want.linear);
      BOOST_TEST(got.full == want.full);
      const double err = scaled_error(nlb::cuda::download(dY.view()), Y);
      BOOST_TEST_MESSAGE("GatedMLP, " << got.linear << " linear rows: " << err);
      BOOST_TEST(err <= mlp_rel<T>());
    }
  }
}

}  // namespace

BOOST_AUTO_TEST_CASE(device_status_and_context) {
  const auto status = nlb::cuda::device_status();
  BOOST_TEST_MESSAGE("device: " << status.description);
  BOOST_TEST(status.usable);
  DeviceContext ctx;
  BOOST_TEST((ctx.gemm_math() == nlb::cuda::GemmMath::fp32));
  float* scratch = ctx.scratch<float>(100);
  BOOST_TEST(reinterpret_cast<std::uintptr_t>(scratch) % 64 == 0);
}

BOOST_AUTO_TEST_CASE(gemm_float_within_summation_bound) {
  check_gemm_shapes<float>();
}
BOOST_AUTO_TEST_CASE(gemm_double_within_summation_bound) {
  check_gemm_shapes<double>();
}

// The check above must be able to fail: with the operands not swapped, or the leading dimension
// taken from the width instead of the stride, the same comparison reports errors far above the
// bound (square, in-bounds cases, so the mutant reads only valid memory).
BOOST_AUTO_TEST_CASE(planted_gemm_errors_are_caught) {
  DeviceContext ctx;
  const Eigen::MatrixXd a = nlb::test::gaussian(9, 9, 1), b = nlb::test::gaussian(9, 9, 2);
  const Eigen::MatrixXd zero = Eigen::MatrixXd::Zero(9, 9);
  const auto right = run_mutant<double>(ctx, a, b, 2, false, false);
  BOOST_TEST(gemm_error_over_bound<double>(right, a, b, zero, 1, 0) <= 1.0);
  const auto unswapped = run_mutant<double>(ctx, a, b, 0, true, false);
  BOOST_TEST(gemm_error_over_bound<double>(unswapped, a, b, zero, 1, 0) > 1e6);
  const auto wrong_stride = run_mutant<double>(ctx, a, b, 2, false, true);
  BOOST_TEST(gemm_error_over_bound<double>(wrong_stride, a, b, zero, 1, 0) > 1e6);
  // A leading dimension below the operand's rows is refused, as cuBLAS refuses it
  // (CUBLAS_STATUS_INVALID_VALUE), not read past.
  PaddedDevice<double> da(a, 0), db(b, 0), dc(zero, 0);
  auto call = nlb::cuda::detail::column_major_call<double>(da.view, false, db.view, false, dc.view,
                                                           1.0, 0.0);
  call.lda = call.m - 1;
  BOOST_CHECK_THROW(nlb::cuda::detail::run_gemm(ctx, call),
                    std::exception);  // ArgumentError here, a cuBLAS status error on a GPU
}

BOOST_AUTO_TEST_CASE(gemm_refuses_mismatched_shapes) {
  DeviceContext ctx;
  nlb::cuda::DeviceMatrix<float> a(3, 4), b(5, 2), c(3, 2);
  BOOST_CHECK_THROW(nlb::ops::gemm<float>(ctx, a.view(), b.view(), c.view()), nlb::ShapeError);
}

BOOST_AUTO_TEST_CASE(rows_gather_scatter_and_partition_match_std) {
  DeviceContext ctx;
  const Index n = 23, d = 5;
  const nlb::RowMatrix<double> X = normal_matrix<double>(n, d, 1.0, 3);
  const nlb::RowMatrix<double> scores = normal_matrix<double>(n, 1, 1.0, 4);
  const auto dX = nlb::cuda::upload(X);
  const auto dscores = nlb::cuda::upload(scores);
  thrust::device_vector<Index> order(static_cast<std::size_t>(n));
  Index* order_data = thrust::raw_pointer_cast(order.data());
  const Index above = nlb::ops::partition_rows<double>(ctx, dscores.view(), 0.25, order_data);

  std::vector<Index> want(static_cast<std::size_t>(n));
  std::iota(want.begin(), want.end(), Index{0});
  const auto middle =
      std::stable_partition(want.begin(), want.end(), [&](Index r) { return scores(r, 0) > 0.25; });
  BOOST_TEST(above == middle - want.begin());
  std::vector<Index> got(static_cast<std::size_t>(n));
  thrust::copy(order.begin(), order.end(), got.begin());
  BOOST_TEST(got == want, boost::test_tools::per_element());

  nlb::cuda::DeviceMatrix<double> gathered(n, d), back(n, d);
  nlb::ops::gather_rows<double>(ctx, dX.view(), order_data, gathered.view());
  const auto gathered_host = nlb::cuda::download(gathered.view());
  for (Index r = 0; r < n; ++r)
    BOOST_TEST(
        (gathered_host.row(r).array() == X.row(want[static_cast<std::size_t>(r)]).array()).all());
  nlb::ops::scatter_rows<double>(ctx, gathered.view(), order_data, back.view());
  BOOST_TEST((nlb::cuda::download(back.view()).array() == X.array()).all());

  const nlb::RowMatrix<double> bias = normal_matrix<double>(1, d, 1.0, 5);
  nlb::ops::add_row<double>(ctx, back.view(), nlb::cuda::upload(bias).view());
  const nlb::RowMatrix<double> want_sum = X.rowwise() + bias.row(0);
  BOOST_TEST((nlb::cuda::download(back.view()).array() == want_sum.array()).all());
}

BOOST_AUTO_TEST_CASE(elementwise_functors_match_cpu_kernels) {
  DeviceContext ctx;
  nlb::RowMatrix<float> x = normal_matrix<float>(3, 37, 3.0, 9);
  x(0, 0) = 0.0f;
  x(0, 1) = -40.0f;
  x(0, 2) = 40.0f;
  const auto check = [&](auto op, auto cpu_kernel, const char* name) {
    auto dx = nlb::cuda::upload(x);
    nlb::ops::transform(ctx, dx.view(), op);
    nlb::RowMatrix<float> want = x;
    cpu_kernel(want.data(), want.size());
    BOOST_TEST_CONTEXT(name) {
      // The host-system build runs the scalar loop's very formula; a GPU's libm differs by ulps.
      BOOST_TEST(scaled_error(nlb::cuda::download(dx.view()), want) <=
                 nlb::test::tol::kernel_float_rel);
    }
  };
  check(
      nlb::kernels::GeluTanhOp<>{},
      [](float* p, Index n) { nlb::kernels::gelu_tanh(nlb::backend::scalar{}, p, n); },
      "gelu_tanh");
  check(
      nlb::kernels::GeluErfOp<>{},
      [](float* p, Index n) { nlb::kernels::gelu_erf(nlb::backend::scalar{}, p, n); }, "gelu_erf");
}

BOOST_AUTO_TEST_CASE(mlp_family_float_tanh) {
  check_mlp_family<float, nlb::GeluTanh>();
}
BOOST_AUTO_TEST_CASE(mlp_family_double_erf) {
  check_mlp_family<double, nlb::GeluErf>();
}
BOOST_AUTO_TEST_CASE(gated_float_tanh) {
  check_gated<float, nlb::GeluTanh>();
}
BOOST_AUTO_TEST_CASE(gated_double_erf) {
  check_gated<double, nlb::GeluErf>();
}

BOOST_AUTO_TEST_CASE(gated_mlp_refuses_mismatched_parts) {
  auto host = host_layer<float, nlb::GeluTanh>(12, 40, 1);
  auto other = host_layer<float, nlb::GeluTanh>(8, 32, 1);
  using MlpD = decltype(nlb::to_backend(Cuda{}, host.mlp()));
  using SurD = decltype(nlb::to_backend(Cuda{}, host.surrogate()));
  using GateD = decltype(nlb::to_backend(Cuda{}, host.gate()));
  BOOST_CHECK_THROW((nlb::GatedMLP<MlpD, SurD, GateD>(nlb::to_backend(Cuda{}, host.mlp()),
                                                      nlb::to_backend(Cuda{}, other.surrogate()),
                                                      nlb::to_backend(Cuda{}, host.gate()))),
                    nlb::ShapeError);
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
