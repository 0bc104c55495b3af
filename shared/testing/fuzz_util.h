// Helpers for the libFuzzer targets (*_fuzz.cc, built with -DKELP_FUZZ=ON; docs/fuzzing.md).
// FUZZ_CHECK states a property that must hold for every input (a round trip, a bound):
// when it does not, the target aborts and libFuzzer saves the input as a crash.
#pragma once

#include <cstdio>
#include <cstdlib>
#include <filesystem>
#include <string>

#include "shared/log.h"

#define FUZZ_CHECK(cond)                                                             \
  do {                                                                               \
    if (!(cond)) {                                                                   \
      std::fprintf(stderr, "%s:%d: FUZZ_CHECK failed: %s\n", __FILE__, __LINE__, #cond); \
      std::abort();                                                                  \
    }                                                                                \
  } while (0)

namespace kelp::fuzz {

// Logging off: decoders warn about every bad input, and a fuzzer makes millions.
inline void QuietLogs() { spdlog::set_level(spdlog::level::off); }

// A fresh directory under $TMPDIR (or /tmp) for targets that go through files, removed with
// everything in it when the process exits.
inline std::string TempDirForRun() {
  const char* base = std::getenv("TMPDIR");
  std::string tmpl = std::string(base ? base : "/tmp") + "/kelp-fuzz-XXXXXX";
  if (!mkdtemp(tmpl.data())) std::abort();
  static std::string path = tmpl;
  std::atexit([] {
    std::error_code ec;
    std::filesystem::remove_all(path, ec);
  });
  return tmpl;
}

}  // namespace kelp::fuzz
