// docs/security.md end to end: a real `kelp filer` and `kelp volume` started with one
// security.toml (every JWT key, and mutual TLS for gRPC from a test CA). Volume heartbeats,
// the filer's GC deletes and `kelp benchmark` work through it; requests without the right
// token are refused (401) and change nothing; gRPC clients without a certificate of the CA
// are refused, on gRPC and on the metadata transport (a mount with a rogue certificate never
// mounts); no key reaches a log or a command line.
#include <unistd.h>

#include <climits>
#include <cstdlib>
#include <filesystem>
#include <fstream>

#include <catch2/catch.hpp>
#include <grpcpp/grpcpp.h>
#include <nlohmann/json.hpp>

#include "proto/cluster.grpc.pb.h"
#include "shared/file_id.h"
#include "shared/http/http_client.h"
#include "shared/rpc/client.h"
#include "shared/security/jwt.h"
#include "shared/security/security_config.h"
#include "shared/security/testing/test_pki.h"
#include "shared/security/tls.h"
#include "shared/strings.h"
#include "tests/harness/cluster.h"

using namespace kelp;
using namespace kelp::testing;
using nlohmann::json;

namespace {

const std::string kVolumeKey = "volume-write-key-0123456789";
const std::string kVolumeReadKey = "volume-read-key-0123456789";
const std::string kFilerKey = "filer-write-key-0123456789";
const std::string kFilerReadKey = "filer-read-key-0123456789";

std::string ReadFile(const std::string& p) {
  std::ifstream in(p);
  return std::string(std::istreambuf_iterator<char>(in), {});
}

class SecureCluster {
 public:
  SecureCluster() {
    auto pki = security::testing::MakeTestPki(tmp_.path());
    REQUIRE(pki.ok());
    pki_ = *pki;
    toml_ = tmp_.file("security.toml");
    std::ofstream(toml_) << security::testing::SecurityToml(
        {&pki_, kVolumeKey, kVolumeReadKey, kFilerKey, kFilerReadKey, 60});
    auto cfg = security::LoadSecurityConfig(toml_);
    REQUIRE(cfg.ok());
    cfg_ = *cfg;

    // The heartbeat travels over mutual TLS: the fixture's wait for the volume server to
    // show up alive proves that works.
    TestCluster::Options o;
    o.filer_flags = {"-maxMB=1", "-pulseMs=300", StrCat("-security=", toml_)};
    o.volume_flags = {"-max=8", StrCat("-security=", toml_)};
    o.name = "kelp-security-cluster";
    cluster_ = std::make_unique<TestCluster>(o);
  }

  std::string filer() const { return cluster_->filer(); }
  std::string volume() const { return cluster_->volume(); }
  int filer_grpc_port() const { return cluster_->filer_port() + 10000; }
  const security::SecurityConfig& cfg() const { return cfg_; }
  const security::testing::TestPki& pki() const { return pki_; }
  const std::string& toml() const { return toml_; }
  std::string Logs() const { return cluster_->Logs(); }
  pid_t filer_pid() const { return cluster_->filer_process(0).pid(); }

  json Status() { return cluster_->Status(); }
  http::ClientResponse Do(std::string_view method, const std::string& addr, std::string_view target,
                          const std::string& token = {}, std::string_view body = {}) {
    http::Headers h;
    if (!token.empty()) h.Set("Authorization", "Bearer " + token);
    auto r = client_.Do(method, addr, target, h, body);
    REQUIRE(r.ok());
    return std::move(*r);
  }
  std::string FilerToken() const { return security::SignFilerToken(cfg_.filer_write, 60); }
  std::string FilerReadToken() const { return security::SignFilerToken(cfg_.filer_read, 60); }
  std::string ReadToken(const std::string& fid) const {
    return security::SignFileIdToken(cfg_.volume_read, *FileId::Parse(fid), 1);
  }

