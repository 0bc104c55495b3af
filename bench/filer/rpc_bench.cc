// rpc_bench: the filer's GetAttr over each metadata transport issue 11 weighed, side by side.
//
//   rpc_bench [-transport=all] [-calls=20000] [-threads=16] [-seconds=5] [-files=5000]
//
// Every transport serves the same handler, FilerService::GetAttr of the real namespace core on a
// RocksDB store in a temporary directory (`files` files made first), in this process, over
// 127.0.0.1; client and server share the machine's cores:
//   core           no transport: the handler called directly (what a call costs at least);
//   grpc_sync      gRPC's synchronous server and stub (what the filer served before shared/rpc);
//   grpc_callback  gRPC's callback API, the handler run inline on gRPC's thread
//                  (ServerUnaryReactor), called through the callback stub (stub->async(), the
//                  faster client in our runs) or the sync stub (-callbackStub=sync|both);
//   grpc_stream    one long-lived bidirectional gRPC stream per client, calls multiplexed by id:
//                  the client's threads write under a lock, a reader thread hands each reply to
//                  its caller; the server is a callback reactor answering inline;
//   rpc            shared/rpc, through the real FilerRpcService and FilerClient.
// Each transport gets one client (one channel, one stream, one connection) that all client
// threads share, as a mount shares its own.
//
// For each: p50/p99 latency of `calls` GetAttrs from one thread after `warmup` (back to back, or
// `pauseUs` apart, like a caller with work between its calls); GetAttr/s from
// `threads` threads over `seconds` (after a 0.5 s warm-up), with their p50/p99; the CPU seconds
// the whole process (client and server) spent per 100,000 calls, and its context switches per
// call (getrusage). Every reply is checked (it must carry the inode asked for); any failure
// makes the exit status 1. Not a CI test: figures go to bench/filer/RESULTS.md.
#include <sys/resource.h>
#include <sys/stat.h>

#include <algorithm>
#include <atomic>
#include <chrono>
#include <condition_variable>
#include <cstdio>
#include <deque>
#include <filesystem>
#include <functional>
#include <memory>
#include <mutex>
#include <string>
#include <thread>
#include <unordered_map>
#include <vector>

#include <grpcpp/grpcpp.h>

#include "filer/client/filer_client.h"
#include "filer/core/filer_service.h"
#include "filer/rpc/filer_rpc_service.h"
#include "filer/store/kv_store.h"
#include "rpc_bench.grpc.pb.h"
#include "shared/flags.h"
#include "shared/grpc_status.h"
#include "shared/log.h"
#include "shared/rpc/server.h"
#include "shared/status.h"
#include "shared/strings.h"

namespace kelp::bench {
namespace {

using filer::AttrResponse;
using filer::FilerService;
using filer::GetAttrRequest;
using Clock = std::chrono::steady_clock;

// Deadline each client sets on a call, as FilerClient does.
constexpr auto kCallTimeout = std::chrono::seconds(30);
// Untimed calls from every thread before the multi-thread window opens.
constexpr auto kThreadedWarmup = std::chrono::milliseconds(500);

// The handler every transport serves.
absl::Status HandleGetAttr(FilerService* fs, const GetAttrRequest& req, AttrResponse* resp) {
  ASSIGN_OR_RETURN(*resp->mutable_attr(), fs->GetAttr(req.ino()));
  return absl::OkStatus();
}

// A client of one transport, with its server running. GetAttr is called from many threads at
// once; true when the reply carries the inode asked for.
class Transport {
 public:
  virtual ~Transport() = default;
  virtual bool GetAttr(uint64_t ino) = 0;
};

// ---- core: no transport ----

class CoreTransport : public Transport {
 public:
  explicit CoreTransport(FilerService* fs) : fs_(fs) {}
  bool GetAttr(uint64_t ino) override {
    auto a = fs_->GetAttr(ino);
    return a.ok() && a->ino() == ino;
  }

 private:
  FilerService* fs_;
};

// ---- gRPC servers ----

class SyncService final : public BenchFiler::Service {
 public:
  explicit SyncService(FilerService* fs) : fs_(fs) {}
  grpc::Status GetAttr(grpc::ServerContext*, const GetAttrRequest* req,
                       AttrResponse* resp) override {
    return GuardedCall("GetAttr", [&] { return HandleGetAttr(fs_, *req, resp); });
  }

