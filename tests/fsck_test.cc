// kelp filer.fsck against real processes (a `kelp filer` and a `kelp volume` on loopback):
//  - chunk GC frees volume space: files written through the filer, deleted, the GC queue
//    drains (the filer deletes their blobs), a vacuum shrinks the volume;
//  - fsck -volumes reports a blob missing under a chunk and a leaked blob; -fix queues the
//    leaked one for GC and the restarted filer deletes it;
//  - kill -9 of the filer at random moments of a mutation workload, several rounds: after
//    each, fsck finds the store clean and every acknowledged change is there (creates with
//    a chunk, mkdir, rename, hard link, unlink, rmdir by 4 clients in one shared directory).
#include <sys/stat.h>

#include <atomic>
#include <filesystem>
#include <map>
#include <mutex>
#include <random>
#include <set>
#include <thread>

#include <catch2/catch.hpp>
#include <nlohmann/json.hpp>

#include "filer/client/filer_client.h"
#include "shared/file_id.h"
#include "shared/status.h"
#include "shared/strings.h"
#include "tests/harness/cluster.h"
#include "volume/client/volume_client.h"

using namespace kelp;
using namespace kelp::testing;
using kelp::filer::FilerClient;
using kelp::volume::VolumeClient;
using nlohmann::json;

namespace {

// A filer and a volume server (no vacuum: the test runs it), and the fsck tool on the
// filer's store.
class FilerAndVolume : public TestCluster {
 public:
  FilerAndVolume()
      : TestCluster(Make()) {}
  static Options Make() {
    Options o;
    o.filer_flags = {"-pulseMs=200", "-logLevel=warn"};
    o.volume_flags = {"-vacuumIntervalSec=0", "-logLevel=warn"};
    o.name = "kelp-fsck-test";
    return o;
  }

  void StartFiler() { TestCluster::StartFiler(0); }
  void KillFiler() { TestCluster::KillFiler(0); }
  void StopFiler() { REQUIRE(TestCluster::StopFiler(0) == 0); }
  void WaitVolumeAlive() { REQUIRE(WaitAliveVolumes(1)); }

  struct Fsck {
    int code = -1;
    std::string out;
  };
  Fsck RunFsck(bool fix, bool volumes) {
    std::vector<std::string> args = {KelpBinary(), "filer.fsck", StrCat("-dir=", filer_dir())};
    if (fix) args.push_back("-fix");
    if (volumes) args.push_back(StrCat("-volumes=", volume()));
    std::string log = tmp().file(StrCat("fsck", runs_++, ".log"));
    auto p = Process::Start(args, log);
    REQUIRE(p.ok());
    Fsck r;
    r.code = (*p)->Wait(std::chrono::seconds(120));
    r.out = (*p)->Log();
    return r;
  }

  uint64_t VolumeDatBytes() {
    auto s = VolumeClient().GetStatus(volume_grpc());
    REQUIRE(s.ok());
    uint64_t n = 0;
    for (const auto& v : s->volumes()) n += v.size();
    return n;
  }

 private:
  int runs_ = 0;
};

// Assign + upload, as a mount writes a chunk. Returns the fid.
absl::StatusOr<std::string> Upload(FilerClient& f, VolumeClient& v, const std::string& data) {
  ASSIGN_OR_RETURN(auto a, f.Assign(cluster::AssignRequest()));
  if (a.locations_size() == 0) return absl::UnavailableError("assign: no location");
  RETURN_IF_ERROR(v.Upload(a.locations(0).url(), a.fid(), data).status());
  return a.fid();
}

// Creates parent/name and commits data as its one chunk. Returns the inode.
absl::StatusOr<uint64_t> WriteFile(FilerClient& f, VolumeClient& v, uint64_t parent,
                                   const std::string& name, const std::string& data,
                                   std::string* fid_out = nullptr) {
  filer::CreateRequest c;
  c.set_parent(parent);
  c.set_name(name);
  c.set_mode(S_IFREG | 0644);
  c.set_exclusive(true);
  ASSIGN_OR_RETURN(auto attr, f.Create(c));
  ASSIGN_OR_RETURN(std::string fid, Upload(f, v, data));
  filer::CommitChunksRequest commit;
  commit.set_ino(attr.ino());
  auto* ch = commit.add_chunks();
  ch->set_fid(fid);
  ch->set_offset(0);
  ch->set_size(data.size());
  RETURN_IF_ERROR(f.CommitChunks(commit).status());
  if (fid_out) *fid_out = fid;
  return attr.ino();
}

std::unique_ptr<FilerClient> Client(const FilerAndVolume& c) {
  filer::FilerClientOptions o;
  o.rpc_timeout = std::chrono::seconds(5);
  return std::make_unique<FilerClient>(c.filer(), o);
}

}  // namespace