 private:
  TempDir tmp_{"kelp-security"};
  security::testing::TestPki pki_;
  std::string toml_;
  security::SecurityConfig cfg_;
  std::unique_ptr<TestCluster> cluster_;
  http::HttpClient client_;
};

SecureCluster& C() {
  static SecureCluster c;
  return c;
}

json Assign() {
  auto a = C().Do("GET", C().filer(), "/dir/assign?count=4", C().FilerToken());
  REQUIRE(a.status == 200);
  return json::parse(a.body);
}

}  // namespace

TEST_CASE("volume writes need the token assign hands out; without it nothing changes") {
  json a = Assign();
  REQUIRE(a.contains("auth"));
  std::string fid = a["fid"], auth = a["auth"], url = a["url"];
  CHECK(C().Do("PUT", url, "/" + fid, "", "no token").status == 401);
  CHECK(C().Do("PUT", url, "/" + fid, "not.a.token", "bad token").status == 401);
  CHECK(C().Do("PUT", url, "/" + fid + "?type=replicate", "", "as a replica").status == 401);
  // Nothing was written.
  CHECK(C().Do("GET", url, "/" + fid, C().ReadToken(fid)).status == 404);

  CHECK(C().Do("PUT", url, "/" + fid, auth, "the bytes").status == 201);
  // Siblings of the assignment (count=4) share its token; the key after them does not.
  FileId base = *FileId::Parse(fid);
  FileId third = base;
  third.key += 3;
  CHECK(C().Do("PUT", url, "/" + third.ToString(), auth, "sibling").status == 201);
  FileId beyond = base;
  beyond.key += 4;
  CHECK(C().Do("PUT", url, "/" + beyond.ToString(), auth, "beyond").status == 401);
  // Another fid's token, or a read token, does not write.
  CHECK(C().Do("PUT", url, "/" + fid, C().ReadToken(fid), "read token").status == 401);

  // Reads need the read key's token.
  CHECK(C().Do("GET", url, "/" + fid).status == 401);
  auto g = C().Do("GET", url, "/" + fid, C().ReadToken(fid));
  CHECK(g.status == 200);
  CHECK(g.body == "the bytes");
  // /dir/lookup of a file id hands out a read token, as SeaweedFS's master does.
  auto l = C().Do("GET", C().filer(), "/dir/lookup?fileId=" + fid, C().FilerReadToken());
  REQUIRE(l.status == 200);
  std::string read_auth = json::parse(l.body)["auth"];
  CHECK(C().Do("GET", url, "/" + fid, read_auth).body == "the bytes");

  // Deletes need a write token.
  CHECK(C().Do("DELETE", url, "/" + fid).status == 401);
  CHECK(C().Do("GET", url, "/" + fid, C().ReadToken(fid)).status == 200);
  CHECK(C().Do("DELETE", url, "/" + fid, auth).status == 202);
  CHECK(C().Do("GET", url, "/" + fid, C().ReadToken(fid)).status == 404);
}

TEST_CASE("the filer's HTTP API needs its own tokens; monitoring stays open") {
  const std::string big = RandomBytes(3 << 20, 7);  // three 1 MiB blobs through the filer's clients
  CHECK(C().Do("PUT", C().filer(), "/sec/big.bin", "", big).status == 401);
  CHECK(C().Do("PUT", C().filer(), "/sec/big.bin", C().FilerReadToken(), big).status == 401);
  CHECK(C().Do("GET", C().filer(), "/sec/big.bin", C().FilerReadToken()).status == 404);  // nothing written
  CHECK(C().Do("GET", C().filer(), "/dir/assign").status == 401);

  CHECK(C().Do("PUT", C().filer(), "/sec/big.bin", C().FilerToken(), big).status == 201);
  CHECK(C().Do("GET", C().filer(), "/sec/big.bin").status == 401);
  auto g = C().Do("GET", C().filer(), "/sec/big.bin", C().FilerReadToken());
  CHECK(g.status == 200);
  CHECK((g.body == big));
  CHECK(C().Do("GET", C().filer(), "/sec/big.bin?jwt=" + C().FilerReadToken()).status == 200);
  CHECK(C().Do("DELETE", C().filer(), "/sec/big.bin").status == 401);

  CHECK(C().Do("GET", C().filer(), "/status").status == 200);
  CHECK(C().Do("GET", C().filer(), "/metrics").status == 200);
  CHECK(C().Do("GET", C().filer(), "/api/v1/health").status == 200);

  // An expired token is refused.
  std::string old = security::SignFilerToken(C().cfg().filer_read, 60, time(nullptr) - 120);
  CHECK(C().Do("GET", C().filer(), "/sec/big.bin", old).status == 401);
}