 private:
  FilerService* fs_;
};

// The stream's server side: each request is answered inline, in OnReadDone; replies wait in a
// queue while the one write gRPC allows at a time is in flight. Reactions may run concurrently
// (a read and a write), hence mu_; gRPC calls are made without it held.
class StreamReactor final
    : public grpc::ServerBidiReactor<StreamGetAttrRequest, StreamGetAttrReply> {
 public:
  explicit StreamReactor(FilerService* fs) : fs_(fs) { StartRead(&req_); }

  void OnReadDone(bool ok) override {
    if (!ok) {  // the client finished writing, or the call ended
      std::unique_lock lock(mu_);
      reading_ = false;
      FinishIfDone(lock);
      return;
    }
    StreamGetAttrReply reply;
    reply.set_id(req_.id());
    absl::Status s;
    try {
      s = HandleGetAttr(fs_, req_.request(), reply.mutable_response());
    } catch (const std::exception& e) {
      s = absl::InternalError(e.what());
    }
    if (!s.ok()) {
      reply.clear_response();
      reply.set_code(static_cast<uint32_t>(s.code()));
      reply.set_message(std::string(ToStd(s.message())));
    }
    StreamGetAttrReply* start = nullptr;
    {
      std::lock_guard lock(mu_);
      if (!broken_) {
        replies_.push_back(std::move(reply));
        if (!writing_) {
          writing_ = true;
          start = &replies_.front();
        }
      }
    }
    if (start != nullptr) StartWrite(start);
    StartRead(&req_);
  }

  void OnWriteDone(bool ok) override {
    std::unique_lock lock(mu_);
    replies_.pop_front();
    if (!ok) {  // the client went away: drop what waits
      broken_ = true;
      replies_.clear();
    }
    if (replies_.empty()) {
      writing_ = false;
      FinishIfDone(lock);
      return;
    }
    StreamGetAttrReply* next = &replies_.front();
    lock.unlock();
    StartWrite(next);
  }

  void OnDone() override { delete this; }

 private:
  // Ends the call once the client stopped writing and every reply went out (or could not).
  void FinishIfDone(std::unique_lock<std::mutex>& lock) {
    if (reading_ || writing_ || finished_) return;
    finished_ = true;
    lock.unlock();
    Finish(grpc::Status::OK);
  }

  FilerService* fs_;
  StreamGetAttrRequest req_;  // the read in flight fills it; reactions use it one at a time
  std::mutex mu_;
  std::deque<StreamGetAttrReply> replies_;  // front: being written
  bool writing_ = false;
  bool reading_ = true;
  bool broken_ = false;
  bool finished_ = false;
};

class CallbackService final : public BenchFiler::CallbackService {
 public:
  explicit CallbackService(FilerService* fs) : fs_(fs) {}
  grpc::ServerUnaryReactor* GetAttr(grpc::CallbackServerContext* ctx, const GetAttrRequest* req,
                                    AttrResponse* resp) override {
    grpc::ServerUnaryReactor* reactor = ctx->DefaultReactor();
    reactor->Finish(GuardedCall("GetAttr", [&] { return HandleGetAttr(fs_, *req, resp); }));
    return reactor;
  }
  grpc::ServerBidiReactor<StreamGetAttrRequest, StreamGetAttrReply>* GetAttrStream(
      grpc::CallbackServerContext*) override {
    return new StreamReactor(fs_);
  }

 private:
  FilerService* fs_;
};

// A gRPC server on 127.0.0.1 with one service, and the one channel of its client.
class GrpcServer {
 public:
  explicit GrpcServer(grpc::Service* service) {
    grpc::ServerBuilder builder;
    builder.AddListeningPort("127.0.0.1:0", grpc::InsecureServerCredentials(), &port_);
    builder.RegisterService(service);
    server_ = builder.BuildAndStart();
    if (server_ && port_ != 0) {
      channel_ =
          grpc::CreateChannel(StrCat("127.0.0.1:", port_), grpc::InsecureChannelCredentials());
    }
  }
  ~GrpcServer() {
    if (server_) server_->Shutdown(std::chrono::system_clock::now() + std::chrono::seconds(2));
  }
  // False when the server did not start or the channel cannot connect.
  bool ok() const {
    return channel_ &&
           channel_->WaitForConnected(std::chrono::system_clock::now() + std::chrono::seconds(5));
  }
  std::unique_ptr<BenchFiler::Stub> NewStub() const { return BenchFiler::NewStub(channel_); }

