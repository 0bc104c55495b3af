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

// Can a primary at c satisfy the whole replication?
bool Feasible(const std::vector<Candidate>& cs, size_t p, const Replication& rep) {
  const Candidate& c = cs[p];
  int same_rack = 0;
  std::set<std::string> racks, dcs;
  for (size_t i = 0; i < cs.size(); ++i) {
    if (i == p || cs[i].free_slots <= 0) continue;
    if (cs[i].data_center == c.data_center && cs[i].rack == c.rack) ++same_rack;
    if (cs[i].data_center == c.data_center && cs[i].rack != c.rack) racks.insert(cs[i].rack);
    if (cs[i].data_center != c.data_center) dcs.insert(cs[i].data_center);
  }
  return same_rack >= rep.same_rack && static_cast<int>(racks.size()) >= rep.diff_rack &&
         static_cast<int>(dcs.size()) >= rep.diff_dc;
}

}  // namespace

absl::StatusOr<std::vector<std::string>> PlaceVolume(const std::vector<Candidate>& cs, const Replication& rep,
                                                     std::mt19937_64& rng) {
  std::set<int> used;
  std::vector<size_t> feasible;
  for (size_t i = 0; i < cs.size(); ++i) {
    if (cs[i].free_slots > 0 && Feasible(cs, i, rep)) feasible.push_back(i);
  }
  if (feasible.empty()) {
    return PosixError(ENOSPC, StrCat("no volume servers with free slots can hold replication ", rep.ToString(),
                                     " (", cs.size(), " servers known)"));
  }
  std::set<int> not_feasible;
  for (size_t i = 0; i < cs.size(); ++i) {
    if (std::find(feasible.begin(), feasible.end(), i) == feasible.end()) not_feasible.insert(i);
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