TEST_CASE("the filer's GC deletes blobs over mutual TLS") {
  const std::string data = RandomBytes(1 << 20, 9);
  REQUIRE(C().Do("PUT", C().filer(), "/sec/gc.bin", C().FilerToken(), data).status == 201);
  uint64_t deleted = C().Status()["gc"]["deleted"];
  REQUIRE(C().Do("DELETE", C().filer(), "/sec/gc.bin", C().FilerToken()).status == 204);
  CHECK(WaitFor([&] { return C().Status()["gc"]["deleted"].get<uint64_t>() > deleted; }, std::chrono::seconds(30)));
  CHECK(C().Status()["gc"]["failed"] == 0);
}

TEST_CASE("gRPC: only clients with a certificate of the CA get in") {
  auto call = [](std::shared_ptr<grpc::ChannelCredentials> creds) {
    auto stub = cluster::Cluster::NewStub(
        grpc::CreateChannel(StrCat("127.0.0.1:", C().filer_grpc_port()), std::move(creds)));
    grpc::ClientContext ctx;
    ctx.set_deadline(std::chrono::system_clock::now() + std::chrono::seconds(5));
    cluster::AssignRequest req;
    cluster::AssignResponse resp;
    return stub->Assign(&ctx, req, &resp);
  };
  auto good = security::GrpcChannelCredentials(C().cfg(), security::kClientComponent);
  REQUIRE(good.ok());
  grpc::Status ok = call(*good);
  CHECK(ok.ok());
  CHECK(call(grpc::InsecureChannelCredentials()).error_code() == grpc::StatusCode::UNAVAILABLE);
  grpc::SslCredentialsOptions rogue;
  rogue.pem_root_certs = ReadFile(C().pki().ca_cert);
  rogue.pem_cert_chain = ReadFile(C().pki().Cert("rogue"));
  rogue.pem_private_key = ReadFile(C().pki().Key("rogue"));
  CHECK(call(grpc::SslCredentials(rogue)).error_code() == grpc::StatusCode::UNAVAILABLE);
  grpc::SslCredentialsOptions anonymous;
  anonymous.pem_root_certs = ReadFile(C().pki().ca_cert);
  CHECK(call(grpc::SslCredentials(anonymous)).error_code() == grpc::StatusCode::UNAVAILABLE);
}

namespace {

// A metadata-transport channel to the filer presenting component's certificate (the
// security.toml's, or cfg's when given), with the filer's upgrade token.
rpc::Channel::Options RpcOptions(const security::SecurityConfig& cfg, std::string_view component) {
  rpc::Channel::Options o;
  o.connect_timeout_ms = 5000;
  std::string token = security::SignFilerToken(cfg.filer_write, 60);
  o.upgrade_headers = [token] { return "Authorization: Bearer " + token + "\r\n"; };
  if (!cfg.grpc_ca.empty()) {
    auto ctx = security::NewClientSslCtx(cfg, component);
    REQUIRE(ctx.ok());
    o.tls = std::shared_ptr<SSL_CTX>(std::move(*ctx));
  }
  return o;
}

// StatFs (method 15, an empty request): any answer the filer gives means frames got through.
absl::Status StatFs(const rpc::Channel::Options& o) {
  rpc::Channel ch(C().filer(), o);
  return ch.CallRaw(15, "", std::chrono::seconds(5)).status();
}

double Metric(const std::string& name) {
  auto r = C().Do("GET", C().filer(), "/metrics");
  size_t at = r.body.find("\n" + name + " ");
  return at == std::string::npos ? -1 : std::stod(r.body.substr(at + name.size() + 2));
}

}  // namespace

