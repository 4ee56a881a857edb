// Heap allocations of a forward pass held in a caller-owned workspace (DESIGN.md §3): after a
// warm-up, decoding a token and evaluating a window allocate nothing, on the shipped models.
//
// Windows of many rows reach the GEMM provider's library: their contexts ask for products that
// allocate nothing (Context::set_allocation_free; the measured provider's choice of oneDNN, whose
// sgemm allocates its own scratch per call, is left out). Decoding needs no such setting.
//
// Covered: the three shipped models (tiny-gpt2: dense attention; tiny-neox: rotary, parallel
// residual; tiny-sd: S–D attention), Transformer::forward with a workspace, and an analysis
// pass (run_layers with a gated MlpOverride on every layer). Not covered: linear and factored
// attention (no shipped model uses them), taps, and the sampler's top-k path.
//
// What is counted: this executable replaces the C allocator (malloc, calloc, realloc,
// posix_memalign, aligned_alloc, memalign: glibc's documented replacement, forwarding to
// __libc_*) and the global operator new (every form), and counts each call while a counter is
// armed. Eigen allocates with malloc, not with operator new (its matrices and its GEMM packing
// buffers), so counting operator new alone would see none of them. Under AddressSanitizer the C
// allocator belongs to the sanitizer; there only operator new is counted (the test says so).
// Its own executable: the replacements affect the whole program.
#include <atomic>
#include <boost/test/unit_test.hpp>
#include <cstdint>
#include <cstdlib>
#include <filesystem>
#include <new>
#include <random>
#include <span>
#include <vector>

#include "nlb/io/token_file.hpp"
#include "nlb/model/load_model.hpp"
#include "nlb/model/sampling.hpp"

#if defined(__SANITIZE_ADDRESS__)
#define NLB_COUNT_MALLOC 0
#elif defined(__has_feature)
#if __has_feature(address_sanitizer) || __has_feature(memory_sanitizer)
#define NLB_COUNT_MALLOC 0
#endif
#endif
#ifndef NLB_COUNT_MALLOC
#define NLB_COUNT_MALLOC 1
#endif

namespace {
std::atomic<bool> armed{false};
std::atomic<long> malloc_calls{0};
std::atomic<long> new_calls{0};

void count(std::atomic<long>& c) {
  if (armed.load(std::memory_order_relaxed))
    c.fetch_add(1, std::memory_order_relaxed);
}
}  // namespace

#if NLB_COUNT_MALLOC
extern "C" {
void* __libc_malloc(std::size_t);
void* __libc_calloc(std::size_t, std::size_t);
void* __libc_realloc(void*, std::size_t);
void* __libc_memalign(std::size_t, std::size_t);
void __libc_free(void*);

void* malloc(std::size_t n) noexcept {
  count(malloc_calls);
  return __libc_malloc(n);
}
void* calloc(std::size_t k, std::size_t n) noexcept {
  count(malloc_calls);
  return __libc_calloc(k, n);
}
void* realloc(void* p, std::size_t n) noexcept {
  count(malloc_calls);
  return __libc_realloc(p, n);
}
void* memalign(std::size_t alignment, std::size_t n) noexcept {
  count(malloc_calls);
  return __libc_memalign(alignment, n);
}
void* aligned_alloc(std::size_t alignment, std::size_t n) noexcept {
  count(malloc_calls);
  return __libc_memalign(alignment, n);
}
int posix_memalign(void** out, std::size_t alignment, std::size_t n) noexcept {
  count(malloc_calls);
  *out = __libc_memalign(alignment, n);
  return *out == nullptr && n > 0 ? 12 /* ENOMEM */ : 0;
}
void free(void* p) noexcept {
  __libc_free(p);
}
}
#endif

// operator new counted on its own (it takes memory from malloc, which is then not counted a
// second time: the calls below go to the allocator directly).
namespace {
void* raw_alloc(std::size_t n, std::size_t alignment) {
  if (n == 0)
    n = 1;
#if NLB_COUNT_MALLOC
  void* p =
      alignment > alignof(std::max_align_t) ? __libc_memalign(alignment, n) : __libc_malloc(n);
#else
  void* p = nullptr;
  if (alignment > alignof(std::max_align_t)) {
    if (posix_memalign(&p, alignment, n) != 0)
      p = nullptr;
  } else {
    p = std::malloc(n);
  }
#endif
  return p;
}
void raw_free(void* p) {
#if NLB_COUNT_MALLOC
  __libc_free(p);
#else
  std::free(p);
#endif
}
}  // namespace

