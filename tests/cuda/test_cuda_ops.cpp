// The low layer of backend::cuda (nlb/cuda/ops.cuh, row_ops.cuh) against the
// CPU ops of nlb/ops/ (backend::scalar, the oracle) on the same random data, within the tolerance
// table: every op, on padded (strided) views; the batched products at every transpose against a
// double reference with the classical bound; cuBLAS's int limits refused before any memory is
// touched; and the host waits the context counts.
//
// Built twice (docs/cuda.md): with g++ and thrust's host device system, where it runs on any
// machine and tests the algorithms (cuBLAS's arguments go to a reference GEMM); and with nvcc,
// where it reports Skipped (exit 77) unless a usable GPU is present.
#define BOOST_TEST_NO_MAIN
#include <boost/test/unit_test.hpp>
#include <cmath>
#include <cstdint>
#include <iostream>
#include <limits>
#include <numeric>
#include <span>
#include <string>
#include <vector>

#include "nlb/cuda/ops.cuh"
#include "nlb/cuda/row_ops.cuh"
#include "nlb/kernels/elementwise.hpp"
#include "nlb/ops.hpp"
#include "test_random.hpp"
#include "tolerances.hpp"

namespace {

namespace tol = nlb::test::tol;
using nlb::Index;
using nlb::RowMatrix;
using Cuda = nlb::backend::cuda;
using Host = nlb::backend::scalar;
using DeviceContext = nlb::Context<Cuda>;
using DeviceScratch = nlb::ops::Scratch<Cuda, float>;
using HostScratch = nlb::ops::Scratch<Host, float>;

RowMatrix<float> random(Index rows, Index cols, std::uint64_t seed) {
  return nlb::test::gaussian(rows, cols, seed).cast<float>();
}

// max |a − b| / max(1, max |b|): normwise relative to the reference's scale.
template <class A, class B>
double scaled_error(const A& a, const B& b) {
  if (a.rows() != b.rows() || a.cols() != b.cols())
    return std::numeric_limits<double>::infinity();
  if (b.size() == 0)
    return 0.0;
  const Eigen::MatrixXd bd = b.template cast<double>();
  return (a.template cast<double>() - bd).cwiseAbs().maxCoeff() /
         std::max(1.0, bd.cwiseAbs().maxCoeff());
}

// max over entries of |a − b| / (abs + rel·|b|): <= 1 passes the mixed bound of the kernels.
template <class A, class B>
double mixed_error(const A& a, const B& b, double rel, double abs) {
  double worst = a.size() == b.size() ? 0.0 : std::numeric_limits<double>::infinity();
  for (Index i = 0; i < b.rows(); ++i)
    for (Index j = 0; j < b.cols(); ++j) {
      const double want = static_cast<double>(b(i, j));
      worst = std::max(
          worst, std::abs(static_cast<double>(a(i, j)) - want) / (abs + rel * std::abs(want)));
    }
  return worst;
}

// A device copy of m stored with `pad` extra columns (row stride cols + pad, the padding 7), and
// the [rows, cols] view of it: every op is run on strided views.
struct Padded {
  nlb::cuda::DeviceMatrix<float> storage;
  nlb::cuda::DeviceView<float> view;
  Padded(DeviceContext& ctx, const RowMatrix<float>& m, Index pad = 3) {
    RowMatrix<float> padded = RowMatrix<float>::Constant(m.rows(), m.cols() + pad, 7.0f);
    padded.leftCols(m.cols()) = m;
    storage = nlb::cuda::upload(ctx, padded);
    view = storage.leftCols(m.cols());
  }
};

// The classical bound of a length-k dot product (tolerances.hpp: gemm_bound_factor), as the
// largest |got − exact| / bound over the entries of c_i = alpha op(a_i) op(b_i) + beta c0_i.
double gemm_error_over_bound(const Eigen::MatrixXd& got, const Eigen::MatrixXd& a,
                             const Eigen::MatrixXd& b, const Eigen::MatrixXd& c0, double alpha,
                             double beta) {
  const double u = std::numeric_limits<float>::epsilon() / 2;
  const double kk = static_cast<double>(a.cols() + 2), gamma = kk * u / (1 - kk * u);
  const Eigen::MatrixXd exact = alpha * a * b + beta * c0;
  const Eigen::MatrixXd scale =
      std::abs(alpha) * a.cwiseAbs() * b.cwiseAbs() + std::abs(beta) * c0.cwiseAbs();
  double worst = 0;
  for (Index i = 0; i < got.rows(); ++i)
    for (Index j = 0; j < got.cols(); ++j)
      worst = std::max(
          worst, std::abs(got(i, j) - exact(i, j)) / (tol::gemm_bound_factor * gamma * scale(i, j) +
                                                      std::numeric_limits<float>::min()));
  return worst;
}

}  // namespace

