// Replica placement, SeaweedFS style. A replication string "xyz" asks for x copies in other
// data centers, y copies on other racks of the primary's data center, and z copies on other
// servers of the primary's rack: x+y+z+1 copies in all. Pure functions; thread-compatible.
#pragma once

#include <cstdint>
#include <random>
#include <string>
#include <string_view>
#include <vector>

#include "absl/status/statusor.h"

namespace kelp::filer {

struct Replication {
  int diff_dc = 0;
  int diff_rack = 0;
  int same_rack = 0;
  int copies() const { return diff_dc + diff_rack + same_rack + 1; }
  std::string ToString() const;
  // "" -> "000"; anything but three digits is InvalidArgument.
  static absl::StatusOr<Replication> Parse(std::string_view s);
};

// A server that could take a new volume.
struct Candidate {
  std::string url;  // ip:port, the server's identity
  std::string data_center;
  std::string rack;
  int free_slots = 0;  // volumes it can still take
};

// Picks servers for one new volume: the primary first. Prefers servers with more free
// slots (weighted random). ResourceExhausted when the replication cannot be satisfied.
absl::StatusOr<std::vector<std::string>> PlaceVolume(const std::vector<Candidate>& candidates,
                                                     const Replication& rep, std::mt19937_64& rng);

}  // namespace kelp::filer
