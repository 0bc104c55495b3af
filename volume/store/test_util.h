// Helpers for the volume tests: a temporary directory removed at scope exit, random blobs.
#pragma once

#include <stdlib.h>

#include <filesystem>
#include <random>
#include <string>

namespace kelp::volume::testing {

class TempDir {
 public:
  TempDir() {
    std::string tmpl = (std::filesystem::temp_directory_path() / "kelp-volume-XXXXXX").string();
    char* p = mkdtemp(tmpl.data());
    if (p == nullptr) throw std::runtime_error("mkdtemp failed");
    path_ = p;
  }
  ~TempDir() {
    std::error_code ec;
    std::filesystem::remove_all(path_, ec);
  }
  const std::string& path() const { return path_; }
  std::string file(const std::string& name) const { return path_ + "/" + name; }

 private:
  std::string path_;
};

// Deterministic pseudo-random bytes, different for each seed.
inline std::string RandomBlob(uint64_t seed, size_t size) {
  std::mt19937_64 rng(seed * 0x9E3779B97F4A7C15ull + 1);
  std::string s(size, '\0');
  for (size_t i = 0; i < size; ++i) s[i] = static_cast<char>(rng() & 0xff);
  return s;
}

inline uint64_t FileSize(const std::string& path) { return std::filesystem::file_size(path); }

}  // namespace kelp::volume::testing