TEST_CASE("GC frees volume space, fsck reports missing and leaked blobs, -fix queues the leak") {
  FilerAndVolume c;
  auto f = Client(c);
  VolumeClient v;
  const int files = 20;
  std::vector<std::string> fids(files);
  for (int i = 0; i < files; ++i) {
    auto ino = WriteFile(*f, v, 1, StrCat("f", i), RandomBytes(200 << 10, i), &fids[i]);
    INFO(ino.status().ToString());
    REQUIRE(ino.ok());
  }
  uint64_t full = c.VolumeDatBytes();
  CHECK(full > files * (200u << 10));
  // Delete 15 of them: their blobs go to the GC queue, which the filer drains.
  for (int i = 0; i < 15; ++i) REQUIRE(f->Unlink(1, StrCat("f", i)).ok());
  REQUIRE(WaitFor(
      [&] {
        json s = c.Status();
        return s.contains("gc") && s["gc"]["pending"] == 0 && s["gc"]["deleted"] >= 15;
      },
      std::chrono::seconds(30)));
  for (int i = 0; i < 15; ++i) {
    CHECK(ErrnoOf(v.Read(c.volume(), fids[i]).status()) == ENOENT);
  }
  CHECK(*v.Read(c.volume(), fids[15]) == RandomBytes(200 << 10, 15));
  auto vac = v.Vacuum(c.volume_grpc(), 0, 0.01);
  INFO(vac.status().ToString());
  REQUIRE(vac.ok());
  uint64_t after = c.VolumeDatBytes();
  INFO("dat bytes " << full << " -> " << after);
  CHECK(after < full / 2);
  CHECK(*v.Read(c.volume(), fids[19]) == RandomBytes(200 << 10, 19));

  // A blob uploaded and never committed leaks; a blob deleted behind the filer's back is
  // missing under its chunk.
  auto leaked = Upload(*f, v, "nobody references me");
  REQUIRE(leaked.ok());
  REQUIRE(v.Delete(c.volume(), fids[16]).ok());
  c.StopFiler();
  auto r = c.RunFsck(false, false);
  INFO(r.out);
  CHECK(r.code == 0);  // the namespace alone is clean
  r = c.RunFsck(false, true);
  INFO(r.out);
  CHECK(r.code == 1);
  CHECK(r.out.find(StrCat("leaked blob ", *leaked)) != std::string::npos);
  CHECK(r.out.find(StrCat("blob ", fids[16], " of /f16")) != std::string::npos);
  CHECK(r.out.find("1 missing") != std::string::npos);
  r = c.RunFsck(true, true);
  INFO(r.out);
  CHECK(r.code == 1);  // the missing blob cannot be repaired
  CHECK(r.out.find(StrCat("leaked blob ", *leaked, " (20 bytes) queued for GC")) != std::string::npos);
  r = c.RunFsck(false, true);
  INFO(r.out);
  CHECK(r.out.find("0 leaked") != std::string::npos);
  // The filer drains what fsck queued.
  c.StartFiler();
  c.WaitVolumeAlive();
  CHECK(WaitFor([&] { return ErrnoOf(v.Read(c.volume(), *leaked).status()) == ENOENT; },
                std::chrono::seconds(30)));
}

