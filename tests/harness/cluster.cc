#include "tests/harness/cluster.h"

#include <filesystem>

#include <catch2/catch.hpp>

#include "shared/strings.h"

namespace kelp::testing {

TestCluster::TestCluster(Options options) : opts_(std::move(options)), tmp_(opts_.name) {
  for (int i = 0; i < opts_.filers; ++i) filers_.push_back(Proc{FreePort(), nullptr});
  for (int i = 0; i < opts_.volumes; ++i) volumes_.push_back(Proc{FreePort(), nullptr});
  for (int i = 0; i < opts_.filers; ++i) StartFiler(i);
  for (int i = 0; i < opts_.volumes; ++i) StartVolume(i);
  if (opts_.filers > 0 && opts_.volumes > 0) {
    if (!WaitAliveVolumes(opts_.volumes)) FAIL("the volume servers never showed up alive\n" << Logs());
  }
}

TestCluster::~TestCluster() {
  for (auto& v : volumes_) {
    if (v.proc) v.proc->Stop();
  }
  for (auto& f : filers_) {
    if (f.proc) f.proc->Stop();
  }
}

std::string TestCluster::filer(int i) const { return StrCat("127.0.0.1:", filers_[i].port); }
std::string TestCluster::filer_grpc(int i) const { return StrCat("127.0.0.1:", filers_[i].port + 10000); }
std::string TestCluster::filer_dir(int i) const { return tmp_.file(StrCat("filer", i)); }
std::string TestCluster::volume(int i) const { return StrCat("127.0.0.1:", volumes_[i].port); }
std::string TestCluster::volume_grpc(int i) const { return StrCat("127.0.0.1:", volumes_[i].port + 10000); }
std::string TestCluster::volume_dir(int i) const { return tmp_.file(StrCat("vol", i)); }
std::string TestCluster::LogPath(const char* role, int i) const { return tmp_.file(StrCat(role, i, ".log")); }

std::string TestCluster::filer_list() const {
  std::string out;
  for (int i = 0; i < opts_.filers; ++i) out += (i ? "," : "") + filer(i);
  return out;
}

void TestCluster::StartFiler(int i) {
  std::vector<std::string> args = {KelpBinary(), "filer", StrCat("-dir=", filer_dir(i)),
                                   StrCat("-port=", filers_[i].port)};
  if (!opts_.pg_dsn.empty()) {
    for (std::string f : {"-store=postgres", "-coordinator.leaseMs=2000"}) args.push_back(f);
    args.push_back(StrCat("-store.dsn=", opts_.pg_dsn));
    args.push_back(StrCat("-store.keyspace=", opts_.pg_keyspace));
  }
  args.insert(args.end(), opts_.filer_flags.begin(), opts_.filer_flags.end());
  auto p = Process::Start(args, LogPath("filer", i));
  REQUIRE(p.ok());
  filers_[i].proc = std::move(*p);
  if (!WaitForHttp(filer(i), "/status", std::chrono::seconds(20))) FAIL("filer did not start\n" << Logs());
}

void TestCluster::StartVolume(int i) {
  std::filesystem::create_directories(volume_dir(i));
  std::vector<std::string> args = {KelpBinary(),
                                   "volume",
                                   StrCat("-dir=", volume_dir(i)),
                                   StrCat("-port=", volumes_[i].port),
                                   StrCat("-port.grpc=", volumes_[i].port + 10000),
                                   StrCat("-filer=", filer_list())};
  args.insert(args.end(), opts_.volume_flags.begin(), opts_.volume_flags.end());
  auto p = Process::Start(args, LogPath("vol", i));
  REQUIRE(p.ok());
  volumes_[i].proc = std::move(*p);
  if (!WaitForHttp(volume(i), "/status", std::chrono::seconds(20))) FAIL("volume server did not start\n" << Logs());
}

int TestCluster::StopFiler(int i) { return filers_[i].proc->Stop(); }
void TestCluster::KillFiler(int i) { filers_[i].proc->Kill(); }
bool TestCluster::FilerRunning(int i) { return filers_[i].proc && filers_[i].proc->Running(); }
int TestCluster::StopVolume(int i) { return volumes_[i].proc->Stop(); }
void TestCluster::KillVolume(int i) { volumes_[i].proc->Kill(); }

nlohmann::json TestCluster::Status(int i) {
  auto r = http_.Get(filer(i), "/status");
  if (!r.ok() || r->status != 200) return nlohmann::json::object();
  auto j = nlohmann::json::parse(r->body, nullptr, false);
  return j.is_discarded() ? nlohmann::json::object() : j;
}

int TestCluster::AliveVolumes(int i) {
  nlohmann::json s = Status(i);
  int n = 0;
  if (!s.contains("topology")) return 0;
  for (const auto& srv : s["topology"]["servers"]) n += srv.value("alive", false) ? 1 : 0;
  return n;
}

int TestCluster::Coordinator() {
  for (int i = 0; i < opts_.filers; ++i) {
    if (!FilerRunning(i)) continue;
    nlohmann::json s = Status(i);
    if (s.contains("coordinator") && s["coordinator"].is_object() && s["coordinator"].value("self", false)) return i;
  }
  return -1;
}

bool TestCluster::WaitAliveVolumes(int n, std::chrono::milliseconds timeout) {
  return WaitFor(
      [&] {
        int c = Coordinator();
        return c >= 0 && AliveVolumes(c) >= n;
      },
      timeout);
}

std::string TestCluster::Logs() const {
  std::string out;
  auto add = [&](const std::vector<Proc>& procs) {
    for (const auto& p : procs) {
      if (p.proc) out += StrCat("---- ", p.proc->log_path(), "\n", p.proc->Log());
    }
  };
  add(filers_);
  add(volumes_);
  return out;
}

}  // namespace kelp::testing
