// The measured provider (gemm_provider::measured): each product goes to the provider that was
// fastest at the nearest recorded shape on this kind of CPU (gemm_measurements.hpp), among those
// of the build that can run it. Included by nlb/ops/gemm.hpp when NLB_HAVE_MEASURED is defined,
// i.e. the program links nlbudget::measured (which links every provider found).
//
// Why per product: no library wins everywhere. On one Xeon, LIBXSMM was fastest on one thread
// and oneDNN on two; few-row products with a transposed right operand ran 2–4× faster in LIBXSMM
// than in the BLAS libraries; at other shapes Eigen won (docs/benchmarks.md, "GEMM providers").
#pragma once

#include <Eigen/Core>
#include <array>
#include <atomic>
#include <cmath>
#include <cstddef>
#include <span>
#include <type_traits>

#include "nlb/core/cpu_kind.hpp"
#include "nlb/core/gemm_provider.hpp"
#include "nlb/core/matrix.hpp"
#include "nlb/ops/detail/blas_operand.hpp"
#include "nlb/ops/detail/gemm_measurements.hpp"
#include "nlb/ops/detail/gemm_providers.hpp"

namespace nlb::ops::detail {

/// The recorded rows of `cpu`: those of its vendor, family and vector ISA; else those of the
/// first recorded family of its vendor and ISA (the nearest evidence there is); else none.
inline std::span<const GemmMeasurement> measurements_for(const CpuKind& cpu) {
  const std::span<const GemmMeasurement> all(gemm_measurements);
  const auto block = [&](auto same) {
    std::size_t begin = 0;
    while (begin < all.size() && !same(all[begin]))
      ++begin;
    std::size_t end = begin;
    while (end < all.size() && same(all[end]))
      ++end;
    return all.subspan(begin, end - begin);
  };
  auto rows = block([&](const GemmMeasurement& r) {
    return r.vendor == cpu.vendor && r.family == cpu.family && r.isa == cpu.isa;
  });
  if (rows.empty()) {
    const auto first =
        block([&](const GemmMeasurement& r) { return r.vendor == cpu.vendor && r.isa == cpu.isa; });
    if (!first.empty())
      rows = block([&](const GemmMeasurement& r) {
        return r.vendor == cpu.vendor && r.family == first.front().family && r.isa == cpu.isa;
      });
  }
  return rows;
}

/// The provider to run [m, k] · [k, n] on `threads` threads (rhs_transposed: the right operand
/// is stored the other way than the result, as a tied unembedding), from the recorded rows of one
/// CPU kind: among the rows of the largest recorded thread count not above `threads` (else the
/// smallest) and of the same layout, the one nearest on a log scale in m plus width (the
/// product's width is the d of a recorded [m, d] · [d, 4d] with as many multiply-adds per row:
/// sqrt(k · n / 4); on a tie the earlier row, i.e. the smaller shape); of those providers
/// `eligible` allows, the one with the most GFLOP/s there. Without a matching row: OpenBLAS if
/// eligible, else Eigen. Cost: two passes over the rows.
inline MeasuredProvider choose_measured_provider(
    std::span<const GemmMeasurement> rows, int threads, bool rhs_transposed, Index m, Index k,
    Index n, const std::array<bool, measured_provider_count>& eligible) {
  const auto fallback = eligible[static_cast<int>(MeasuredProvider::openblas)]
                            ? MeasuredProvider::openblas
                            : MeasuredProvider::eigen;
  int recorded_threads = 0, fewest_threads = 0;
  for (const auto& r : rows) {
    if (r.threads <= threads && r.threads > recorded_threads)
      recorded_threads = r.threads;
    if (fewest_threads == 0 || r.threads < fewest_threads)
      fewest_threads = r.threads;
  }
  if (recorded_threads == 0)
    recorded_threads = fewest_threads;
  // Distance on a log scale as a product of ratios (each ≥ 1): exact for the recorded powers of
  // two, so a product halfway between two recorded shapes ties, and the earlier row wins.
  const auto ratio = [](double a, double b) { return a > b ? a / b : b / a; };
  const double width = std::sqrt(static_cast<double>(k) * static_cast<double>(n) / 4);
  const GemmMeasurement* nearest = nullptr;
  double nearest_distance = 0;
  for (const auto& r : rows) {
    if (r.threads != recorded_threads || r.rhs_transposed != rhs_transposed)
      continue;
    const double distance = ratio(static_cast<double>(m), static_cast<double>(r.rows)) *
                            ratio(width, static_cast<double>(r.width));
    if (nearest == nullptr || distance < nearest_distance) {
      nearest = &r;
      nearest_distance = distance;
    }
  }
  if (nearest == nullptr)
    return fallback;
  int best = -1;
  for (int p = 0; p < measured_provider_count; ++p)
    if (eligible[p] && nearest->gflops[p] > 0 &&
        (best < 0 || nearest->gflops[p] > nearest->gflops[best]))
      best = p;
  return best < 0 ? fallback : static_cast<MeasuredProvider>(best);
}

/// Whether Provider can run T products in this program: part of the build, has a T GEMM, and
/// found kernels for this CPU (provider_usable). Eigen always can.
template <class Provider, class T>
bool measured_provider_eligible() {
  if constexpr (std::is_same_v<Provider, gemm_provider::eigen>)
    return true;
  else if constexpr (!gemm_provider::is_available<Provider> || !provider_takes<Provider, T>)
    return false;
  else
    return provider_usable(Provider{});
}

/// The providers eligible for T products here, in MeasuredProvider's order. Read once.
template <class T>
const std::array<bool, measured_provider_count>& measured_eligible() {
  static const std::array<bool, measured_provider_count> eligible = {
      measured_provider_eligible<gemm_provider::eigen, T>(),
      measured_provider_eligible<gemm_provider::openblas, T>(),
      measured_provider_eligible<gemm_provider::blis, T>(),
      measured_provider_eligible<gemm_provider::onednn, T>(),
      measured_provider_eligible<gemm_provider::libxsmm, T>()};
  return eligible;
}

/// This CPU's recorded rows. Read once.
inline std::span<const GemmMeasurement> this_cpu_measurements() {
  static const std::span<const GemmMeasurement> rows = measurements_for(this_cpu_kind());
  return rows;
}

/// The thread count ops::gemm last gave the measured provider (apply_threads).
inline std::atomic<int>& measured_threads() {
  static std::atomic<int> threads{1};
  return threads;
}

/// The provider gemm_provider::measured runs c = a · b on here (c's shape and the operands'
/// storage orders; the thread count of the last apply_threads); with `allocation_free`, not
/// oneDNN (its dnnl_sgemm allocates scratch on every call).
template <class T>
MeasuredProvider measured_choice(const BlasMatrix<const T>& a, const BlasMatrix<const T>& b,
                                 const BlasMatrix<T>& c, bool allocation_free) {
  auto eligible = measured_eligible<T>();
  if (allocation_free)
    eligible[static_cast<int>(MeasuredProvider::onednn)] = false;
  return choose_measured_provider(this_cpu_measurements(),
                                  measured_threads().load(std::memory_order_relaxed),
                                  b.row_major != c.row_major, c.rows, a.cols, c.cols, eligible);
}

/// ops::gemm's call for the measured provider: the chosen provider's product and true, or false
/// (nothing done) when Eigen was measured fastest, so that ops::gemm runs it in Eigen.
/// `allocation_free`: the context's setting (measured_choice).
template <class T>
bool run_provider_gemm(gemm_provider::measured, const BlasMatrix<const T>& a,
                       const BlasMatrix<const T>& b, const BlasMatrix<T>& c, T alpha, T beta,
                       bool allocation_free) {
  const auto run = [&](auto provider) {
    using Provider = decltype(provider);
    if constexpr (gemm_provider::is_available<Provider> && provider_takes<Provider, T>) {
      provider_gemm(provider, a, b, c, alpha, beta);
      return true;
    } else {
      return false;  // not eligible, so never chosen
    }
  };
  switch (measured_choice(a, b, c, allocation_free)) {
    case MeasuredProvider::openblas:
      return run(gemm_provider::openblas{});
    case MeasuredProvider::blis:
      return run(gemm_provider::blis{});
    case MeasuredProvider::onednn:
      return run(gemm_provider::onednn{});
    case MeasuredProvider::libxsmm:
      return run(gemm_provider::libxsmm{});
    case MeasuredProvider::eigen:
      break;
  }
  return false;
}

/// Each provider the choice may run takes its products on one library or another.
inline bool provider_usable(gemm_provider::measured) {
  return true;
}

/// Every provider of the build gets the context's thread count (and records it, so that
/// ops::gemm does not set it again), and the choice reads it.
inline void provider_set_threads(gemm_provider::measured, int threads) {
  gemm_provider::for_each_library_provider([&](auto provider) {
    provider_set_threads(provider, threads);
    provider_threads_applied<decltype(provider)>().store(threads, std::memory_order_relaxed);
  });
  Eigen::setNbThreads(threads);
  measured_threads().store(threads, std::memory_order_relaxed);
}

}  // namespace nlb::ops::detail