TEST_CASE("the metadata transport is mutual TLS: only clients with a certificate of the CA get frames") {
  CHECK(StatFs(RpcOptions(C().cfg(), security::kClientComponent)).ok());
  double refused = Metric("kelp_filer_rpc_tls_refused_total");
  // A certificate another CA signed: the filer ends the handshake, no answer.
  security::SecurityConfig rogue = C().cfg();
  rogue.grpc[std::string(security::kClientComponent)] = {C().pki().Cert("rogue"), C().pki().Key("rogue")};
  absl::Status s = StatFs(RpcOptions(rogue, security::kClientComponent));
  INFO(s.ToString());
  CHECK(s.code() == absl::StatusCode::kUnavailable);
  // No TLS at all (the upgrade token alone): frames in the clear get no answer either.
  security::SecurityConfig plain = C().cfg();
  plain.grpc_ca.clear();
  CHECK(StatFs(RpcOptions(plain, security::kClientComponent)).code() == absl::StatusCode::kUnavailable);
  // Counted once the filer's loop has closed them (the client may learn of it from the alert first).
  CHECK(WaitFor([&] { return Metric("kelp_filer_rpc_tls_refused_total") >= refused + 2; }, std::chrono::seconds(10)));
  CHECK(StatFs(RpcOptions(C().cfg(), security::kClientComponent)).ok());  // and it still serves
}

TEST_CASE("kelp benchmark and kelp security.token work with -security") {
  TempDir tmp("kelp-security-bench");
  auto b = Process::Start({KelpBinary(), "benchmark", StrCat("-filer=", C().filer()), "-n=300", "-c=4", "-size=512",
                           StrCat("-security=", C().toml())},
                          tmp.file("bench.log"));
  REQUIRE(b.ok());
  int rc = (*b)->Wait(std::chrono::seconds(120));
  INFO((*b)->Log());
  CHECK(rc == 0);
  auto t = Process::Start({KelpBinary(), "security.token", StrCat("-security=", C().toml()), "-read"},
                          tmp.file("token.log"));
  REQUIRE(t.ok());
  REQUIRE((*t)->Wait(std::chrono::seconds(10)) == 0);
  std::string token = (*t)->Log();
  while (!token.empty() && (token.back() == '\n' || token.back() == '\r')) token.pop_back();
  CHECK(C().Do("GET", C().filer(), "/api/v1/stat?path=/", token).status == 200);
}

TEST_CASE("no key reaches a log or a command line") {
  C().Do("GET", C().filer(), "/dir/assign", "garbage");  // a failed check gets logged, if anything
  std::string logs = C().Logs();
  std::string cmdline = ReadFile(StrCat("/proc/", C().filer_pid(), "/cmdline"));
  for (const std::string& key : {kVolumeKey, kVolumeReadKey, kFilerKey, kFilerReadKey}) {
    CHECK(logs.find(key) == std::string::npos);
    CHECK(cmdline.find(key) == std::string::npos);
  }
  CHECK(logs.find("mutual TLS") != std::string::npos);  // the startup line says what is on
}