void* operator new(std::size_t n) {
  count(new_calls);
  if (void* p = raw_alloc(n, 0))
    return p;
  throw std::bad_alloc();
}
void* operator new[](std::size_t n) {
  count(new_calls);
  if (void* p = raw_alloc(n, 0))
    return p;
  throw std::bad_alloc();
}
void* operator new(std::size_t n, std::align_val_t a) {
  count(new_calls);
  if (void* p = raw_alloc(n, static_cast<std::size_t>(a)))
    return p;
  throw std::bad_alloc();
}
void* operator new[](std::size_t n, std::align_val_t a) {
  count(new_calls);
  if (void* p = raw_alloc(n, static_cast<std::size_t>(a)))
    return p;
  throw std::bad_alloc();
}
void* operator new(std::size_t n, const std::nothrow_t&) noexcept {
  count(new_calls);
  return raw_alloc(n, 0);
}
void* operator new[](std::size_t n, const std::nothrow_t&) noexcept {
  count(new_calls);
  return raw_alloc(n, 0);
}
void operator delete(void* p) noexcept {
  raw_free(p);
}
void operator delete[](void* p) noexcept {
  raw_free(p);
}
void operator delete(void* p, std::size_t) noexcept {
  raw_free(p);
}
void operator delete[](void* p, std::size_t) noexcept {
  raw_free(p);
}
void operator delete(void* p, std::align_val_t) noexcept {
  raw_free(p);
}
void operator delete[](void* p, std::align_val_t) noexcept {
  raw_free(p);
}
void operator delete(void* p, std::size_t, std::align_val_t) noexcept {
  raw_free(p);
}
void operator delete[](void* p, std::size_t, std::align_val_t) noexcept {
  raw_free(p);
}

namespace {

using nlb::Index;
namespace fs = std::filesystem;
const fs::path source_dir = NLB_SOURCE_DIR;

struct Allocations {
  long malloc_calls = 0;
  long new_calls = 0;
  long total() const { return malloc_calls + new_calls; }
};

// Runs f() with the counters armed; returns what it allocated.
template <class F>
Allocations counted(F&& f) {
  malloc_calls = 0;
  new_calls = 0;
  armed = true;
  f();
  armed = false;
  return {malloc_calls.load(), new_calls.load()};
}

void report(const char* what, const Allocations& a) {
  BOOST_TEST_MESSAGE(what << ": " << a.malloc_calls << " C allocator calls, " << a.new_calls
                          << " operator new calls"
                          << (NLB_COUNT_MALLOC ? ""
                                               : " (sanitizer build: malloc not counted, only "
                                                 "operator new)"));
}

std::vector<std::int32_t> eval_text() {
  return nlb::io::read_text_tokens(source_dir / "data/kjv-eval.txt");
}

// 32 greedy tokens after a 16-token prompt with one workspace and one KV cache; warm-up: the
// prompt and the first decoded token (the T = 1 buffers are sized there).
void check_decoding(const std::string& name) {
  const auto model = nlb::load_model<float>(source_dir / "models" / name);
  const auto text = eval_text();
  const std::span<const std::int32_t> prompt(text.data(), 16);
  auto cache = model.make_cache();
  nlb::Context<nlb::backend::cpu> ctx;
  nlb::Transformer<float>::Workspace ws;
  nlb::RowMatrix<float> logits;
  nlb::TokenSampler sampler({.top_k = 1, .temperature = 0.0, .seed = 0});
  std::int32_t next = 0;
  model.forward(ctx, prompt, logits, ws, nlb::NoTaps{}, &cache);
  next = sampler.next(logits.row(logits.rows() - 1));
  model.forward(ctx, std::span<const std::int32_t>(&next, 1), logits, ws, nlb::NoTaps{}, &cache);
  next = sampler.next(logits.row(0));
  const Allocations a = counted([&] {
    for (int i = 0; i < 32; ++i) {
      model.forward(ctx, std::span<const std::int32_t>(&next, 1), logits, ws, nlb::NoTaps{},
                    &cache);
      next = sampler.next(logits.row(0));
    }
  });
  report((name + ": 32 decoded tokens").c_str(), a);
  BOOST_CHECK_EQUAL(cache.length(), 16 + 1 + 32);
  BOOST_CHECK_EQUAL(a.total(), 0);
}

// One eval window (128 tokens, no cache) after one warm-up window of the same length.
void check_eval_window(const std::string& name) {
  const auto model = nlb::load_model<float>(source_dir / "models" / name);
  const auto text = eval_text();
  const Index context = model.config().n_positions;
  const std::span<const std::int32_t> tokens(text.data(), static_cast<std::size_t>(2 * context));
  nlb::Context<nlb::backend::cpu> ctx;
  ctx.set_allocation_free(true);  // the measured provider's oneDNN allocates on every call
  nlb::Transformer<float>::Workspace ws;
  nlb::RowMatrix<float> logits, expected;
  model.forward(ctx, tokens.first(static_cast<std::size_t>(context)), logits, ws);
  const auto window = tokens.subspan(static_cast<std::size_t>(context));
  const Allocations a = counted([&] { model.forward(ctx, window, logits, ws); });
  report((name + ": one eval window of " + std::to_string(context) + " tokens").c_str(), a);
  BOOST_CHECK_EQUAL(a.total(), 0);
  nlb::Transformer<float>::Workspace fresh;  // never used before
  model.forward(ctx, window, expected, fresh);
  BOOST_CHECK(logits == expected);  // a reused workspace changes no number
}

// One eval window through embed / run_layers / head with every layer gated (a random surrogate
// and gate, about half the rows linear), after a warm-up on the same window: the analysis path.
void check_gated_window(const std::string& name) {
  using Model = nlb::Transformer<float>;
  const auto model = nlb::load_model<float>(source_dir / "models" / name);
  const Index d = model.config().d_model, layers = model.layer_count();
  std::mt19937 rng(11);
  std::normal_distribution<float> normal(0.0f, 1.0f);
  auto random = [&](Index r, Index c, float scale) {
    nlb::RowMatrix<float> m(r, c);
    for (Index i = 0; i < m.size(); ++i)
      m.data()[i] = scale * normal(rng);
    return m;
  };
  const nlb::MlpOverride<float>::Surrogate::Weight w = random(d, d, 0.05f);
  const nlb::MlpOverride<float>::Surrogate::Bias b = random(1, d, 0.0f);
  const nlb::MlpOverride<float>::Surrogate surrogate(w, b);
  const nlb::ColVector<float> gate_w = random(d, 1, 1.0f);
  const nlb::HyperplaneGate<float> gate(gate_w, 0.0f, 0.0f);
  const std::vector<Model::Override> overrides(
      static_cast<std::size_t>(layers),
      Model::Override{nullptr, nlb::MlpOverride<float>::gated(surrogate, gate)});
  const auto text = eval_text();
  const std::span<const std::int32_t> window(text.data(), 128);
  nlb::Context<nlb::backend::cpu> ctx;
  ctx.set_allocation_free(true);
  Model::Workspace ws;
  nlb::RowMatrix<float> logits;
  std::vector<nlb::RouteCounts> counts(static_cast<std::size_t>(layers));
  auto run = [&] {
    model.embed(ctx, window, ws.x, ws);
    model.run_layers(ctx, ws.x, 0, layers, ws, overrides, nullptr, nlb::NoTaps{},
                     std::span(counts));
    model.head(ctx, ws.x, logits, ws);
  };
  run();
  const Allocations a = counted(run);
  report((name + ": one gated eval window (run_layers with overrides)").c_str(), a);
  BOOST_CHECK_EQUAL(a.total(), 0);
  for (const auto& c : counts) {  // both paths ran, so both were exercised
    BOOST_CHECK_GT(c.linear, 0);
    BOOST_CHECK_GT(c.full, 0);
  }
}

}  // namespace