// The batched product behind every op (detail::product) at every transpose, with padding and
// three heads side by side, against a double reference with the classical bound. A product with
// its operands unswapped must fail it (the check can see a wrong operand swap).
BOOST_AUTO_TEST_CASE(batched_products_at_every_transpose) {
  DeviceContext ctx;
  const Index heads = 3;
  std::uint64_t seed = 1;
  struct Shape {
    Index m, k, n;
  };
  const Shape shapes[] = {{1, 1, 1}, {5, 7, 3}, {17, 1, 9}, {8, 33, 1}, {13, 40, 21}, {4, 0, 3}};
  for (const auto& [m, k, n] : shapes) {
    for (const bool ta : {false, true})
      for (const bool tb : {false, true}) {
        // Operands as stored, heads side by side: op(a_h) [m, k] is column block h of a.
        const Index wa = ta ? m : k, wb = tb ? k : n;
        const RowMatrix<float> a = random(ta ? k : m, heads * wa, seed++);
        const RowMatrix<float> b = random(tb ? n : k, heads * wb, seed++);
        const RowMatrix<float> c0 = random(m, heads * n, seed++);
        Padded da(ctx, a), db(ctx, b), dc(ctx, c0);
        nlb::cuda::detail::product<float>(ctx, "test", da.view.leftCols(wa), ta,
                                          db.view.leftCols(wb), tb, dc.view.leftCols(n), -0.5f,
                                          1.5f, heads, wa, wb, n);
        const RowMatrix<float> got = nlb::cuda::download(ctx, dc.view);
        for (Index h = 0; h < heads; ++h) {
          const Eigen::MatrixXd ah = a.middleCols(h * wa, wa).cast<double>();
          const Eigen::MatrixXd bh = b.middleCols(h * wb, wb).cast<double>();
          BOOST_TEST_CONTEXT("m " << m << " k " << k << " n " << n << " ta " << ta << " tb " << tb
                                  << " head " << h) {
            BOOST_TEST(gemm_error_over_bound(got.middleCols(h * n, n).cast<double>(),
                                             ta ? Eigen::MatrixXd(ah.transpose()) : ah,
                                             tb ? Eigen::MatrixXd(bh.transpose()) : bh,
                                             c0.middleCols(h * n, n).cast<double>(), -0.5,
                                             1.5) <= 1.0);
          }
        }
      }
  }
  // The mutant: the row-major operands handed to the column-major library as they are, which
  // computes b·a for square operands. The check must see it.
  const RowMatrix<float> a = random(6, 6, 90), b = random(6, 6, 91);
  Padded da(ctx, a), db(ctx, b), dc(ctx, RowMatrix<float>::Zero(6, 6));
  auto call = nlb::cuda::detail::column_major_call<float>("test", da.view, false, db.view, false,
                                                          dc.view, 1.0f, 0.0f);
  std::swap(call.a, call.b);
  std::swap(call.lda, call.ldb);
  nlb::cuda::detail::run_gemm(ctx, "test", call);
  const Eigen::MatrixXd zero = Eigen::MatrixXd::Zero(6, 6);
  BOOST_TEST(gemm_error_over_bound(nlb::cuda::download(ctx, dc.view).cast<double>(),
                                   a.cast<double>(), b.cast<double>(), zero, 1.0, 0.0) > 1.0);
}

