#include "filer/fsck/fsck.h"

#include <fcntl.h>
#include <unistd.h>

#include <filesystem>

#include <fmt/format.h>

#include "filer/cluster/lease.h"
#include "filer/core/consistency_check.h"
#include "filer/fsck/blob_check.h"
#include "filer/fsck/repair.h"
#include "shared/status.h"
#include "shared/strings.h"

namespace kelp::filer {
namespace {

// Problem lines printed; the summary counts all of them.
constexpr size_t kMaxPrinted = 100'000;

bool IsStore(const std::filesystem::path& p) {
  std::error_code ec;
  return std::filesystem::exists(p / "CURRENT", ec);
}

// The pid holding RocksDB's LOCK (it takes an fcntl write lock on the whole file), or 0.
pid_t LockHolder(const std::string& store_dir) {
  int fd = open((std::filesystem::path(store_dir) / "LOCK").c_str(), O_RDONLY | O_CLOEXEC);
  if (fd < 0) return 0;
  struct flock fl = {};
  fl.l_type = F_WRLCK;
  fl.l_whence = SEEK_SET;
  pid_t holder = 0;
  if (fcntl(fd, F_GETLK, &fl) == 0 && fl.l_type != F_UNLCK) holder = fl.l_pid;
  close(fd);
  return holder;
}

}  // namespace

absl::StatusOr<std::string> FindFilerStore(const std::string& dir) {
  std::filesystem::path d(dir);
  for (const auto& p : {d / "meta", d / "filer" / "meta", d}) {
    if (IsStore(p)) return p.string();
  }
  return absl::NotFoundError(StrCat("no filer store in ", dir, " (looked for ", dir, "/meta, ",
                                    dir, "/filer/meta and ", dir, " itself)"));
}

absl::StatusOr<std::unique_ptr<KvStore>> OpenStoreForFsck(const std::string& store_dir) {
  if (pid_t pid = LockHolder(store_dir); pid != 0) {
    return absl::FailedPreconditionError(
        StrCat("the store in ", store_dir, " is in use by process ", pid,
               " (a running filer?): stop it first, fsck needs the store to itself"));
  }
  auto kv = OpenRocksKvStore(store_dir);
  if (!kv.ok()) {
    std::string msg(ToStd(kv.status().message()));
    if (msg.find("lock") != std::string::npos || msg.find("LOCK") != std::string::npos) {
      return absl::FailedPreconditionError(
          StrCat("the store in ", store_dir, " is in use (a running filer?): stop it first"));
    }
    return absl::UnavailableError(StrCat("cannot open the store in ", store_dir, ": ", msg));
  }
  return kv;
}

absl::StatusOr<std::unique_ptr<KvStore>> OpenOfflineStore(const StoreOptions& o, const std::string& dir,
                                                          std::string* where) {
  if (o.kind == "rocksdb") {
    ASSIGN_OR_RETURN(std::string store_dir, FindFilerStore(dir));
    *where = store_dir;
    return OpenStoreForFsck(store_dir);
  }
  *where = DescribeStore(o);
  ASSIGN_OR_RETURN(auto kv, OpenKvStore(o));
  RETURN_IF_ERROR(CoordinatorLease::CheckNoFilerRunning(*kv));
  return kv;
}

int RunFsck(const FsckOptions& o, const std::function<void(std::string_view)>& out) {
  auto verbose = [&](std::string_view line) {
    if (o.verbose) out(line);
  };
  std::string where;
  auto opened = OpenOfflineStore(o.store, o.dir, &where);
  if (!opened.ok()) {
    out(fmt::format("filer.fsck: {}", opened.status().message()));
    return kFsckProblems;
  }
  auto* kv = &*opened;
  const std::string* store = &where;
  verbose(fmt::format("checking the filer store in {}", *store));

  uint64_t fixes = 0;
  if (o.fix) {
    auto r = RepairNamespace(**kv, [&](std::string_view line) { out(fmt::format("fixed: {}", line)); });
    if (!r.ok()) {
      out(fmt::format("filer.fsck: repair stopped: {}", r.status().message()));
      return kFsckProblems;
    }
    fixes = r->fixes;
    verbose(fmt::format("{} repairs in {} rounds", r->fixes, r->rounds));
  }

  auto report = CheckNamespace(**kv, kMaxPrinted, o.progress);
  if (!report.ok()) {
    out(fmt::format("filer.fsck: check failed: {}", report.status().message()));
    return kFsckProblems;
  }
  for (const Problem& p : report->problems) out(fmt::format("problem: {}", p.message));
  if (report->problems.size() < report->problem_count) {
    out(fmt::format("problem: ... and {} more", report->problem_count - report->problems.size()));
  }
  uint64_t problems = report->problem_count;
  std::string blobs;
  if (!o.volume_servers.empty()) {
    BlobCheckOptions bo;
    bo.volume_servers = o.volume_servers;
    bo.fix = o.fix;
    auto b = CheckBlobs(**kv, bo, verbose);
    if (!b.ok()) {
      out(fmt::format("filer.fsck: blob check failed: {}", b.status().message()));
      return kFsckProblems;
    }
    for (const auto& line : b->fixed) out(fmt::format("fixed: {}", line));
    for (const auto& line : b->problems) out(fmt::format("problem: {}", line));
    problems += b->problems.size();
    fixes += b->queued;
    blobs = fmt::format(
        "; blobs: {} referenced ({} present, {} missing, {} unverified), {} on the servers, {} "
        "leaked ({} bytes{})",
        b->fids, b->present, b->missing, b->unverified, b->listed, b->leaked, b->leaked_bytes,
        o.fix ? fmt::format(", {} queued for GC", b->queued) : "");
  }
  if (auto s = (*kv)->Sync(); !s.ok()) out(fmt::format("filer.fsck: sync: {}", s.message()));
  out(fmt::format("filer.fsck: {}: {} inodes ({} directories), {} dentries, {} chunks, {} orphans, "
                  "{} gc entries, {} events{}; {}{}",
                  *store, report->inodes, report->directories, report->dentries, report->chunks,
                  report->orphans, report->gc_entries, report->events, blobs,
                  problems == 0 ? "clean" : fmt::format("{} problems", problems),
                  o.fix ? fmt::format(" ({} repairs made)", fixes) : ""));
  return problems == 0 ? kFsckClean : kFsckProblems;
}

}  // namespace kelp::filer