 private:
  int port_ = 0;
  std::unique_ptr<grpc::Server> server_;
  std::shared_ptr<grpc::Channel> channel_;
};

// ---- gRPC unary clients ----

class GrpcUnaryTransport : public Transport {
 public:
  // callback_stub: call through stub->async() and wait for the callback; else the sync stub.
  GrpcUnaryTransport(std::unique_ptr<grpc::Service> service, bool callback_stub)
      : service_(std::move(service)),
        server_(service_.get()),
        stub_(server_.NewStub()),
        callback_stub_(callback_stub) {}
  bool ok() const { return server_.ok(); }

  bool GetAttr(uint64_t ino) override {
    GetAttrRequest req;
    req.set_ino(ino);
    AttrResponse resp;
    grpc::ClientContext ctx;
    ctx.set_deadline(std::chrono::system_clock::now() + kCallTimeout);
    grpc::Status s;
    if (callback_stub_) {
      std::mutex mu;
      std::condition_variable cv;
      bool done = false;
      stub_->async()->GetAttr(&ctx, &req, &resp, [&](grpc::Status status) {
        std::lock_guard lock(mu);  // notify under the lock: the waiter's frame outlives it
        s = std::move(status);
        done = true;
        cv.notify_one();
      });
      std::unique_lock lock(mu);
      cv.wait(lock, [&] { return done; });
    } else {
      s = stub_->GetAttr(&ctx, req, &resp);
    }
    return s.ok() && resp.attr().ino() == ino;
  }

 private:
  std::unique_ptr<grpc::Service> service_;
  GrpcServer server_;
  std::unique_ptr<BenchFiler::Stub> stub_;
  const bool callback_stub_;
};

// ---- gRPC: one stream per client, calls multiplexed by id ----

class GrpcStreamTransport : public Transport {
 public:
  explicit GrpcStreamTransport(FilerService* fs)
      : service_(fs), server_(&service_), stub_(server_.NewStub()) {
    if (!server_.ok()) return;
    stream_ = stub_->GetAttrStream(&ctx_);
    reader_ = std::thread([this] { ReadReplies(); });
  }
  ~GrpcStreamTransport() override {
    if (!stream_) return;
    {
      std::lock_guard lock(write_mu_);
      stream_->WritesDone();
    }
    reader_.join();
    grpc::Status s = stream_->Finish();
    if (!s.ok())
      std::fprintf(stderr, "grpc_stream: the stream ended with %s\n", s.error_message().c_str());
  }
  bool ok() const { return stream_ != nullptr; }

  bool GetAttr(uint64_t ino) override {
    Pending call;
    StreamGetAttrRequest req;
    req.mutable_request()->set_ino(ino);
    {
      std::lock_guard lock(mu_);
      if (broken_) return false;
      req.set_id(next_id_++);
      calls_[req.id()] = &call;
    }
    bool sent;
    {
      std::lock_guard lock(write_mu_);
      sent = stream_->Write(req);
    }
    std::unique_lock lock(mu_);
    if (!sent) {
      calls_.erase(req.id());
      return false;
    }
    call.cv.wait(lock, [&] { return call.done; });
    return call.reply.code() == 0 && call.reply.response().attr().ino() == ino;
  }

 private:
  struct Pending {
    std::condition_variable cv;
    bool done = false;
    StreamGetAttrReply reply;
  };

  // The reader thread: hands each reply to its caller; when the stream ends, fails the rest.
  void ReadReplies() {
    StreamGetAttrReply reply;
    while (stream_->Read(&reply)) {
      std::lock_guard lock(mu_);
      auto it = calls_.find(reply.id());
      if (it == calls_.end()) continue;
      it->second->reply = std::move(reply);
      it->second->done = true;
      it->second->cv.notify_one();
      calls_.erase(it);
    }
    std::lock_guard lock(mu_);
    broken_ = true;
    for (auto& [id, call] : calls_) {
      call->reply.set_code(static_cast<uint32_t>(absl::StatusCode::kUnavailable));
      call->done = true;
      call->cv.notify_one();
    }
    calls_.clear();
  }

