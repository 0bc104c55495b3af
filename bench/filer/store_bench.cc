// store_bench: what the namespace costs on each store, for docs/scale.md and bench/RESULTS.md.
//
//   store_bench -store=rocksdb -dir=/var/tmp/kelp-sb            -files=100000 -threads=4
//   store_bench -store=postgres -store.dsn="host=... dbname=..." -files=100000 -threads=4
//
// Through FilerService (no RPC): creates `files` regular files in `dirs` directories, each
// with one chunk record committed (a file written once), first from one thread (latency per
// create and per commit), then the rest from `threads` threads (throughput); then lookups and
// getattrs of random files (latency). Then sizes: the bytes of keys and values per key family
// (what each dentry, inode, chunk record... weighs in any store), and the store's own size:
// RocksDB after closing (memtables flushed), PostgreSQL's pg_total_relation_size (table +
// primary-key index + TOAST).
// Not a CI test.
#include <sys/stat.h>

#include <algorithm>
#include <atomic>
#include <chrono>
#include <cstdio>
#include <filesystem>
#include <map>
#include <random>
#include <string>
#include <thread>
#include <vector>

#include "filer/core/filer_service.h"
#include "filer/store/keys.h"
#include "filer/store/open_store.h"
#include "shared/file_id.h"
#include "shared/flags.h"
#include "shared/log.h"
#include "shared/strings.h"

using namespace kelp;
using namespace kelp::filer;
using Steady = std::chrono::steady_clock;

namespace {

class NullCluster : public ClusterApi {
 public:
  absl::StatusOr<cluster::AssignResponse> Assign(const cluster::AssignRequest&) override {
    return absl::UnimplementedError("bench");
  }
  absl::StatusOr<cluster::LookupVolumeResponse> LookupVolume(const cluster::LookupVolumeRequest&) override {
    return absl::UnimplementedError("bench");
  }
  Capacity GetCapacity() override { return {}; }
  std::vector<absl::Status> DeleteBlobs(const std::vector<std::string>& fids) override {
    return std::vector<absl::Status>(fids.size());
  }
};

std::string Quantiles(std::vector<double> v) {
  if (v.empty()) return "-";
  std::sort(v.begin(), v.end());
  auto q = [&](double p) { return v[std::min(v.size() - 1, static_cast<size_t>(p * v.size()))]; };
  double sum = 0;
  for (double x : v) sum += x;
  return fmt::format("mean {:.0f} p50 {:.0f} p99 {:.0f} max {:.0f} us", sum / v.size(), q(0.5), q(0.99), v.back());
}

double Us(Steady::time_point a) { return std::chrono::duration<double, std::micro>(Steady::now() - a).count(); }

uint64_t DirBytes(const std::string& dir, bool skip_wal) {
  uint64_t n = 0;
  std::error_code ec;
  for (const auto& e : std::filesystem::recursive_directory_iterator(dir, ec)) {
    if (!e.is_regular_file()) continue;
    if (skip_wal && e.path().extension() == ".log") continue;
    n += e.file_size();
  }
  return n;
}

}  // namespace