// gemm, gemm_nt (accumulating too) and gemm_bias against the CPU ops.
BOOST_AUTO_TEST_CASE(gemm_family) {
  DeviceContext ctx;
  DeviceScratch ds;
  nlb::Context<Host> host;
  HostScratch hs;
  for (const Index rows : {Index{1}, Index{7}, Index{40}}) {
    const RowMatrix<float> x = random(rows, 24, 10), w = random(24, 18, 11),
                           wt = random(18, 24, 12), bias = random(1, 18, 13),
                           y0 = random(rows, 18, 14);
    Padded dx(ctx, x), dw(ctx, w), dwt(ctx, wt), dy(ctx, y0);
    const auto dbias = nlb::cuda::upload(ctx, bias);
    RowMatrix<float> want = y0;
    BOOST_TEST_CONTEXT("T = " << rows) {
      nlb::ops::gemm(ctx, dx.view, dw.storage.leftCols(18), dy.view, ds);
      nlb::ops::gemm(host, x, w, want, hs);
      BOOST_TEST(scaled_error(nlb::ops::to_host(ctx, dy.view), want) <= tol::mlp_float_rel);
      nlb::ops::gemm_nt(ctx, dx.view, dwt.view, dy.view, ds, /*accumulate=*/true);
      nlb::ops::gemm_nt(host, x, wt, want, hs, true);
      BOOST_TEST(scaled_error(nlb::ops::to_host(ctx, dy.view), want) <= tol::mlp_float_rel);
      nlb::ops::gemm_bias(ctx, dx.view, dw.view, dbias, dy.view, ds);
      nlb::ops::gemm_bias(host, x, w, bias, want, hs);
      BOOST_TEST(scaled_error(nlb::ops::to_host(ctx, dy.view), want) <= tol::mlp_float_rel);
    }
  }
  nlb::cuda::DeviceMatrix<float> wrong(5, 18);
  Padded dx(ctx, random(3, 24, 15));
  BOOST_CHECK_THROW(nlb::ops::gemm(ctx, dx.view, wrong, wrong, ds), nlb::ShapeError);
}

// add, copy, scale, scale_columns, transform, gather_rows and scatter_rows against the CPU ops:
// the same operations in the same order, so equal up to the device's elementwise math.
BOOST_AUTO_TEST_CASE(elementwise_and_row_movement) {
  DeviceContext ctx;
  nlb::Context<Host> host;
  const Index rows = 9, cols = 37;
  const RowMatrix<float> a = random(rows, cols, 20), b = random(rows, cols, 21);
  RowMatrix<float> y = random(rows, cols, 22);
  const nlb::RowVector<float> diagonal = random(1, cols, 23);
  Padded da(ctx, a), db(ctx, b), dy(ctx, y);
  const auto ddiag = nlb::cuda::upload(ctx, diagonal);

  nlb::ops::add(ctx, da.view, dy.view);
  nlb::ops::add(host, a, y);
  BOOST_TEST(scaled_error(nlb::ops::to_host(ctx, dy.view), y) == 0.0);
  nlb::ops::add(ctx, da.view, db.storage.leftCols(cols), dy.view);
  nlb::ops::add(host, a, b, y);
  BOOST_TEST(scaled_error(nlb::ops::to_host(ctx, dy.view), y) == 0.0);
  nlb::ops::scale(ctx, dy.view, 0.75f);
  nlb::ops::scale(host, y, 0.75f);
  BOOST_TEST(scaled_error(nlb::ops::to_host(ctx, dy.view), y) == 0.0);
  nlb::ops::scale_columns(ctx, da.view, ddiag, dy.view, -1.25f);
  nlb::ops::scale_columns(host, a, diagonal, y, -1.25f);
  BOOST_TEST(scaled_error(nlb::ops::to_host(ctx, dy.view), y) == 0.0);
  nlb::ops::transform(ctx, dy.view, nlb::kernels::GeluTanhOp<>{});
  nlb::ops::transform(host, y, nlb::kernels::GeluTanhOp<>{});
  BOOST_TEST(mixed_error(nlb::ops::to_host(ctx, dy.view), y, tol::kernel_float_rel,
                         tol::kernel_float_abs) <= 1.0);
  nlb::ops::copy(ctx, db.view, dy.view);
  BOOST_TEST(scaled_error(nlb::ops::to_host(ctx, dy.view), b) == 0.0);

  // Rows 8, 0, 5 gathered, then scattered back into a copy of a, by the whole index vector and
  // by a [3, 1] view of entries 1..3 of a longer one.
  const std::vector<Index> picked = {8, 0, 5};
  const thrust::device_vector<Index> device_rows(picked.begin(), picked.end());
  RowMatrix<float> block(3, cols), want_block(3, cols);
  Padded dblock(ctx, RowMatrix<float>::Zero(3, cols));
  nlb::ops::gather_rows(ctx, da.view, device_rows, dblock.view);
  nlb::ops::gather_rows(host, a, std::span<const Index>(picked), want_block);
  BOOST_TEST(scaled_error(nlb::ops::to_host(ctx, dblock.view), want_block) == 0.0);
  const std::vector<Index> longer = {1, 8, 0, 5, 2};
  const thrust::device_vector<Index> device_longer(longer.begin(), longer.end());
  const nlb::cuda::DeviceView<const Index> range(thrust::raw_pointer_cast(device_longer.data()) + 1,
                                                 3, 1, 1);
  Padded dz(ctx, RowMatrix<float>::Zero(rows, cols));
  RowMatrix<float> z = RowMatrix<float>::Zero(rows, cols);
  nlb::ops::scatter_rows(ctx, dblock.view, range, dz.view);
  nlb::ops::scatter_rows(host, want_block, std::span<const Index>(picked), z);
  BOOST_TEST(scaled_error(nlb::ops::to_host(ctx, dz.view), z) == 0.0);
  BOOST_CHECK_THROW(nlb::ops::gather_rows(ctx, da.view, range, dz.view), nlb::ShapeError);
}

