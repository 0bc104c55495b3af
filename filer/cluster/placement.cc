#include "filer/cluster/placement.h"

#include <algorithm>
#include <map>
#include <set>

#include "shared/status.h"
#include "shared/strings.h"

namespace kelp::filer {

std::string Replication::ToString() const { return StrCat(diff_dc, diff_rack, same_rack); }

absl::StatusOr<Replication> Replication::Parse(std::string_view s) {
  if (s.empty()) return Replication{};
  if (s.size() != 3 || !std::all_of(s.begin(), s.end(), [](char c) { return c >= '0' && c <= '9'; })) {
    return absl::InvalidArgumentError(StrCat("bad replication \"", s, "\": want three digits like 001"));
  }
  return Replication{s[0] - '0', s[1] - '0', s[2] - '0'};
}

namespace {

// Weighted random pick by free slots among the candidates that pass keep(); -1 if none.
template <typename Pred>
int PickWeighted(const std::vector<Candidate>& cs, const std::set<int>& used, Pred keep, std::mt19937_64& rng) {
  uint64_t total = 0;
  for (size_t i = 0; i < cs.size(); ++i) {
    if (!used.count(i) && cs[i].free_slots > 0 && keep(cs[i])) total += cs[i].free_slots;
  }
  if (total == 0) return -1;
  uint64_t r = std::uniform_int_distribution<uint64_t>(0, total - 1)(rng);
  for (size_t i = 0; i < cs.size(); ++i) {
    if (used.count(i) || cs[i].free_slots <= 0 || !keep(cs[i])) continue;
    if (r < static_cast<uint64_t>(cs[i].free_slots)) return static_cast<int>(i);
    r -= cs[i].free_slots;
  }
  return -1;
}

// Servers with free slots per data center and rack: whether a primary can satisfy the whole
// replication is then a few lookups, not a pass over every server (placement among 1,000
// servers would be quadratic).
using FreeByRack = std::map<std::string, std::map<std::string, int>>;  // dc -> rack -> servers

// Can a primary at c (which has free slots) satisfy the whole replication?
bool Feasible(const FreeByRack& free, const Candidate& c, const Replication& rep) {
  const auto& racks = free.at(c.data_center);
  int same_rack = racks.at(c.rack) - 1;
  int other_racks = static_cast<int>(racks.size()) - 1;
  int other_dcs = static_cast<int>(free.size()) - 1;
  return same_rack >= rep.same_rack && other_racks >= rep.diff_rack && other_dcs >= rep.diff_dc;
}

}  // namespace

absl::StatusOr<std::vector<std::string>> PlaceVolume(const std::vector<Candidate>& cs, const Replication& rep,
                                                     std::mt19937_64& rng) {
  FreeByRack free;
  for (const auto& c : cs) {
    if (c.free_slots > 0) ++free[c.data_center][c.rack];
  }
  std::set<int> used;
  std::set<int> not_feasible;
  bool any = false;
  for (size_t i = 0; i < cs.size(); ++i) {
    if (cs[i].free_slots > 0 && Feasible(free, cs[i], rep)) {
      any = true;
    } else {
      not_feasible.insert(static_cast<int>(i));
    }
  }
  if (!any) {
    return PosixError(ENOSPC, StrCat("no volume servers with free slots can hold replication ", rep.ToString(),
                                     " (", cs.size(), " servers known)"));
  }
  int p = PickWeighted(cs, not_feasible, [](const Candidate&) { return true; }, rng);
  const Candidate& primary = cs[p];
  used.insert(p);
  std::vector<std::string> out{primary.url};
  for (int i = 0; i < rep.same_rack; ++i) {
    int k = PickWeighted(cs, used, [&](const Candidate& c) {
      return c.data_center == primary.data_center && c.rack == primary.rack;
    }, rng);
    used.insert(k);
    out.push_back(cs[k].url);
  }
  std::set<std::string> racks_taken{primary.rack};
  for (int i = 0; i < rep.diff_rack; ++i) {
    int k = PickWeighted(cs, used, [&](const Candidate& c) {
      return c.data_center == primary.data_center && !racks_taken.count(c.rack);
    }, rng);
    used.insert(k);
    racks_taken.insert(cs[k].rack);
    out.push_back(cs[k].url);
  }
  std::set<std::string> dcs_taken{primary.data_center};
  for (int i = 0; i < rep.diff_dc; ++i) {
    int k = PickWeighted(cs, used, [&](const Candidate& c) { return !dcs_taken.count(c.data_center); }, rng);
    used.insert(k);
    dcs_taken.insert(cs[k].data_center);
    out.push_back(cs[k].url);
  }
  return out;
}

}  // namespace kelp::filer