int main(int argc, char** argv) {
  StoreOptions so;
  std::string dir = "/var/tmp/kelp-store-bench";
  int files = 100000, dirs = 100, threads = 4, single = 2000, lookups = 20000;
  FlagSet flags("store_bench", "store_bench [flags]", "Costs and sizes of the namespace on a store.");
  AddStoreFlags(flags, so, "");
  flags.Add("dir", &dir, "rocksdb: directory of the store (emptied first)");
  flags.Add("files", &files, "files to create in all");
  flags.Add("dirs", &dirs, "directories they go into");
  flags.Add("threads", &threads, "threads for the throughput phase");
  flags.Add("single", &single, "creates timed one by one from one thread first");
  flags.Add("lookups", &lookups, "random lookups and getattrs timed");
  flags.ParseOrExit(argc - 1, argv + 1);
  InitLogging("warn");
  if (so.kind == "rocksdb") {
    std::filesystem::remove_all(dir);
    so.dir = dir;
  }
  auto kv = OpenKvStore(so);
  if (!kv.ok()) {
    std::fprintf(stderr, "store_bench: %s\n", kv.status().ToString().c_str());
    return 1;
  }
  NullCluster cluster;
  FilerOptions fo;
  fo.background_loops = false;
  auto fs = std::make_unique<FilerService>(kv->get(), &cluster, fo);
  if (auto s = fs->Start(); !s.ok()) {
    std::fprintf(stderr, "store_bench: %s\n", s.ToString().c_str());
    return 1;
  }
  std::vector<uint64_t> dir_inos;
  for (int d = 0; d < dirs; ++d) {
    CreateArgs a;
    a.parent = keys::kRootIno;
    a.name = StrCat("d", d);
    a.mode = S_IFDIR | 0755;
    auto r = fs->Create(a);
    if (!r.ok()) {
      std::fprintf(stderr, "mkdir: %s\n", r.status().ToString().c_str());
      return 1;
    }
    dir_inos.push_back(r->ino());
  }
  std::vector<std::vector<uint64_t>> inos(threads);
  auto make = [&](int t, int i, std::vector<double>* create_us, std::vector<double>* commit_us) -> bool {
    CreateArgs a;
    a.parent = dir_inos[i % dirs];
    a.name = StrCat("f", i);
    a.mode = S_IFREG | 0644;
    a.exclusive = true;
    auto t0 = Steady::now();
    auto r = fs->Create(a);
    if (create_us) create_us->push_back(Us(t0));
    if (!r.ok()) return false;
    CommitChunksRequest c;
    c.set_ino(r->ino());
    Chunk* ch = c.add_chunks();
    ch->set_fid(FileId{static_cast<uint32_t>(1 + i % 1000), static_cast<uint64_t>(i) + 1, 0x12345678}.ToString());
    ch->set_offset(0);
    ch->set_size(4096);
    ch->set_blob_size(4096);
    t0 = Steady::now();
    auto cr = fs->CommitChunks(c);
    if (commit_us) commit_us->push_back(Us(t0));
    if (!cr.ok()) return false;
    inos[t].push_back(r->ino());
    return true;
  };
  std::vector<double> create_us, commit_us;
  single = std::min(single, files);
  for (int i = 0; i < single; ++i) {
    if (!make(0, i, &create_us, &commit_us)) {
      std::fprintf(stderr, "create failed\n");
      return 1;
    }
  }
  std::atomic<int> next{single}, failed{0};
  auto t0 = Steady::now();
  std::vector<std::thread> ts;
  for (int t = 0; t < threads; ++t) {
    ts.emplace_back([&, t] {
      for (int i = next++; i < files; i = next++) {
        if (!make(t, i, nullptr, nullptr)) ++failed;
      }
    });
  }
  for (auto& t : ts) t.join();
  double secs = std::chrono::duration<double>(Steady::now() - t0).count();
  int parallel = files - single;

  std::vector<double> lookup_us, getattr_us;
  std::mt19937 rng(7);
  for (int n = 0; n < lookups; ++n) {
    int i = static_cast<int>(rng() % files);
    auto l0 = Steady::now();
    auto a = fs->Lookup(dir_inos[i % dirs], StrCat("f", i));
    lookup_us.push_back(Us(l0));
    if (!a.ok()) continue;
    l0 = Steady::now();
    (void)fs->GetAttr(a->ino());
    getattr_us.push_back(Us(l0));
  }

  std::printf("store_bench: %s, %d files in %d directories, one chunk each\n", std::string((*kv)->kind()).c_str(),
              files, dirs);
  std::printf("create (1 thread):        %s\n", Quantiles(create_us).c_str());
  std::printf("commit chunk (1 thread):  %s\n", Quantiles(commit_us).c_str());
  std::printf("create+commit, %d threads: %.0f files/s (%d failed)\n", threads, parallel / secs, failed.load());
  std::printf("lookup:                   %s\n", Quantiles(lookup_us).c_str());
  std::printf("getattr:                  %s\n", Quantiles(getattr_us).c_str());

  // Logical sizes by family.
  std::map<char, std::pair<uint64_t, uint64_t>> fam;  // family -> (keys, bytes)
  uint64_t total = 0;
  {
    auto it = (*kv)->Scan("", "");
    for (; it->Valid(); it->Next()) {
      auto& f = fam[it->key()[0]];
      ++f.first;
      f.second += it->key().size() + it->value().size();
      total += it->key().size() + it->value().size();
    }
  }
  std::printf("key+value bytes by family (per key; per file):\n");
  for (const auto& [f, kb] : fam) {
    std::printf("  %c: %8llu keys, %6.1f B/key, %6.1f B/file\n", f, static_cast<unsigned long long>(kb.first),
                static_cast<double>(kb.second) / kb.first, static_cast<double>(kb.second) / files);
  }
  std::printf("  all: %.1f B/file\n", static_cast<double>(total) / files);
  fs->Stop();
  fs.reset();
  uint64_t physical = 0;
  if (so.kind == "rocksdb") {
    // Reopening replays the WAL and writes what it held into SST files (the latest version of
    // each key); the WAL itself is not counted.
    kv->reset();
    auto again = OpenRocksKvStore(dir);
    again->reset();
    physical = DirBytes(dir, true);
  } else {
    physical = (*kv)->ApproximateSize();
  }
  std::printf("store size: %llu bytes, %.1f B/file (%s)\n", static_cast<unsigned long long>(physical),
              static_cast<double>(physical) / files,
              so.kind == "rocksdb" ? "SST files after a reopen, WAL not counted" : "pg_total_relation_size");
  return 0;
}