// LayerNorm rows out of place and in place, against the scalar CPU kernel (whose order the
// host-system build follows; the device's warp sums add in another).
BOOST_AUTO_TEST_CASE(layer_norm_rows) {
  DeviceContext ctx;
  nlb::Context<Host> host;
  for (const Index d : {Index{1}, Index{5}, Index{33}, Index{768}}) {
    BOOST_TEST_CONTEXT("d = " << d) {
      const RowMatrix<float> x = random(6, d, 30);
      const nlb::RowVector<float> gamma = random(1, d, 31), beta = random(1, d, 32);
      Padded dx(ctx, x), dy(ctx, RowMatrix<float>::Zero(6, d));
      const auto dgamma = nlb::cuda::upload(ctx, gamma), dbeta = nlb::cuda::upload(ctx, beta);
      RowMatrix<float> want(6, d);
      nlb::ops::layer_norm_rows(ctx, dx.view, dgamma, dbeta, dy.view, 1e-5f);
      nlb::ops::layer_norm_rows(host, x, gamma, beta, want, 1e-5f);
      const double err = mixed_error(nlb::ops::to_host(ctx, dy.view), want, tol::kernel_float_rel,
                                     tol::kernel_float_abs);
      BOOST_TEST_MESSAGE("layer_norm_rows d " << d << ": " << err << " of the bound");
      BOOST_TEST(err <= 1.0);
      nlb::ops::layer_norm_rows(ctx, dx.view, dgamma, dbeta, dx.view, 1e-5f);  // in place
      BOOST_TEST(mixed_error(nlb::ops::to_host(ctx, dx.view), want, tol::kernel_float_rel,
                             tol::kernel_float_abs) <= 1.0);
    }
  }
  Padded dx(ctx, random(2, 4, 33));
  const auto g = nlb::cuda::upload(ctx, RowMatrix<float>::Ones(1, 4));
  BOOST_CHECK_THROW(nlb::ops::layer_norm_rows(ctx, dx.view, g, g, dx.view, -1.0f),
                    nlb::ArgumentError);
  BOOST_CHECK_THROW(nlb::ops::layer_norm_rows(ctx, dx.view, g, g, dx.storage, 1e-5f),
                    nlb::ShapeError);
}

