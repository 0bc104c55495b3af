#include "filer/cluster/topology.h"

#include <fmt/ranges.h>

#include <algorithm>

#include "filer/store/keys.h"
#include "shared/file_id.h"
#include "shared/grpc_status.h"
#include "shared/log.h"
#include "shared/security/jwt.h"
#include "shared/security/security.h"
#include "shared/status.h"
#include "shared/strings.h"

namespace kelp::filer {
namespace {

using keys::kNeedleKeySeq;
using keys::kVolumeIdSeq;

int AutoGrowth(int copies) {
  switch (copies) {
    case 1: return 4;
    case 2: return 3;
    case 3: return 2;
    default: return 1;
  }
}

std::string Url(const cluster::HeartbeatRequest& hb) { return StrCat(hb.ip(), ":", hb.port()); }

}  // namespace

Topology::Topology(Options options, KvStore* kv, VolumeAdmin* admin)
    : opts_(std::move(options)),
      kv_(kv),
      admin_(admin),
      volume_ids_(kv, kVolumeIdSeq, 1),
      needle_keys_(kv, kNeedleKeySeq, 100000),
      rng_(std::random_device{}()) {}

Topology::~Topology() { Stop(); }

absl::Status Topology::Start() {
  RETURN_IF_ERROR(Replication::Parse(opts_.default_replication).status());
  RETURN_IF_ERROR(volume_ids_.Load(1));
  RETURN_IF_ERROR(needle_keys_.Load(1));
  liveness_ = std::thread([this] {
    MutexLock lock(stop_mu_);
    while (!stopping_) {
      stop_cv_.WaitFor(lock, std::chrono::milliseconds(opts_.pulse_ms));
      if (stopping_) break;
      lock.Unlock();
      CheckLiveness();
      lock.Lock();
    }
  });
  return absl::OkStatus();
}

void Topology::Stop() {
  {
    MutexLock lock(stop_mu_);
    stopping_ = true;
  }
  stop_cv_.NotifyAll();
  if (liveness_.joinable()) liveness_.join();
  MutexLock lock(mu_);
  grown_.NotifyAll();
}

void Topology::HoldGrowthFor(std::chrono::milliseconds d) {
  MutexLock lock(mu_);
  no_grow_until_ = std::chrono::steady_clock::now() + d;
  grown_.NotifyAll();
}

void Topology::AwaitVolumesFor(std::chrono::milliseconds d) {
  MutexLock lock(mu_);
  await_volumes_until_ = std::chrono::steady_clock::now() + d;
}

bool Topology::LookupMayWait() {
  MutexLock lock(mu_);
  return std::chrono::steady_clock::now() < await_volumes_until_;
}

std::string Topology::LayoutKey(const std::string& collection, const std::string& replication) {
  return collection + "/" + replication;
}

cluster::HeartbeatResponse Topology::Heartbeat(const cluster::HeartbeatRequest& req) {
  std::string url = Url(req);
  uint32_t max_vid = 0;
  uint64_t max_key = 0;
  {
    MutexLock lock(mu_);
    Server& s = servers_[url];
    if (!s.alive) {
      spdlog::info("volume server {} is {} ({} volumes)", url, s.last_seen.time_since_epoch().count() ? "back" : "up",
                   req.volumes_size());
    }
    s.last = req;
    s.last.clear_volumes();
    s.alive = true;
    s.last_seen = Now();
    std::set<uint32_t> reported;
    for (const auto& v : req.volumes()) {
      reported.insert(v.id());
      Volume& vol = volumes_[v.id()];
      if (vol.replicas.empty() || vol.replication.empty()) {
        auto rep = Replication::Parse(v.replication());
        SetLayoutLocked(v.id(), vol, v.collection(), rep.ok() ? *rep : Replication{});
      }
      vol.replicas[url] = v;
      RefreshWritableLocked(v.id(), vol);
      max_vid = std::max(max_vid, v.id());
      max_key = std::max(max_key, v.max_key());
    }
    auto grace = std::chrono::milliseconds(3 * opts_.pulse_ms);
    for (uint32_t vid : s.volumes) {
      if (!reported.count(vid)) {
        auto it = volumes_.find(vid);
        if (it == volumes_.end()) continue;
        if (s.last_seen - it->second.allocated_at < grace) {
          reported.insert(vid);
          continue;
        }
        it->second.replicas.erase(url);
        if (it->second.replicas.empty()) {
          EraseVolumeLocked(it);
        } else {
          RefreshWritableLocked(vid, it->second);
        }
      }
    }
    s.volumes = std::move(reported);
  }
  grown_.NotifyAll();  // an Assign may be waiting for volumes to be known
  // A filer whose store was lost must still never reuse a volume id or a needle key.
  if (max_vid > 0) {
    if (auto st = volume_ids_.RaiseAbove(max_vid); !st.ok()) spdlog::error("raise volume id sequence: {}", st);
  }
  if (max_key > 0) {
    if (auto st = needle_keys_.RaiseAbove(max_key); !st.ok()) spdlog::error("raise needle key sequence: {}", st);
  }
  cluster::HeartbeatResponse resp;
  resp.set_volume_size_limit(opts_.volume_size_limit);
  resp.set_pulse_ms(opts_.pulse_ms);
  return resp;
}

void Topology::CheckLiveness() {
  auto now = Now();
  MutexLock lock(mu_);
  for (auto& [url, s] : servers_) {
    if (s.alive && now - s.last_seen > std::chrono::milliseconds(opts_.dead_after_ms)) {
      s.alive = false;
      spdlog::warn("volume server {} missed its heartbeats: its {} volumes are read-only until it returns", url,
                   s.volumes.size());
      for (uint32_t vid : s.volumes) {
        auto it = volumes_.find(vid);
        if (it != volumes_.end()) SetWritableLocked(vid, it->second, false);
      }
    }
  }
}

bool Topology::WritableLocked(const Volume& v) const {
  if (static_cast<int>(v.replicas.size()) < v.copies) return false;
  for (const auto& [url, info] : v.replicas) {
    auto it = servers_.find(url);
    if (it == servers_.end() || !it->second.alive) return false;
    if (info.read_only() || info.size() >= opts_.volume_size_limit) return false;
  }
  return true;
}

void Topology::SetLayoutLocked(uint32_t vid, Volume& v, const std::string& collection, const Replication& rep) {
  SetWritableLocked(vid, v, false);
  v.collection = collection;
  v.replication = rep.ToString();
  v.copies = rep.copies();
}

void Topology::RefreshWritableLocked(uint32_t vid, Volume& v) { SetWritableLocked(vid, v, WritableLocked(v)); }

void Topology::SetWritableLocked(uint32_t vid, Volume& v, bool writable) {
  if (v.writable == writable) return;
  Layout& l = layouts_[LayoutKey(v.collection, v.replication)];
  if (writable) {
    l.writable_pos[vid] = l.writable.size();
    l.writable.push_back(vid);
  } else {
    // Swap with the last and pop: O(1), the order does not matter.
    size_t pos = l.writable_pos.at(vid);
    uint32_t last = l.writable.back();
    l.writable[pos] = last;
    l.writable_pos[last] = pos;
    l.writable.pop_back();
    l.writable_pos.erase(vid);
  }
  v.writable = writable;
}

absl::Status Topology::NoRoomLocked(absl::Status why, const std::string& collection,
                                    const std::string& replication) const {
  if (ErrnoOf(why) != ENOSPC && why.code() != absl::StatusCode::kResourceExhausted) return why;
  // Room that exists on servers taken for dead: free volume slots, or a volume of this layout
  // below the size limit. The write fails because they are unreachable, not because the
  // cluster is full: UNAVAILABLE (EIO to a mount), not ENOSPC.
  std::vector<std::string> down;
  for (const auto& [url, s] : servers_) {
    if (s.alive) continue;
    bool room = static_cast<int>(s.last.max_volumes()) > static_cast<int>(s.volumes.size());
    for (auto vid = s.volumes.begin(); !room && vid != s.volumes.end(); ++vid) {
      auto it = volumes_.find(*vid);
      if (it == volumes_.end() || it->second.collection != collection || it->second.replication != replication) {
        continue;
      }
      auto r = it->second.replicas.find(url);
      room = r != it->second.replicas.end() && !r->second.read_only() && r->second.size() < opts_.volume_size_limit;
    }
    if (room) down.push_back(url);
  }
  if (down.empty()) return why;
  return absl::UnavailableError(
      StrCat(why.message(), "; volume servers with room are down: ", fmt::format("{}", fmt::join(down, ", "))));
}

void Topology::EraseVolumeLocked(std::map<uint32_t, Volume>::iterator it) {
  SetWritableLocked(it->first, it->second, false);
  volumes_.erase(it);
}

bool Topology::HasWritable(const std::string& collection, const std::string& replication) const {
  auto rep = Replication::Parse(replication.empty() ? opts_.default_replication : replication);
  if (!rep.ok()) return true;  // Assign answers the error at once
  MutexLock lock(mu_);
  auto it = layouts_.find(LayoutKey(collection, rep->ToString()));
  return it != layouts_.end() && !it->second.writable.empty();
}

cluster::Location Topology::LocationOf(const std::string& url) const {
  cluster::Location loc;
  loc.set_url(url);
  auto it = servers_.find(url);
  if (it != servers_.end()) {
    loc.set_public_url(it->second.last.public_url().empty() ? url : it->second.last.public_url());
    loc.set_grpc_port(it->second.last.grpc_port());
  }
  return loc;
}

absl::StatusOr<cluster::AssignResponse> Topology::Assign(const cluster::AssignRequest& req) {
  ASSIGN_OR_RETURN(Replication rep,
                   Replication::Parse(req.replication().empty() ? opts_.default_replication : req.replication()));
  const std::string replication = rep.ToString();
  const std::string& collection = req.collection();
  const uint32_t count = std::max<uint32_t>(1, req.count());
  const std::string layout = LayoutKey(collection, replication);

  cluster::AssignResponse resp;
  uint32_t vid = 0;
  for (int attempt = 0; vid == 0; ++attempt) {
    bool grow = false;
    {
      MutexLock lock(mu_);
      for (;;) {
        const std::vector<uint32_t>& writable = layouts_[layout].writable;
        if (!writable.empty()) {
          vid = writable[std::uniform_int_distribution<size_t>(0, writable.size() - 1)(rng_)];
          const Volume& v = volumes_.at(vid);
          std::vector<std::string> urls;
          for (const auto& [url, info] : v.replicas) urls.push_back(url);
          std::rotate(urls.begin(), urls.begin() + std::uniform_int_distribution<size_t>(0, urls.size() - 1)(rng_),
                      urls.end());
          for (const auto& u : urls) *resp.add_locations() = LocationOf(u);
          break;
        }
        if (std::chrono::steady_clock::now() < no_grow_until_) {
          grown_.WaitUntil(lock, no_grow_until_);  // heartbeats wake it
          continue;
        }
        if (attempt >= 2) {
          return NoRoomLocked(PosixError(ENOSPC, StrCat("no writable volume for collection \"", collection,
                                                        "\" replication ", replication, " and none could be grown")),
                              collection, replication);
        }
        Layout& l = layouts_[layout];
        if (!l.growing) {
          l.growing = true;
          grow = true;
          break;
        }
        grown_.WaitFor(lock, std::chrono::seconds(30));
      }
    }
    if (grow) {
      absl::Status s = Grow(collection, rep);
      {
        MutexLock lock(mu_);
        layouts_[layout].growing = false;
      }
      grown_.NotifyAll();
      if (!s.ok()) {
        MutexLock lock(mu_);
        return NoRoomLocked(s, collection, replication);
      }
    }
  }
  ASSIGN_OR_RETURN(uint64_t key, needle_keys_.Next(count));
  uint32_t cookie;
  {
    MutexLock lock(mu_);
    cookie = static_cast<uint32_t>(rng_());
  }
  FileId fid{vid, key, cookie};
  resp.set_fid(fid.ToString());
  resp.set_count(count);
  if (auto sec = security::Current(); sec->volume_write.enabled()) {
    resp.set_auth(security::SignFileIdToken(sec->volume_write, fid, count));
  }
  return resp;
}

absl::Status Topology::GrowVolumes(const std::string& collection, const std::string& replication, int count) {
  ASSIGN_OR_RETURN(Replication rep, Replication::Parse(replication.empty() ? opts_.default_replication : replication));
  return Grow(collection, rep, std::max(count, 1));
}

absl::Status Topology::Grow(const std::string& collection, const Replication& rep, int want) {
  if (want <= 0) want = opts_.growth_count > 0 ? opts_.growth_count : AutoGrowth(rep.copies());
  int grown = 0;
  absl::Status last_error;
  for (int i = 0; i < want; ++i) {
    std::vector<std::string> placement;
    std::map<std::string, std::string> grpc_addr;
    {
      MutexLock lock(mu_);
      std::vector<Candidate> cands;
      for (const auto& [url, s] : servers_) {
        if (!s.alive) continue;
        int free_slots = static_cast<int>(s.last.max_volumes()) - static_cast<int>(s.volumes.size());
        cands.push_back(Candidate{url, s.last.data_center(), s.last.rack(), free_slots});
        grpc_addr[url] = StrCat(s.last.ip(), ":", s.last.grpc_port());
      }
      auto placed = PlaceVolume(cands, rep, rng_);
      if (!placed.ok()) {
        last_error = placed.status();
        break;
      }
      placement = *placed;
    }
    ASSIGN_OR_RETURN(uint64_t vid64, volume_ids_.Next(1));
    uint32_t vid = static_cast<uint32_t>(vid64);
    absl::Status s;
    for (const auto& url : placement) {
      s = admin_->AllocateVolume(grpc_addr[url], vid, collection, rep.ToString());
      if (!s.ok()) {
        spdlog::warn("allocate volume {} on {}: {}", vid, url, s);
        break;
      }
    }
    if (!s.ok()) {
      last_error = s;
      break;
    }
    MutexLock lock(mu_);
    Volume& v = volumes_[vid];
    v.allocated_at = Now();
    SetLayoutLocked(vid, v, collection, rep);
    for (const auto& url : placement) {
      volume::VolumeInfo info;
      info.set_id(vid);
      info.set_collection(collection);
      info.set_replication(rep.ToString());
      v.replicas[url] = info;
      servers_[url].volumes.insert(vid);
    }
    RefreshWritableLocked(vid, v);
    ++grown;
    spdlog::info("allocated volume {} (collection \"{}\", replication {}) on {}", vid, collection, rep.ToString(),
                 fmt::join(placement, ", "));
  }
  if (grown == 0) {
    return last_error.ok() ? PosixError(ENOSPC, "no volume could be allocated") : last_error;
  }
  return absl::OkStatus();
}

absl::StatusOr<cluster::LookupVolumeResponse> Topology::LookupVolume(const cluster::LookupVolumeRequest& req) {
  cluster::LookupVolumeResponse resp;
  MutexLock lock(mu_);
  for (;;) {
    resp.Clear();
    bool unknown = false;
    for (uint32_t vid : req.volume_ids()) {
      auto* out = resp.add_volumes();
      out->set_volume_id(vid);
      auto it = volumes_.find(vid);
      if (it == volumes_.end()) {
        out->set_error(StrCat("volume ", vid, " not found"));
        unknown = true;
        continue;
      }
      for (const auto& [url, info] : it->second.replicas) {
        auto s = servers_.find(url);
        if (s != servers_.end() && s->second.alive) *out->add_locations() = LocationOf(url);
      }
      // Known, but every server holding it went silent: that answer does not wait.
      if (out->locations_size() == 0) out->set_error(StrCat("volume ", vid, " has no live replica"));
    }
    if (!unknown || std::chrono::steady_clock::now() >= await_volumes_until_) return resp;
    grown_.WaitUntil(lock, await_volumes_until_);  // heartbeats wake it
  }
}

ClusterApi::Capacity Topology::GetCapacity() {
  Capacity c;
  MutexLock lock(mu_);
  std::set<std::string> seen_disks;
  for (const auto& [url, s] : servers_) {
    if (!s.alive) continue;
    c.total_bytes += s.last.disk_total();
    c.free_bytes += s.last.disk_free();
  }
  return c;
}

std::vector<absl::Status> Topology::DeleteBlobs(const std::vector<std::string>& fids) {
  std::vector<absl::Status> out(fids.size());
  std::map<uint32_t, std::vector<size_t>> by_volume;
  for (size_t i = 0; i < fids.size(); ++i) {
    auto id = FileId::Parse(fids[i]);
    if (!id.ok()) {
      out[i] = id.status();
      continue;
    }
    by_volume[id->volume_id].push_back(i);
  }
  for (const auto& [vid, idx] : by_volume) {
    std::vector<std::pair<std::string, std::string>> replicas;  // url, grpc address
    absl::Status unavailable;
    {
      MutexLock lock(mu_);
      auto it = volumes_.find(vid);
      if (it == volumes_.end()) {
        unavailable = absl::UnavailableError(StrCat("volume ", vid, " is not known (yet)"));
      } else {
        for (const auto& [url, info] : it->second.replicas) {
          auto s = servers_.find(url);
          if (s == servers_.end() || !s->second.alive) {
            unavailable = absl::UnavailableError(StrCat("volume ", vid, " replica ", url, " is down"));
            break;
          }
          replicas.emplace_back(url, StrCat(s->second.last.ip(), ":", s->second.last.grpc_port()));
        }
      }
    }
    if (!unavailable.ok()) {
      for (size_t i : idx) out[i] = unavailable;
      continue;
    }
    std::vector<std::string> batch;
    for (size_t i : idx) batch.push_back(fids[i]);
    for (const auto& [url, addr] : replicas) {
      auto r = admin_->BatchDelete(addr, batch);
      if (!r.ok()) {
        for (size_t i : idx) out[i] = r.status();
        break;
      }
      std::map<std::string, const volume::DeleteResult*> results;
      for (const auto& res : r->results()) results[res.fid()] = &res;
      for (size_t k = 0; k < idx.size(); ++k) {
        auto f = results.find(batch[k]);
        if (f == results.end()) {
          out[idx[k]] = absl::InternalError(StrCat("no delete result for ", batch[k], " from ", url));
        } else if (f->second->status() >= 300 && f->second->status() != 404) {
          out[idx[k]] = absl::UnavailableError(StrCat("delete ", batch[k], " on ", url, ": ", f->second->error()));
        }
      }
    }
  }
  return out;
}

nlohmann::json Topology::StatusJson() const {
  using nlohmann::json;
  MutexLock lock(mu_);
  json servers = json::array();
  for (const auto& [url, s] : servers_) {
    servers.push_back({{"url", url},
                       {"publicUrl", s.last.public_url()},
                       {"grpcPort", s.last.grpc_port()},
                       {"dataCenter", s.last.data_center()},
                       {"rack", s.last.rack()},
                       {"alive", s.alive},
                       {"maxVolumes", s.last.max_volumes()},
                       {"volumes", s.volumes.size()},
                       {"diskFree", s.last.disk_free()},
                       {"diskTotal", s.last.disk_total()}});
  }
  json volumes = json::array();
  for (const auto& [vid, v] : volumes_) {
    json reps = json::array();
    uint64_t size = 0, files = 0;
    for (const auto& [url, info] : v.replicas) {
      reps.push_back(url);
      size = std::max(size, info.size());
      files = std::max(files, info.file_count());
    }
    volumes.push_back({{"id", vid},
                       {"collection", v.collection},
                       {"replication", v.replication},
                       {"size", size},
                       {"fileCount", files},
                       {"replicas", reps},
                       {"writable", WritableLocked(v)}});
  }
  return json{{"volumeSizeLimit", opts_.volume_size_limit},
              {"defaultReplication", opts_.default_replication},
              {"servers", servers},
              {"volumes", volumes},
              {"nextNeedleKey", needle_keys_.Peek()},
              {"nextVolumeId", volume_ids_.Peek()}};
}

}  // namespace kelp::filer
