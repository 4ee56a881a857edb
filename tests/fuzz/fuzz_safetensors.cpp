// libFuzzer target for the safetensors reader (DESIGN.md §7). Any byte string must either
// open as a valid file whose every tensor reads without error, or fail with an nlb::Error
// (FormatError) whose message names the file. Anything else — a crash, a sanitizer report,
// another exception type, a message without the file name — is a bug the fuzzer reports.
//
// Build (clang only): cmake -S . -B build-fuzz -DCMAKE_CXX_COMPILER=clang++ \
//   -DNLB_BUILD_FUZZERS=ON && cmake --build build-fuzz --target fuzz_safetensors
// Run: ctest --test-dir build-fuzz -L fuzz   (60 s), or see docs/safetensors.md.
#include <cstddef>
#include <cstdint>
#include <cstdio>
#include <cstdlib>
#include <string>
#include <vector>

#include "nlb/io/safetensors.hpp"

namespace {

constexpr const char* input_name = "fuzz-input.safetensors";

void check_names_file(const nlb::Error& e) {
  if (std::string(e.what()).find(input_name) == std::string::npos) {
    std::fprintf(stderr, "error message does not name the file: %s\n", e.what());
    std::abort();
  }
}

}  // namespace

extern "C" int LLVMFuzzerTestOneInput(const std::uint8_t* data, std::size_t size) {
  std::vector<std::uint8_t> bytes(data, data + size);
  try {
    const auto file = nlb::io::SafetensorsFile::from_bytes(std::move(bytes), input_name);
    for (const auto& t : file.tensors()) {
      try {
        if (nlb::io::is_floating(t.dtype)) {
          const auto values = file.read<float>(t.name, t.shape);
          const auto wide = file.read<double>(t.name);
          if (values.size() != static_cast<std::size_t>(t.numel()) ||
              wide.size() != values.size()) {
            std::abort();
          }
        } else {
          (void)file.read<std::int64_t>(t.name, t.shape);
        }
        // The raw byte range is in bounds (ASan checks the access) and has the right length.
        const auto raw = file.raw_bytes(t.name);
        if (raw.size() != t.end - t.begin)
          std::abort();
        volatile std::uint8_t sink = raw.empty() ? 0 : raw.back();
        (void)sink;
      } catch (const nlb::Error& e) {
        check_names_file(e);  // e.g. a BOOL byte that is not 0 or 1
      }
    }
  } catch (const nlb::Error& e) {
    check_names_file(e);
  }
  return 0;
}
