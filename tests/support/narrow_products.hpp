// ops::gemm / gemm_nt / gemm_bias with narrow weights (HalfMatrix, Q8Matrix:
// nlb/ops/narrow_gemm.hpp) against a double triple loop over the weights widened back, held to the
// summation bound: shared by the 16-bit and 8-bit suites.
#pragma once

#include <Eigen/Core>
#include <string>
#include <tuple>

#include "gemm_reference.hpp"
#include "nlb/core/context.hpp"
#include "nlb/ops/narrow_gemm.hpp"
#include "test_random.hpp"

namespace nlb::test {

// For m rows on a context of `threads` threads: m = 1 runs the row kernels, split over the
// threads when there are several; m > 1 widens panels (k = 4096 makes them 512 columns wide, so
// n = 600 takes two panels, the second one narrower). make(rows, cols, seed) builds a weight
// matrix from a Gaussian one.
template <class Backend, class Make>
void check_narrow_products(const std::string& name, int threads, Make make) {
  const Context<Backend> ctx(threads);
  GemmScratch<float> scratch;
  for (const auto& [m, k, n] : {std::tuple<Index, Index, Index>{1, 768, 3072},
                                {1, 33, 17},
                                {1, 1000, 2050},
                                {3, 4096, 600},
                                {17, 100, 300}}) {
    const Eigen::MatrixXd x = gaussian(m, k, 5).template cast<float>().template cast<double>();
    const auto w = make(k, n, 6);
    const auto wt = make(n, k, 7);
    const Eigen::MatrixXd w_wide = w.template widened<double>();
    const Eigen::MatrixXd wt_wide = wt.template widened<double>();
    const Eigen::MatrixXd bias = gaussian(1, n, 8).template cast<float>().template cast<double>();
    const RowMatrix<float> xf = x.cast<float>();
    const RowMatrix<float> bias_f = bias.cast<float>();
    const std::string shape =
        name + " m " + std::to_string(m) + " k " + std::to_string(k) + " n " + std::to_string(n);
    RowMatrix<float> y(m, n);
    const Eigen::MatrixXd zero = Eigen::MatrixXd::Zero(m, n);
    ops::gemm(ctx, xf, w, y, scratch);
    check_within_bound<float>(y, triple_loop(x, w_wide, zero), k, shape + " X·W");
    ops::gemm(ctx, xf, wt.transpose(), y, scratch);
    check_within_bound<float>(y, triple_loop(x, wt_wide.transpose(), zero), k, shape + " X·Wᵀ");
    ops::gemm_nt(ctx, xf, wt, y, scratch);
    check_within_bound<float>(y, triple_loop(x, wt_wide.transpose(), zero), k, shape + " gemm_nt");
    ops::gemm_bias(ctx, xf, w, bias_f, y, scratch);
    check_within_bound<float>(y, triple_loop(x, w_wide, bias.replicate(m, 1)), k,
                              shape + " X·W + b");
  }
}

}  // namespace nlb::test