namespace {

// What one worker of the crash test knows: names it was told exist (name -> inode, size;
// size -1 for a directory) and names whose last operation got no answer.
struct Model {
  std::map<std::string, std::pair<uint64_t, int64_t>> names;
  std::set<std::string> uncertain;
  uint64_t acked = 0;
};

void Work(FilerAndVolume& c, uint64_t dir, int t, int round, Model& m, std::atomic<bool>& stop) {
  auto f = Client(c);
  VolumeClient v;
  std::mt19937 rng(round * 100 + t);
  for (int i = 0; !stop; ++i) {
    std::string name = StrCat("t", t, "-", round, "-", i);
    int op = m.names.empty() ? 0 : static_cast<int>(rng() % 5);
    auto pick = [&] {
      auto it = m.names.begin();
      std::advance(it, rng() % m.names.size());
      return it;
    };
    if (op == 0 || op == 1) {
      m.uncertain.insert(name);
      if (op == 0) {
        std::string data = RandomBytes(1 + rng() % 4096, i);
        auto ino = WriteFile(*f, v, dir, name, data);
        if (!ino.ok()) continue;
        m.names[name] = {*ino, static_cast<int64_t>(data.size())};
      } else {
        auto a = f->Mkdir(dir, name, 0755, 0, 0);
        if (!a.ok()) continue;
        m.names[name] = {a->ino(), -1};
      }
    } else if (op == 4) {
      auto it = pick();
      if (it->second.second < 0) continue;  // no hard links to directories
      auto target = it->second;
      m.uncertain.insert(name);
      if (!f->Link(target.first, dir, name).ok()) continue;
      m.names[name] = target;
    } else if (op == 2) {
      auto it = pick();
      std::string from = it->first;
      m.uncertain.insert(from);
      m.uncertain.insert(name);
      if (!f->Rename(dir, from, dir, name, 0).ok()) continue;
      m.names[name] = m.names[from];
      m.names.erase(from);
      m.uncertain.erase(from);
    } else {
      auto it = pick();
      std::string gone = it->first;
      m.uncertain.insert(gone);
      absl::Status s = it->second.second < 0 ? f->Rmdir(dir, gone) : f->Unlink(dir, gone).status();
      if (!s.ok()) continue;
      m.names.erase(gone);
      m.uncertain.erase(gone);
      ++m.acked;
      continue;
    }
    m.uncertain.erase(name);
    ++m.acked;
  }
}

}  // namespace

TEST_CASE("kill -9 of the filer mid-workload: fsck clean, every acknowledged change there") {
  FilerAndVolume c;
  uint64_t shared = 0;
  {
    auto f = Client(c);
    auto d = f->Mkdir(1, "shared", 0755, 0, 0);
    REQUIRE(d.ok());
    shared = d->ino();
  }
  const int kThreads = 4, kRounds = 4;
  std::vector<Model> models(kThreads);
  std::mt19937 rng(42);
  for (int round = 0; round < kRounds; ++round) {
    std::atomic<bool> stop{false};
    std::vector<std::thread> ts;
    for (int t = 0; t < kThreads; ++t) {
      ts.emplace_back([&, t] { Work(c, shared, t, round, models[t], stop); });
    }
    std::this_thread::sleep_for(std::chrono::milliseconds(300 + rng() % 700));
    c.KillFiler();
    stop = true;
    for (auto& t : ts) t.join();

    auto r = c.RunFsck(false, true);
    INFO("round " << round << ":\n" << r.out);
    CHECK(r.out.find(" 0 missing") != std::string::npos);
    r = c.RunFsck(false, false);
    INFO(r.out);
    REQUIRE(r.code == 0);

    c.StartFiler();
    c.WaitVolumeAlive();
    auto f = Client(c);
    uint64_t acked = 0;
    for (auto& m : models) {
      acked += m.acked;
      for (const auto& [name, want] : m.names) {
        if (m.uncertain.count(name)) continue;
        auto a = f->Lookup(shared, name);
        INFO(name);
        REQUIRE(a.ok());
        CHECK(a->ino() == want.first);
        if (want.second >= 0) CHECK(static_cast<int64_t>(a->size()) == want.second);
      }
      // What the kill left unanswered is whatever the filer says now.
      for (const auto& name : m.uncertain) {
        auto a = f->Lookup(shared, name);
        if (a.ok()) {
          m.names[name] = {a->ino(), S_ISDIR(a->mode()) ? -1 : static_cast<int64_t>(a->size())};
        } else {
          m.names.erase(name);
        }
      }
      m.uncertain.clear();
    }
    // Nothing exists that the models do not know.
    size_t known = 0;
    for (const auto& m : models) known += m.names.size();
    size_t listed = 0;
    REQUIRE(f->ReadDir(shared, 0, 0, false, [&](const filer::DirEntry&) {
                 ++listed;
                 return true;
               }).ok());
    CHECK(listed == known);
    INFO("round " << round << ": " << acked << " acknowledged operations so far");
    CHECK(acked > 0);
  }
}