BOOST_AUTO_TEST_CASE(the_counters_see_eigen_and_std_allocations) {
  // The instrument first: a fresh Eigen matrix and a std::vector must be counted.
  const Allocations a = counted([] {
    nlb::RowMatrix<float> m(64, 64);
    m.setZero();
    std::vector<int> v(100);
    BOOST_CHECK_EQUAL(m(0, 0) + static_cast<float>(v[0]), 0.0f);
  });
  report("a 64x64 Eigen matrix and a std::vector<int>(100)", a);
  BOOST_CHECK_GE(a.new_calls, 1);
  if (NLB_COUNT_MALLOC)
    BOOST_CHECK_GE(a.malloc_calls, 1);
}

BOOST_AUTO_TEST_CASE(decoding_allocates_nothing_after_warm_up_gpt2) {
  check_decoding("tiny-gpt2");
}

BOOST_AUTO_TEST_CASE(decoding_allocates_nothing_after_warm_up_neox_rotary) {
  check_decoding("tiny-neox");
}

BOOST_AUTO_TEST_CASE(decoding_allocates_nothing_after_warm_up_sd_attention) {
  check_decoding("tiny-sd");
}

BOOST_AUTO_TEST_CASE(an_eval_window_allocates_nothing_after_warm_up_gpt2) {
  check_eval_window("tiny-gpt2");
}

BOOST_AUTO_TEST_CASE(an_eval_window_allocates_nothing_after_warm_up_neox_rotary) {
  check_eval_window("tiny-neox");
}

BOOST_AUTO_TEST_CASE(an_eval_window_allocates_nothing_after_warm_up_sd_attention) {
  check_eval_window("tiny-sd");
}

BOOST_AUTO_TEST_CASE(a_gated_analysis_window_allocates_nothing_after_warm_up) {
  check_gated_window("tiny-gpt2");
  check_gated_window("tiny-neox");
}
