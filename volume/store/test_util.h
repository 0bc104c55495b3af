// Helpers for the volume tests: random blobs (and the tests' TempDir, shared/testing/temp_dir.h).
#pragma once

#include <filesystem>
#include <random>
#include <string>

#include "shared/testing/temp_dir.h"

namespace kelp::volume::testing {

using kelp::testing::TempDir;

// Deterministic pseudo-random bytes, different for each seed.
inline std::string RandomBlob(uint64_t seed, size_t size) {
  std::mt19937_64 rng(seed * 0x9E3779B97F4A7C15ull + 1);
  std::string s(size, '\0');
  for (size_t i = 0; i < size; ++i) s[i] = static_cast<char>(rng() & 0xff);
  return s;
}

inline uint64_t FileSize(const std::string& path) { return std::filesystem::file_size(path); }

}  // namespace kelp::volume::testing