  CallbackService service_;
  GrpcServer server_;
  std::unique_ptr<BenchFiler::Stub> stub_;
  grpc::ClientContext ctx_;
  std::unique_ptr<grpc::ClientReaderWriter<StreamGetAttrRequest, StreamGetAttrReply>> stream_;
  std::thread reader_;
  std::mutex write_mu_;  // one Write at a time; never taken with mu_ held
  std::mutex mu_;
  uint64_t next_id_ = 1;
  std::unordered_map<uint64_t, Pending*> calls_;
  bool broken_ = false;
};

// ---- shared/rpc ----

class RpcTransport : public Transport {
 public:
  explicit RpcTransport(FilerService* fs)
      : service_(fs), server_(rpc::Server::Options{}, service_.service()) {
    if (!server_.Start().ok()) return;
    auto port = server_.Listen("127.0.0.1", 0);
    if (!port.ok()) return;
    client_ = std::make_unique<filer::FilerClient>(StrCat("127.0.0.1:", *port));
    if (!client_->Connect(std::chrono::seconds(5)).ok()) client_.reset();
  }
  ~RpcTransport() override {
    client_.reset();
    service_.Shutdown();
    server_.Stop();
  }
  bool ok() const { return client_ != nullptr; }

  bool GetAttr(uint64_t ino) override {
    auto a = client_->GetAttr(ino);
    return a.ok() && a->ino() == ino;
  }