// RMSNorm rows (the Llama family's norm) out of place and in place, against the scalar CPU
// kernel; then y ⊙= a (the SwiGLU MLP's product) against Eigen's.
BOOST_AUTO_TEST_CASE(rms_norm_rows_and_multiply) {
  DeviceContext ctx;
  nlb::Context<Host> host;
  for (const Index d : {Index{1}, Index{5}, Index{33}, Index{768}}) {
    BOOST_TEST_CONTEXT("d = " << d) {
      const RowMatrix<float> x = random(6, d, 40);
      const nlb::RowVector<float> weight = random(1, d, 41);
      Padded dx(ctx, x), dy(ctx, RowMatrix<float>::Zero(6, d));
      const auto dweight = nlb::cuda::upload(ctx, weight);
      RowMatrix<float> want(6, d);
      nlb::ops::rms_norm_rows(ctx, dx.view, dweight, dy.view, 1e-6f);
      nlb::ops::rms_norm_rows(host, x, weight, want, 1e-6f);
      const double err = mixed_error(nlb::ops::to_host(ctx, dy.view), want, tol::kernel_float_rel,
                                     tol::kernel_float_abs);
      BOOST_TEST_MESSAGE("rms_norm_rows d " << d << ": " << err << " of the bound");
      BOOST_TEST(err <= 1.0);
      nlb::ops::rms_norm_rows(ctx, dx.view, dweight, dx.view, 1e-6f);  // in place
      BOOST_TEST(mixed_error(nlb::ops::to_host(ctx, dx.view), want, tol::kernel_float_rel,
                             tol::kernel_float_abs) <= 1.0);
      const RowMatrix<float> a = nlb::ops::to_host(ctx, dy.view),
                             b = nlb::ops::to_host(ctx, dx.view);
      nlb::ops::multiply(ctx, dy.view, dx.view);  // x ⊙= y
      const RowMatrix<float> product = (a.array() * b.array()).matrix();
      BOOST_TEST(scaled_error(nlb::ops::to_host(ctx, dx.view), product) == 0.0);
    }
  }
  Padded dx(ctx, random(2, 4, 43));
  const auto w = nlb::cuda::upload(ctx, RowMatrix<float>::Ones(1, 4));
  BOOST_CHECK_THROW(nlb::ops::rms_norm_rows(ctx, dx.view, w, dx.view, -1.0f), nlb::ArgumentError);
  BOOST_CHECK_THROW(nlb::ops::rms_norm_rows(ctx, dx.view, w, dx.storage, 1e-6f), nlb::ShapeError);
  const auto narrow = nlb::cuda::upload(ctx, RowMatrix<float>::Ones(1, 3));
  BOOST_CHECK_THROW(nlb::ops::rms_norm_rows(ctx, dx.view, narrow, dx.view, 1e-6f), nlb::ShapeError);
}

// The stable partition against the CPU's, NaN scores included, at thresholds from −inf to +inf;
// each read-back is one counted wait.
BOOST_AUTO_TEST_CASE(partition_rows_matches_the_cpu) {
  DeviceContext ctx;
  nlb::Context<Host> host;
  const float nan = std::numeric_limits<float>::quiet_NaN(),
              inf = std::numeric_limits<float>::infinity();
  RowMatrix<float> scores = random(50, 1, 40);
  scores(3, 0) = nan;
  scores(17, 0) = nan;
  scores(20, 0) = inf;
  Padded ds(ctx, scores, 2);
  thrust::device_vector<Index> rows;
  std::vector<Index> want;
  for (const float threshold : {-inf, -0.5f, 0.0f, 1.0f, inf, nan}) {
    BOOST_TEST_CONTEXT("threshold " << threshold) {
      const std::int64_t before = ctx.synchronizations();
      const Index got = nlb::ops::partition_rows(ctx, ds.view, rows, threshold);
      BOOST_TEST(ctx.synchronizations() == before + 1);
      BOOST_TEST(got == nlb::ops::partition_rows(host, scores, want, threshold));
      const std::vector<Index> got_rows(rows.begin(), rows.end());
      BOOST_TEST(got_rows == want, boost::test_tools::per_element());
    }
  }
  const std::int64_t before = ctx.synchronizations();
  BOOST_TEST(nlb::ops::partition_rows(ctx, ds.view.topRows(0), rows, 0.0f) == 0);
  BOOST_TEST(rows.empty());
  BOOST_TEST(ctx.synchronizations() == before);  // nothing to read back
}

// The embedding with and without learned positions, after cached positions.
BOOST_AUTO_TEST_CASE(embed_rows) {
  DeviceContext ctx;
  DeviceScratch ds;
  nlb::Context<Host> host;
  HostScratch hs;
  const Index vocab = 30, d = 12, positions = 20;
  const RowMatrix<float> token = random(vocab, d, 50), position = random(positions, d, 51);
  Padded dtoken(ctx, token), dposition(ctx, position);
  const std::vector<std::int32_t> ids = {3, 29, 0, 7, 7, 15};
  const std::span<const std::int32_t> span(ids);
  Padded dx(ctx, RowMatrix<float>::Zero(6, d));
  RowMatrix<float> want(6, d);
  nlb::ops::embed_rows(ctx, dtoken.view, dposition.view, span, dx.view, 4, ds);
  nlb::ops::embed_rows(host, token, position, span, want, 4, hs);
  BOOST_TEST(scaled_error(nlb::ops::to_host(ctx, dx.view), want) == 0.0);
  const nlb::cuda::DeviceMatrix<float> none;
  nlb::ops::embed_rows(ctx, dtoken.view, none, span, dx.view, 0, ds);
  nlb::ops::embed_rows(host, token, RowMatrix<float>(), span, want, 0, hs);
  BOOST_TEST(scaled_error(nlb::ops::to_host(ctx, dx.view), want) == 0.0);
  const std::vector<std::int32_t> three = {1, 2, 3};
  BOOST_CHECK_THROW(nlb::ops::embed_rows(ctx, dtoken.view, none,
                                         std::span<const std::int32_t>(three), dx.view, 0, ds),
                    nlb::ShapeError);
}