TEST_CASE("a malformed security.toml stops the server with a clear error") {
  TempDir tmp("kelp-security-bad");
  std::string bad = tmp.file("bad.toml");
  std::ofstream(bad) << "[jwt.signing]\nkey = \"short\"\n";
  auto f = Process::Start({KelpBinary(), "filer", StrCat("-dir=", tmp.file("f")), StrCat("-port=", FreePort()),
                           StrCat("-security=", bad)},
                          tmp.file("filer.log"));
  REQUIRE(f.ok());
  CHECK((*f)->Wait(std::chrono::seconds(20)) == 1);
  CHECK((*f)->Log().find("shorter than 16 bytes") != std::string::npos);
}

namespace {

bool Mounted(const std::string& dir) {
  std::ifstream in("/proc/self/mountinfo");
  std::string line;
  while (std::getline(in, line)) {
    if (line.find(" " + dir + " ") != std::string::npos) return true;
  }
  return false;
}

}  // namespace

TEST_CASE("a mount with -security writes and reads through tokens and mutual TLS") {
  if (access("/dev/fuse", R_OK | W_OK) != 0 || geteuid() != 0) {
    WARN("skipped: needs root and /dev/fuse");
    return;
  }
  TempDir tmp("kelp-security-mount");
  std::string dir = tmp.file("mnt");
  std::filesystem::create_directories(dir);
  auto m = Process::Start({KelpBinary(), "mount", StrCat("-dir=", dir), StrCat("-filer=", C().filer()),
                           "-cacheCapacityMB=0", StrCat("-security=", C().toml())},
                          tmp.file("mount.log"));
  REQUIRE(m.ok());
  struct Unmount {
    std::string dir;
    Process* p;
    ~Unmount() {
      p->Stop();
      if (Mounted(dir)) (void)!system(("fusermount3 -uz " + dir).c_str());
    }
  } unmount{dir, m->get()};
  INFO((*m)->Log());
  REQUIRE(WaitFor([&] { return Mounted(dir); }, std::chrono::seconds(20)));
  const std::string data = RandomBytes((5 << 20) + 123, 11);  // more than one chunk
  {
    std::ofstream out(dir + "/through-mount.bin", std::ios::binary);
    out.write(data.data(), data.size());
    out.close();
    REQUIRE(out.good());
  }
  // Read back through the mount (its own read tokens) and through the filer's API.
  CHECK((ReadFile(dir + "/through-mount.bin") == data));
  auto g = C().Do("GET", C().filer(), "/through-mount.bin", C().FilerReadToken());
  CHECK(g.status == 200);
  CHECK((g.body == data));
}

TEST_CASE("a mount whose certificate another CA signed is refused by the filer") {
  if (access("/dev/fuse", R_OK | W_OK) != 0 || geteuid() != 0) {
    WARN("skipped: needs root and /dev/fuse");
    return;
  }
  TempDir tmp("kelp-security-rogue-mount");
  // The cluster's security.toml with [grpc.client] swapped for the rogue certificate.
  std::string toml = ReadFile(C().toml());
  auto swap = [&](const std::string& from, const std::string& to) {
    size_t at = toml.find(from);
    REQUIRE(at != std::string::npos);
    toml.replace(at, from.size(), to);
  };
  swap(C().pki().Cert("client"), C().pki().Cert("rogue"));
  swap(C().pki().Key("client"), C().pki().Key("rogue"));
  std::ofstream(tmp.file("rogue.toml")) << toml;
  std::string dir = tmp.file("mnt");
  std::filesystem::create_directories(dir);
  auto m = Process::Start({KelpBinary(), "mount", StrCat("-dir=", dir), StrCat("-filer=", C().filer()),
                           "-cacheCapacityMB=0", StrCat("-security=", tmp.file("rogue.toml"))},
                          tmp.file("mount.log"));
  REQUIRE(m.ok());
  int rc = (*m)->Wait(std::chrono::seconds(60));
  if (Mounted(dir)) (void)!system(("fusermount3 -uz " + dir).c_str());
  INFO((*m)->Log());
  CHECK(rc != 0);  // gives up with an error, never mounted
  CHECK(rc != INT_MIN);
  CHECK(!(*m)->Log().empty());
}