 private:
  filer::FilerRpcService service_;
  rpc::Server server_;
  std::unique_ptr<filer::FilerClient> client_;
};

// ---- measuring ----

struct Usage {
  double cpu = 0;     // user + system seconds of the whole process
  long switches = 0;  // voluntary + involuntary context switches
};

Usage ProcessUsage() {
  rusage ru{};
  getrusage(RUSAGE_SELF, &ru);
  Usage u;
  u.cpu =
      ru.ru_utime.tv_sec + ru.ru_stime.tv_sec + (ru.ru_utime.tv_usec + ru.ru_stime.tv_usec) / 1e6;
  u.switches = ru.ru_nvcsw + ru.ru_nivcsw;
  return u;
}

double Percentile(std::vector<float>& us, double p) {
  if (us.empty()) return 0;
  size_t k = std::min(us.size() - 1, static_cast<size_t>(p * us.size()));
  std::nth_element(us.begin(), us.begin() + k, us.end());
  return us[k];
}

// xorshift64: a cheap per-thread choice of inode.
uint64_t NextRandom(uint64_t& s) {
  s ^= s << 13;
  s ^= s >> 7;
  s ^= s << 17;
  return s;
}

struct Phase {
  uint64_t calls = 0;
  uint64_t errors = 0;
  double seconds = 0;
  double p50_us = 0, p90_us = 0, p99_us = 0;
  double cpu_per_100k = 0;       // process CPU seconds per 100,000 calls
  double switches_per_call = 0;  // process context switches per call
  double rate() const { return seconds > 0 ? calls / seconds : 0; }
};

void Account(Phase& p, std::vector<float>& latencies, const Usage& before, const Usage& after) {
  p.p50_us = Percentile(latencies, 0.50);
  p.p90_us = Percentile(latencies, 0.90);
  p.p99_us = Percentile(latencies, 0.99);
  if (p.calls > 0) {
    p.cpu_per_100k = (after.cpu - before.cpu) / p.calls * 100'000;
    p.switches_per_call = static_cast<double>(after.switches - before.switches) / p.calls;
  }
}

// `calls` timed calls from this thread, after `warmup` untimed ones.
Phase OneThread(Transport& t, const std::vector<uint64_t>& inos, uint64_t warmup, uint64_t calls,
                std::chrono::microseconds pause) {
  Phase p;
  uint64_t rng = 0x9e3779b97f4a7c15ULL;
  for (uint64_t i = 0; i < warmup; ++i) p.errors += !t.GetAttr(inos[NextRandom(rng) % inos.size()]);
  std::vector<float> lat;
  lat.reserve(calls);
  Usage u0 = ProcessUsage();
  auto start = Clock::now();
  for (uint64_t i = 0; i < calls; ++i) {
    uint64_t ino = inos[NextRandom(rng) % inos.size()];
    auto t0 = Clock::now();
    p.errors += !t.GetAttr(ino);
    lat.push_back(std::chrono::duration<float, std::micro>(Clock::now() - t0).count());
    if (pause.count() > 0) std::this_thread::sleep_for(pause);
  }
  p.seconds = std::chrono::duration<double>(Clock::now() - start).count();
  p.calls = calls;
  Account(p, lat, u0, ProcessUsage());
  return p;
}

// `threads` threads calling as fast as they can; counted over `seconds` after a warm-up.
Phase ManyThreads(Transport& t, const std::vector<uint64_t>& inos, int threads, double seconds) {
  struct alignas(64) Worker {
    std::atomic<uint64_t> calls{0};
    std::atomic<uint64_t> errors{0};
    std::vector<float> lat;
  };
  std::vector<Worker> workers(threads);
  std::atomic<bool> measuring{false}, stop{false};
  std::vector<std::thread> ts;
  for (int i = 0; i < threads; ++i) {
    ts.emplace_back([&, i] {
      Worker& w = workers[i];
      w.lat.reserve(1 << 16);
      uint64_t rng = 0x9e3779b97f4a7c15ULL + 7919 * (i + 1);
      while (!stop.load(std::memory_order_relaxed)) {
        uint64_t ino = inos[NextRandom(rng) % inos.size()];
        auto t0 = Clock::now();
        bool ok = t.GetAttr(ino);
        float us = std::chrono::duration<float, std::micro>(Clock::now() - t0).count();
        if (measuring.load(std::memory_order_relaxed)) w.lat.push_back(us);
        w.calls.fetch_add(1, std::memory_order_relaxed);
        if (!ok) w.errors.fetch_add(1, std::memory_order_relaxed);
      }
    });
  }
  auto sum = [&] {
    uint64_t c = 0;
    for (auto& w : workers) c += w.calls.load();
    return c;
  };
  std::this_thread::sleep_for(kThreadedWarmup);
  Usage u0 = ProcessUsage();
  uint64_t c0 = sum();
  auto start = Clock::now();
  measuring = true;
  std::this_thread::sleep_for(std::chrono::duration<double>(seconds));
  measuring = false;
  Phase p;
  p.calls = sum() - c0;
  p.seconds = std::chrono::duration<double>(Clock::now() - start).count();
  Usage u1 = ProcessUsage();
  stop = true;
  for (auto& th : ts) th.join();
  std::vector<float> lat;
  for (auto& w : workers) {
    lat.insert(lat.end(), w.lat.begin(), w.lat.end());
    p.errors += w.errors.load();
  }
  Account(p, lat, u0, u1);
  return p;
}

struct Row {
  std::string name;
  Phase one, many;
};

// The namespace every transport serves: `files` files in one directory of a fresh RocksDB store.
struct Namespace {
  std::string dir;
  std::unique_ptr<filer::KvStore> kv;
  std::unique_ptr<FilerService> fs;
  std::vector<uint64_t> inos;
};

absl::Status MakeNamespace(Namespace& ns, uint64_t files) {
  ASSIGN_OR_RETURN(ns.kv, filer::OpenRocksKvStore(ns.dir));
  filer::FilerOptions opts;
  opts.background_loops = false;  // nothing to collect or expire here, and no thread to compete
  // GetAttr never reaches the cluster; with background loops off nothing else would either.
  ns.fs = std::make_unique<FilerService>(ns.kv.get(), nullptr, opts);
  RETURN_IF_ERROR(ns.fs->Start());
  filer::CreateArgs mk;
  mk.parent = 1;
  mk.name = "bench";
  mk.mode = S_IFDIR | 0755;
  ASSIGN_OR_RETURN(filer::Attr dir, ns.fs->Create(mk));
  for (uint64_t i = 0; i < files; ++i) {
    filer::CreateArgs a;
    a.parent = dir.ino();
    a.name = StrCat("file-", i);
    a.mode = S_IFREG | 0644;
    a.exclusive = true;
    ASSIGN_OR_RETURN(filer::Attr f, ns.fs->Create(a));
    ns.inos.push_back(f.ino());
  }
  return absl::OkStatus();
}

// Starts one transport (server and client); null with a message when it cannot.
std::unique_ptr<Transport> Open(const std::string& name, FilerService* fs, bool callback_stub) {
  if (name == "core") return std::make_unique<CoreTransport>(fs);
  if (name == "grpc_sync" || name == "grpc_callback") {
    std::unique_ptr<grpc::Service> svc;
    if (name == "grpc_sync") {
      svc = std::make_unique<SyncService>(fs);
    } else {
      svc = std::make_unique<CallbackService>(fs);
    }
    auto t = std::make_unique<GrpcUnaryTransport>(std::move(svc), callback_stub);
    if (t->ok()) return t;
  } else if (name == "grpc_stream") {
    auto t = std::make_unique<GrpcStreamTransport>(fs);
    if (t->ok()) return t;
  } else if (name == "rpc") {
    auto t = std::make_unique<RpcTransport>(fs);
    if (t->ok()) return t;
  }
  std::fprintf(stderr, "rpc_bench: cannot start %s\n", name.c_str());
  return nullptr;
}

}  // namespace
}  // namespace kelp::bench