// Rotary positions on [Q K] for full, partial and no rotation, after cached positions.
BOOST_AUTO_TEST_CASE(rotate_heads) {
  DeviceContext ctx;
  DeviceScratch ds;
  nlb::Context<Host> host;
  HostScratch hs;
  const Index heads = 3, head_dim = 8;
  for (const Index rotary : {Index{0}, Index{4}, Index{8}}) {
    BOOST_TEST_CONTEXT("rotary dims " << rotary) {
      RowMatrix<float> qk = random(7, 2 * heads * head_dim, 60);
      Padded dqk(ctx, qk);
      nlb::ops::rotate_heads(ctx, dqk.view, 2 * heads, rotary, 5, 10000.0, ds);
      nlb::ops::rotate_heads(host, qk, 2 * heads, rotary, 5, 10000.0, hs);
      BOOST_TEST(mixed_error(nlb::ops::to_host(ctx, dqk.view), qk, tol::kernel_float_rel,
                             tol::kernel_float_abs) <= 1.0);
    }
  }
  // Llama 3's frequency scaling (the three bands at head dim 8 with a short original context).
  nlb::kernels::RopeScaling llama3;
  llama3.kind = nlb::kernels::RopeScaling::Kind::llama3;
  llama3.factor = 8;
  llama3.original_max_positions = 64;
  RowMatrix<float> qk = random(7, 2 * heads * head_dim, 62), unscaled = qk;
  Padded dqk(ctx, qk);
  nlb::ops::rotate_heads(ctx, dqk.view, 2 * heads, head_dim, 900, 10000.0, ds, llama3);
  nlb::ops::rotate_heads(host, qk, 2 * heads, head_dim, 900, 10000.0, hs, llama3);
  nlb::ops::rotate_heads(host, unscaled, 2 * heads, head_dim, 900, 10000.0, hs);
  BOOST_TEST(mixed_error(nlb::ops::to_host(ctx, dqk.view), qk, tol::kernel_float_rel,
                         tol::kernel_float_abs) <= 1.0);
  BOOST_TEST(scaled_error(qk, unscaled) > 1e-3);  // the scaling changed the low frequencies
  Padded odd(ctx, random(2, 2 * heads * head_dim, 61));
  BOOST_CHECK_THROW(nlb::ops::rotate_heads(ctx, odd.view, 2 * heads, 3, 0, 10000.0, ds),
                    nlb::ArgumentError);
}

// Causal attention of every head at once against the CPU's tiled attention: T below, at and
// across the 128-query tile, with and without cached positions, value width != query width,
// multi-head, multi-query and grouped-query heads (H_kv of H, read from k's width).
BOOST_AUTO_TEST_CASE(causal_attention) {
  DeviceContext ctx;
  DeviceScratch ds;
  nlb::Context<Host> host;
  HostScratch hs;
  const Index wq = 8, wv = 5;
  std::uint64_t seed = 70;
  for (const auto& [heads, kv_heads] : {std::pair<Index, Index>{3, 3}, {3, 1}, {4, 2}})
    for (const Index rows : {Index{1}, Index{5}, Index{128}, Index{300}})
      for (const Index past : {Index{0}, Index{7}}) {
        BOOST_TEST_CONTEXT("heads " << heads << "/" << kv_heads << ", T = " << rows
                                    << ", past = " << past) {
          const RowMatrix<float> q = random(rows, heads * wq, seed++),
                                 k = random(past + rows, kv_heads * wq, seed++),
                                 v = random(past + rows, kv_heads * wv, seed++);
          Padded dq(ctx, q), dk(ctx, k), dv(ctx, v),
              dout(ctx, RowMatrix<float>::Zero(rows, heads * wv));
          RowMatrix<float> want(rows, heads * wv);
          const float scale = 1.0f / std::sqrt(static_cast<float>(wq));
          nlb::ops::causal_attention(ctx, dq.view, dk.view, dv.view, dout.view, heads, scale, past,
                                     ds);
          nlb::ops::causal_attention(host, q, k, v, want, heads, scale, past, hs);
          const double err = scaled_error(nlb::ops::to_host(ctx, dout.view), want);
          BOOST_TEST_MESSAGE("causal_attention T " << rows << " past " << past << ": " << err);
          BOOST_TEST(err <= tol::attention_float_rel);
        }
      }
  Padded dq(ctx, random(4, 6, 79));
  nlb::cuda::DeviceMatrix<float> out(4, 6);
  BOOST_CHECK_THROW(nlb::ops::causal_attention(ctx, dq.view, dq.view, dq.view, out, 4, 1.0f, 0, ds),
                    nlb::ShapeError);  // 4 heads do not divide 6 columns
}

