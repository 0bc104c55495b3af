#include "bench/cache/zipf.h"

#include <algorithm>
#include <cmath>
#include <numeric>

namespace kelp::bench {

Zipf::Zipf(uint64_t n, double alpha, uint64_t seed) : cdf_(n), key_of_rank_(n) {
  double sum = 0;
  for (uint64_t i = 0; i < n; ++i) {
    sum += 1.0 / std::pow(static_cast<double>(i + 1), alpha);
    cdf_[i] = sum;
  }
  for (double& c : cdf_) c /= sum;
  std::iota(key_of_rank_.begin(), key_of_rank_.end(), 0);
  std::mt19937_64 rng(seed);
  std::shuffle(key_of_rank_.begin(), key_of_rank_.end(), rng);
}

uint64_t Zipf::Next(std::mt19937_64& rng) const {
  double u = std::uniform_real_distribution<double>(0, 1)(rng);
  size_t rank = static_cast<size_t>(std::lower_bound(cdf_.begin(), cdf_.end(), u) - cdf_.begin());
  return key_of_rank_[std::min(rank, key_of_rank_.size() - 1)];
}

}  // namespace kelp::bench