int main(int argc, char** argv) {
  using namespace kelp::bench;
  std::string transport = "all";
  std::string callback_stub = "callback";
  std::string dir;
  uint64_t calls = 20'000;
  uint64_t warmup = 2'000;
  uint64_t files = 5'000;
  int threads = 16;
  uint64_t pause_us = 0;
  double seconds = 5;
  kelp::FlagSet flags(
      "rpc_bench", "rpc_bench [flags]",
      "GetAttr of the filer's namespace core over gRPC (sync, callback, one multiplexed stream) "
      "and shared/rpc, in one process on 127.0.0.1.");
  flags.Add("transport", &transport,
            "all, or a comma-separated list of: core (no transport), grpc_sync, grpc_callback, "
            "grpc_stream, rpc");
  flags.Add("callbackStub", &callback_stub,
            "client of grpc_callback: sync (the blocking stub), callback (stub->async()), or both");
  flags.Add("calls", &calls, "timed calls from one thread");
  flags.Add("warmup", &warmup, "untimed calls from one thread before them");
  flags.Add("pauseUs", &pause_us,
            "pause between the one thread's timed calls, in us (a caller with work between calls)");
  flags.Add("threads", &threads, "client threads of the throughput run (sharing one client)");
  flags.Add("seconds", &seconds,
            "length of the throughput run, in seconds (after 0.5 s of warm-up)");
  flags.Add("files", &files, "files made first; calls ask for them at random");
  flags.Add("dir", &dir,
            "RocksDB directory, new or empty; removed after (default: a new one under $TMPDIR)");
  flags.ParseOrExit(argc - 1, argv + 1);
  kelp::InitLogging("warn");

  std::vector<std::string> names;
  if (transport == "all") {
    names = {"core", "grpc_sync", "grpc_callback", "grpc_stream", "rpc"};
  } else {
    for (size_t pos = 0; pos <= transport.size();) {
      size_t comma = std::min(transport.find(',', pos), transport.size());
      names.push_back(transport.substr(pos, comma - pos));
      pos = comma + 1;
    }
  }
  for (const auto& n : names) {
    if (n != "core" && n != "grpc_sync" && n != "grpc_callback" && n != "grpc_stream" &&
        n != "rpc") {
      std::fprintf(stderr, "rpc_bench: unknown -transport %s\n", n.c_str());
      return 2;
    }
  }
  if (callback_stub != "sync" && callback_stub != "callback" && callback_stub != "both") {
    std::fprintf(stderr, "rpc_bench: -callbackStub must be sync, callback or both\n");
    return 2;
  }
  if (files == 0 || threads < 1 || seconds <= 0) {
    std::fprintf(stderr, "rpc_bench: -files, -threads and -seconds must be positive\n");
    return 2;
  }

  // Removes the store on every way out, after ns (declared below) closed it.
  struct RemoveDir {
    std::string path;
    ~RemoveDir() {
      std::error_code ec;
      if (!path.empty()) std::filesystem::remove_all(path, ec);
    }
  } cleanup;
  Namespace ns;
  if (!dir.empty()) {
    std::error_code ec;
    if (std::filesystem::exists(dir, ec) && !std::filesystem::is_empty(dir, ec)) {
      std::fprintf(stderr, "rpc_bench: -dir %s is not empty; give a new or empty directory\n",
                   dir.c_str());
      return 2;
    }
  } else {
    std::string tmpl = (std::filesystem::temp_directory_path() / "kelp-rpc-bench-XXXXXX").string();
    if (mkdtemp(tmpl.data()) == nullptr) {
      std::perror("rpc_bench: mkdtemp");
      return 1;
    }
    dir = tmpl;
  }
  ns.dir = cleanup.path = dir;
  auto start = Clock::now();
  if (absl::Status s = MakeNamespace(ns, files); !s.ok()) {
    std::fprintf(stderr, "rpc_bench: %s\n", s.ToString().c_str());
    return 1;
  }
  std::printf(
      "namespace: %lu files made in %.2f s; %u cores; %lu calls from 1 thread, "
      "%d threads for %.1f s\n",
      files, std::chrono::duration<double>(Clock::now() - start).count(),
      std::thread::hardware_concurrency(), calls, threads, seconds);
  std::fflush(stdout);

  std::vector<Row> rows;
  for (const auto& name : names) {
    std::vector<bool> variants = {callback_stub == "callback"};
    if (name == "grpc_callback" && callback_stub == "both") variants = {false, true};
    for (bool cb : variants) {
      std::string label = name;
      if (name == "grpc_callback") label += cb ? " (callback stub)" : " (sync stub)";
      auto t = Open(name, ns.fs.get(), cb);
      if (!t) return 1;
      Row r{label, OneThread(*t, ns.inos, warmup, calls, std::chrono::microseconds(pause_us)),
            ManyThreads(*t, ns.inos, threads, seconds)};
      t.reset();
      std::printf(
          "%-30s 1 thread: p50 %.1f us, p90 %.1f us, p99 %.1f us, %.0f/s, %.2f CPU s/100k, "
          "%.2f switches/call | "
          "%d threads: %.0f/s, p50 %.1f us, p99 %.1f us, %.2f CPU s/100k, %.2f switches/call | "
          "errors %lu\n",
          label.c_str(), r.one.p50_us, r.one.p90_us, r.one.p99_us, r.one.rate(), r.one.cpu_per_100k,
          r.one.switches_per_call, threads, r.many.rate(), r.many.p50_us, r.many.p99_us,
          r.many.cpu_per_100k, r.many.switches_per_call, r.one.errors + r.many.errors);
      std::fflush(stdout);
      rows.push_back(std::move(r));
    }
  }

  std::printf(
      "\n| transport | 1 thread: p50 / p90 / p99 us | GetAttr/s | CPU s/100k | switches/call "
      "| %d threads: GetAttr/s | p50 / p99 us | CPU s/100k | switches/call |\n",
      threads);
  std::printf("|---|---:|---:|---:|---:|---:|---:|---:|---:|\n");
  uint64_t errors = 0;
  for (const auto& r : rows) {
    std::printf(
        "| %s | %.1f / %.0f / %.0f | %.0f | %.2f | %.2f | %.0f | %.0f / %.0f | %.2f | %.2f |\n",
        r.name.c_str(), r.one.p50_us, r.one.p90_us, r.one.p99_us, r.one.rate(), r.one.cpu_per_100k,
        r.one.switches_per_call, r.many.rate(), r.many.p50_us, r.many.p99_us, r.many.cpu_per_100k,
        r.many.switches_per_call);
    errors += r.one.errors + r.many.errors;
  }
  ns.fs->Stop();
  ns.fs.reset();
  ns.kv.reset();
  if (errors > 0) {
    std::fprintf(stderr, "rpc_bench: %lu calls failed or answered the wrong inode\n", errors);
    return 1;
  }
  return 0;
}