// Linear attention against the CPU's chunked prefix sums: T below, at and across the 64-row
// chunk.
BOOST_AUTO_TEST_CASE(linear_attention) {
  DeviceContext ctx;
  DeviceScratch ds;
  nlb::Context<Host> host;
  HostScratch hs;
  const Index heads = 2, wk = 5, wv = 3;
  std::uint64_t seed = 80;
  for (const Index rows : {Index{1}, Index{63}, Index{64}, Index{65}, Index{150}}) {
    BOOST_TEST_CONTEXT("T = " << rows) {
      // Features φ(x) > 0, as ELU + 1 gives them.
      const RowMatrix<float> fq = (random(rows, heads * wk, seed++).array().abs() + 0.1f).matrix(),
                             fk = (random(rows, heads * wk, seed++).array().abs() + 0.1f).matrix(),
                             v = random(rows, heads * wv, seed++);
      Padded dq(ctx, fq), dk(ctx, fk), dv(ctx, v),
          dout(ctx, RowMatrix<float>::Zero(rows, heads * wv));
      RowMatrix<float> want(rows, heads * wv);
      nlb::ops::linear_attention(ctx, dq.view, dk.view, dv.view, dout.view, heads, ds);
      nlb::ops::linear_attention(host, fq, fk, v, want, heads, hs);
      const double err = scaled_error(nlb::ops::to_host(ctx, dout.view), want);
      BOOST_TEST_MESSAGE("linear_attention T " << rows << ": " << err);
      BOOST_TEST(err <= tol::attention_float_rel);
    }
  }
}

// Next-token losses in double against ops::next_token_losses on the scalar CPU backend (the
// same double arithmetic; the device adds in warp order): appended, one counted wait.
BOOST_AUTO_TEST_CASE(next_token_losses) {
  DeviceContext ctx;
  DeviceScratch ds;
  nlb::Context<Host> host;
  HostScratch hs;
  for (const Index vocab : {Index{1}, Index{50}, Index{1000}}) {
    BOOST_TEST_CONTEXT("vocab " << vocab) {
      const RowMatrix<float> logits = 4.0f * random(17, vocab, 90);
      std::vector<std::int32_t> ids(17);
      for (std::size_t t = 0; t < ids.size(); ++t)
        ids[t] = static_cast<std::int32_t>((t * 7) % static_cast<std::size_t>(vocab));
      Padded dlogits(ctx, logits);
      std::vector<double> got = {-1.0}, want = {-1.0};
      const std::int64_t before = ctx.synchronizations();
      nlb::ops::next_token_losses(ctx, dlogits.view, std::span<const std::int32_t>(ids), got, ds);
      BOOST_TEST(ctx.synchronizations() == before + 1);
      nlb::ops::next_token_losses(host, logits, std::span<const std::int32_t>(ids), want, hs);
      BOOST_REQUIRE(got.size() == want.size());
      for (std::size_t t = 0; t < got.size(); ++t)
        BOOST_TEST(std::abs(got[t] - want[t]) <=
                   tol::kernel_double_abs + tol::kernel_double_rel * std::abs(want[t]));
    }
  }
  std::vector<double> losses;
  const std::vector<std::int32_t> one = {0};
  Padded dlogits(ctx, random(1, 4, 91));
  nlb::ops::next_token_losses(ctx, dlogits.view, std::span<const std::int32_t>(one), losses, ds);
  BOOST_TEST(losses.empty());
  BOOST_CHECK_THROW(
      nlb::ops::next_token_losses(ctx, dlogits.view, std::span<const std::int32_t>(), losses, ds),
      nlb::ShapeError);
}

