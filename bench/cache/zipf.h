// Zipf-distributed keys for cache benchmarks. Thread-safety: a Zipf is immutable after
// construction; Next() takes the caller's generator, so one Zipf may serve many threads.
#pragma once

#include <cstdint>
#include <random>
#include <vector>

namespace kelp::bench {

class Zipf {
 public:
  // Keys 0..n-1; key popularity follows rank^-alpha over a fixed random permutation of ranks
  // (so hot keys are scattered, not the first few).
  Zipf(uint64_t n, double alpha, uint64_t seed);
  uint64_t Next(std::mt19937_64& rng) const;

 private:
  std::vector<double> cdf_;
  std::vector<uint64_t> key_of_rank_;
};

}  // namespace kelp::bench
