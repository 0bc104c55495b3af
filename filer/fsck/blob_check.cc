#include "filer/fsck/blob_check.h"

#include <sys/stat.h>

#include <map>
#include <set>
#include <unordered_map>
#include <unordered_set>

#include <fmt/format.h>
#include <fmt/ranges.h>

#include "filer/core/clock.h"
#include "filer/core/gc_worker.h"
#include "filer/core/options.h"
#include "filer/store/keys.h"
#include "filer/store/records.h"
#include "shared/file_id.h"
#include "shared/status.h"
#include "shared/strings.h"
#include "volume/client/volume_client.h"

namespace kelp::filer {
namespace {

// Where a fid is first referenced.
struct Ref {
  uint64_t ino = 0;
  uint64_t seq = 0;
  uint32_t records = 0;
};

// vid -> gRPC addresses of the servers holding it.
using Locations = std::map<uint32_t, std::vector<std::string>>;

struct Located {
  Locations locations;
  // Some source could not be asked: a volume found nowhere may be on it.
  std::vector<std::string> errors;
};

Located FromVolumeServers(const std::vector<std::string>& servers, volume::VolumeClient& client,
                          const std::function<void(std::string_view)>& verbose) {
  Located out;
  for (const std::string& s : servers) {
    std::string grpc = VolumeGrpcAddress(s);
    if (grpc.empty()) {
      out.errors.push_back(fmt::format("bad volume server address '{}'", s));
      continue;
    }
    auto st = client.GetStatus(grpc);
    if (!st.ok()) {
      out.errors.push_back(fmt::format("volume server {}: {}", s, st.status().message()));
      continue;
    }
    verbose(fmt::format("volume server {} (gRPC {}): {} volumes", s, grpc, st->volumes_size()));
    for (const auto& v : st->volumes()) out.locations[v.id()].push_back(grpc);
  }
  return out;
}

// Paths of the inodes wanted, from one scan of the dentries (directories are kept as path
// components). An inode without a name is shown as "<inode N>".
absl::StatusOr<std::map<uint64_t, std::string>> Paths(KvStore& kv, const std::set<uint64_t>& want) {
  std::unordered_map<uint64_t, std::pair<uint64_t, std::string>> up;
  std::string family = keys::Family(keys::kDentry);
  auto it = kv.Scan(family, keys::PrefixEnd(family));
  for (; it->Valid(); it->Next()) {
    auto d = DecodeDentry(it->value());
    if (!d.ok() || !(S_ISDIR(d->type) || want.count(d->ino)) || up.count(d->ino)) continue;
    up[d->ino] = {keys::FirstU64(it->key()), std::string(keys::NameOf(it->key()))};
  }
  RETURN_IF_ERROR(it->status());
  std::map<uint64_t, std::string> out;
  for (uint64_t ino : want) {
    std::string path;
    uint64_t cur = ino;
    for (int depth = 0; cur != keys::kRootIno && depth < 4096; ++depth) {
      auto u = up.find(cur);
      if (u == up.end()) {
        path = fmt::format("<inode {}>{}", cur, path);
        break;
      }
      path = "/" + u->second.second + path;
      cur = u->second.first;
    }
    out[ino] = path.empty() ? "/" : path;
  }
  return out;
}

// The fids in the GC queue.
absl::StatusOr<std::unordered_set<std::string>> GcFids(KvStore& kv) {
  std::unordered_set<std::string> out;
  std::string family = keys::Family(keys::kGc);
  auto it = kv.Scan(family, keys::PrefixEnd(family));
  for (; it->Valid(); it->Next()) {
    auto g = DecodeGc(it->value());
    if (g.ok()) out.insert(g->fid);  // the namespace check reports the others
  }
  RETURN_IF_ERROR(it->status());
  return out;
}

// Lists every volume on the servers and reports (with fix: queues for GC) the blobs that
// neither a chunk record nor the GC queue names.
absl::Status CheckLeaks(KvStore& kv, const BlobCheckOptions& options, Located& located,
                        const std::unordered_map<std::string, Ref>& refs,
                        volume::VolumeClient& client,
                        const std::function<void(std::string_view)>& verbose,
                        BlobCheckResult* result) {
  ASSIGN_OR_RETURN(auto queued, GcFids(kv));
  std::map<std::string, std::pair<uint64_t, std::vector<std::string>>> leaked;  // fid -> size, servers
  std::unordered_set<std::string> listed;
  for (const auto& [vid, servers] : located.locations) {
    for (const std::string& server : servers) {
      auto blobs = client.ListBlobs(server, vid);
      if (!blobs.ok()) {
        located.errors.push_back(fmt::format("volume {} on {}: cannot list its blobs: {}", vid,
                                             server, blobs.status().message()));
        continue;
      }
      for (const auto& b : *blobs) {
        listed.insert(b.fid());
        if (refs.count(b.fid()) || queued.count(b.fid())) continue;
        auto& l = leaked[b.fid()];
        l.first = b.size();
        l.second.push_back(server);
      }
      verbose(fmt::format("volume {} on {}: {} live blobs", vid, server, blobs->size()));
    }
  }
  result->listed = listed.size();
  result->leaked = leaked.size();
  for (const auto& [fid, l] : leaked) result->leaked_bytes += l.first;
  if (leaked.empty()) return absl::OkStatus();
  if (!options.fix) {
    for (const auto& [fid, l] : leaked) {
      result->problems.push_back(fmt::format(
          "leaked blob {} ({} bytes, on {}): no chunk references it and it is not queued for GC",
          fid, l.first, fmt::join(l.second, ", ")));
    }
    return absl::OkStatus();
  }
  FilerOptions gc_options;
  GcWorker gc(&kv, nullptr, RealClock(), gc_options);
  RETURN_IF_ERROR(gc.Load());
  std::vector<std::string> fids;
  for (const auto& [fid, l] : leaked) fids.push_back(fid);
  constexpr size_t kPerBatch = 1000;
  for (size_t i = 0; i < fids.size(); i += kPerBatch) {
    std::vector<std::string> part(fids.begin() + i,
                                  fids.begin() + std::min(fids.size(), i + kPerBatch));
    WriteBatch b;
    RETURN_IF_ERROR(gc.Enqueue(&b, part, 0));
    RETURN_IF_ERROR(kv.Write(b, true));
    for (const auto& fid : part) {
      result->fixed.push_back(fmt::format("leaked blob {} ({} bytes) queued for GC", fid,
                                          leaked[fid].first));
    }
    result->queued += part.size();
  }
  return absl::OkStatus();
}

}  // namespace

std::string VolumeGrpcAddress(std::string_view address) {
  size_t colon = address.rfind(':');
  if (colon == std::string_view::npos || colon == 0) return "";
  std::string_view host = address.substr(0, colon);
  std::string_view port = address.substr(colon + 1);
  size_t dot = port.find('.');
  int p = 0;
  if (dot != std::string_view::npos) {
    if (!ParseInt(port.substr(dot + 1), &p) || p <= 0 || p > 65535) return "";
    return StrCat(host, ":", p);
  }
  if (!ParseInt(port, &p) || p <= 0 || p + 10000 > 65535) return "";
  return StrCat(host, ":", p + 10000);
}

absl::StatusOr<BlobCheckResult> CheckBlobs(KvStore& kv, const BlobCheckOptions& options,
                                           const std::function<void(std::string_view)>& verbose) {
  BlobCheckResult result;
  std::unordered_map<std::string, Ref> refs;
  std::map<uint32_t, std::vector<std::string>> by_volume;
  std::string family = keys::Family(keys::kChunk);
  auto it = kv.Scan(family, keys::PrefixEnd(family));
  for (; it->Valid(); it->Next()) {
    ++result.chunk_records;
    uint64_t ino = keys::FirstU64(it->key());
    uint64_t seq = keys::SecondU64(it->key());
    auto c = DecodeChunk(seq, it->value());
    if (!c.ok()) continue;  // the namespace check reports it
    auto id = FileId::Parse(c->fid());
    if (!id.ok()) continue;  // likewise
    auto [ref, added] = refs.try_emplace(c->fid(), Ref{ino, seq, 0});
    ++ref->second.records;
    if (added) by_volume[id->volume_id].push_back(c->fid());
  }
  RETURN_IF_ERROR(it->status());
  result.fids = refs.size();
  verbose(fmt::format("{} chunk records reference {} blobs on {} volumes", result.chunk_records,
                      result.fids, by_volume.size()));

  volume::VolumeClient client;
  Located located = FromVolumeServers(options.volume_servers, client, verbose);

  // fid -> why it is missing or unverified.
  std::map<std::string, std::string> missing, unverified;
  for (const auto& [vid, fids] : by_volume) {
    auto loc = located.locations.find(vid);
    if (loc == located.locations.end() || loc->second.empty()) {
      auto& into = located.errors.empty() ? missing : unverified;
      std::string why = located.errors.empty()
                            ? fmt::format("volume {} is on no volume server", vid)
                            : fmt::format("volume {} not found (some servers could not be asked)", vid);
      for (const auto& f : fids) into[f] = why;
      continue;
    }
    // Per fid: held somewhere, or the errors of the servers that could not say.
    std::unordered_map<std::string, bool> held;
    std::unordered_map<std::string, std::string> errors;
    for (const std::string& server : loc->second) {
      for (size_t i = 0; i < fids.size(); i += options.batch) {
        std::vector<std::string> batch(fids.begin() + i,
                                       fids.begin() + std::min(fids.size(), i + options.batch));
        auto r = client.StatBlobs(server, batch);
        if (!r.ok()) {
          for (const auto& f : batch) errors[f] = fmt::format("{}: {}", server, r.status().message());
          continue;
        }
        for (const auto& b : *r) {
          if (b.status() == 200) {
            held[b.fid()] = true;
          } else if (b.status() != 404) {
            errors[b.fid()] = fmt::format("{}: {} {}", server, b.status(), b.error());
          }
        }
      }
    }
    for (const auto& f : fids) {
      if (held.count(f)) {
        ++result.present;
      } else if (auto e = errors.find(f); e != errors.end()) {
        unverified[f] = e->second;
      } else {
        missing[f] = fmt::format("missing on every replica of volume {} ({} servers)", vid,
                                 loc->second.size());
      }
    }
    verbose(fmt::format("volume {}: {} blobs checked on {} servers", vid, fids.size(),
                        loc->second.size()));
  }
  result.missing = missing.size();
  result.unverified = unverified.size();

  std::set<uint64_t> inos;
  for (const auto* m : {&missing, &unverified}) {
    for (const auto& [fid, why] : *m) inos.insert(refs[fid].ino);
  }
  ASSIGN_OR_RETURN(auto paths, Paths(kv, inos));
  for (const auto& [fid, why] : missing) {
    const Ref& r = refs[fid];
    result.problems.push_back(fmt::format("blob {} of {} (inode {}, chunk {}{}): {}", fid,
                                          paths[r.ino], r.ino, r.seq,
                                          r.records > 1 ? fmt::format(" and {} more", r.records - 1) : "",
                                          why));
  }
  for (const auto& [fid, why] : unverified) {
    const Ref& r = refs[fid];
    result.problems.push_back(fmt::format("blob {} of {} (inode {}) could not be checked: {}", fid,
                                          paths[r.ino], r.ino, why));
  }
  RETURN_IF_ERROR(CheckLeaks(kv, options, located, refs, client, verbose, &result));
  for (const auto& e : located.errors) result.problems.push_back(e);
  return result;
}

}  // namespace kelp::filer