// A product whose sizes or row strides exceed cuBLAS's int is refused with ArgumentError naming
// the product and the size, before anything runs: the views below span billions of rows over a
// buffer of a few values, so any touch of their memory would fault.
BOOST_AUTO_TEST_CASE(sizes_past_cublas_int_are_refused) {
  DeviceContext ctx;
  DeviceScratch ds;
  nlb::cuda::DeviceMatrix<float> small(4, 4), bias(1, 4);
  const Index huge = Index{3} << 30;  // 3·2^30 > 2^31 − 1
  const nlb::cuda::DeviceView<float> tall(small.data(), huge, 4, 4);
  const auto message = [](const std::string& what, const std::string& name) {
    return [=](const nlb::ArgumentError& e) {
      const std::string text = e.what();
      BOOST_TEST_MESSAGE(text);
      return text.find(what) != std::string::npos && text.find(name) != std::string::npos &&
             text.find(std::to_string(Index{3} << 30)) != std::string::npos;
    };
  };
  BOOST_CHECK_EXCEPTION(nlb::ops::gemm(ctx, tall, small, tall, ds), nlb::ArgumentError,
                        message("ops::gemm (cuda)", "rows of the result"));
  BOOST_CHECK_EXCEPTION(nlb::ops::gemm_bias(ctx, tall, small, bias, tall, ds), nlb::ArgumentError,
                        message("ops::gemm_bias (cuda)", "rows of the result"));
  const nlb::cuda::DeviceView<float> wide_row(small.data(), 1, huge, huge);
  const nlb::cuda::DeviceView<float> tall_b(small.data(), huge, 1, 1);
  nlb::cuda::DeviceMatrix<float> one(1, 1);
  BOOST_CHECK_EXCEPTION(nlb::ops::gemm(ctx, wide_row, tall_b, one, ds), nlb::ArgumentError,
                        message("ops::gemm (cuda)", "inner dimension"));
  const nlb::cuda::DeviceView<float> strided(small.data(), 1, 4, huge);  // one row, huge stride
  nlb::cuda::DeviceMatrix<float> row_out(1, 4);
  BOOST_CHECK_EXCEPTION(nlb::ops::gemm(ctx, strided, small, row_out, ds), nlb::ArgumentError,
                        message("ops::gemm (cuda)", "row stride of a"));
}

// The waits a context counts: none for queued work (a dense layer's ops), one per read-back.
BOOST_AUTO_TEST_CASE(synchronizations_are_counted) {
  DeviceContext ctx;
  DeviceScratch ds;
  BOOST_TEST(ctx.synchronizations() == 0);
  BOOST_TEST(nlb::Context<Host>().synchronizations() == 0);
  Padded dx(ctx, random(8, 16, 100)), dw(ctx, random(16, 16, 101)), dy(ctx, random(8, 16, 102));
  const auto gamma = nlb::cuda::upload(ctx, random(1, 16, 103));
  const auto bias = nlb::cuda::upload(ctx, random(1, 16, 104));
  BOOST_TEST(ctx.synchronizations() == 0);  // uploads queue, they do not wait
  nlb::ops::layer_norm_rows(ctx, dx.view, gamma, bias, dx.view, 1e-5f);
  nlb::ops::gemm_bias(ctx, dx.view, dw.view, bias, dy.view, ds);
  nlb::ops::transform(ctx, dy.view, nlb::kernels::GeluErfOp<>{});
  nlb::ops::add(ctx, dx.view, dy.view);
  BOOST_TEST(ctx.synchronizations() == 0);
  const RowMatrix<float> host = nlb::ops::to_host(ctx, dy.view);
  BOOST_TEST(ctx.synchronizations() == 1);
  thrust::device_vector<Index> rows;
  nlb::ops::partition_rows(ctx, dy.view.leftCols(1), rows, 0.0f);
  BOOST_TEST(ctx.synchronizations() == 2);
  ctx.synchronize();
  BOOST_TEST(ctx.synchronizations() == 3);
  BOOST_TEST(host.allFinite());
}

// Without a usable device the nvcc build reports Skipped to CTest (SKIP_RETURN_CODE 77), never
// Passed.
int main(int argc, char* argv[]) {
  const nlb::cuda::DeviceStatus status = nlb::cuda::device_status();
  if (!status.usable) {
    std::cout << "test_cuda_ops: skipped: " << status.description << "\n";
    return 77;
  }
  std::cout << "test_cuda_ops: " << status.description << "\n";
  return boost::unit_test::unit_test_main(&init_unit_test, argc, argv);
}
