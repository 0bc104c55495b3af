// kelp benchmark: SeaweedFS's `weed benchmark` against a Kelp cluster. Writes n blobs of
// -size bytes at concurrency -c (assign at the filer through FilerClient, then PUT to the volume
// server through VolumeClient: the project's own clients), then
// reads them all back in random order and checks every byte. Prints weed's report shape.
// Failed requests are counted and shown; the exit code is 1 if any failed.
#include <algorithm>
#include <atomic>
#include <chrono>
#include <cmath>
#include <condition_variable>
#include <cstdio>
#include <map>
#include <mutex>
#include <numeric>
#include <random>
#include <string>
#include <thread>
#include <vector>

#include "cmd/commands.h"
#include "filer/client/filer_client.h"
#include "shared/file_id.h"
#include "shared/flags.h"
#include "shared/log.h"
#include "shared/security/security.h"
#include "shared/strings.h"
#include "volume/client/volume_client.h"

namespace kelp {
namespace {

struct BenchOptions {
  std::string filer = "localhost:8888";
  int concurrency = 16;
  int64_t n = 1024 * 1024;
  int size = 1024;
  std::string collection = "benchmark";
  std::string replication;
  bool write = true;
  bool read = true;
  bool fsync = false;
  uint64_t seed = 1;
};

// Content of blob i: deterministic, so the read phase can check every byte without keeping
// the data.
void FillBlob(uint64_t seed, uint64_t i, std::string* out, size_t size) {
  out->resize(size);
  uint64_t x = seed * 0x9E3779B97F4A7C15ULL ^ (i + 1) * 0xBF58476D1CE4E5B9ULL;
  size_t pos = 0;
  while (pos < size) {
    x ^= x << 13;
    x ^= x >> 7;
    x ^= x << 17;
    size_t take = std::min<size_t>(8, size - pos);
    memcpy(out->data() + pos, &x, take);
    pos += take;
  }
}

struct Record {
  std::string fid;
  uint32_t url_index = 0;  // into Urls
  bool ok = false;
};

class Stats {
 public:
  void Add(double ms, bool ok, uint64_t bytes) {
    std::lock_guard lock(mu_);
    if (ok) {
      latencies_.push_back(ms);
      bytes_ += bytes;
    } else {
      ++failed_;
    }
  }
  uint64_t completed() const {
    std::lock_guard lock(mu_);
    return latencies_.size();
  }
  uint64_t failed() const {
    std::lock_guard lock(mu_);
    return failed_;
  }
  uint64_t bytes() const {
    std::lock_guard lock(mu_);
    return bytes_;
  }
  std::vector<double> latencies() const {
    std::lock_guard lock(mu_);
    return latencies_;
  }

 private:
  mutable std::mutex mu_;
  std::vector<double> latencies_;
  uint64_t failed_ = 0;
  uint64_t bytes_ = 0;
};

class Benchmark {
 public:
  explicit Benchmark(BenchOptions o)
      : opts_(std::move(o)), filer_(opts_.filer, FilerOptions()), volumes_(VolumeOptions(opts_.concurrency)) {}

  int Run() {
    std::printf("This is Kelp's benchmark (weed benchmark compatible report), against filer %s\n\n",
                opts_.filer.c_str());
    records_.resize(opts_.n);
    uint64_t failures = 0;
    if (opts_.write) failures += Phase("Writing", true);
    if (opts_.read) failures += Phase("Randomly Reading", false);
    return failures == 0 ? 0 : 1;
  }

 private:
  static filer::FilerClientOptions FilerOptions() {
    filer::FilerClientOptions o;
    o.metrics_label = "benchmark";
    return o;
  }
  static volume::VolumeClient::Options VolumeOptions(int c) {
    volume::VolumeClient::Options o;
    o.max_idle_per_host = std::max(64, c * 2);
    return o;
  }

  uint32_t UrlIndex(const std::string& url) {
    std::lock_guard lock(urls_mu_);
    auto it = url_ids_.find(url);
    if (it != url_ids_.end()) return it->second;
    urls_.push_back(url);
    url_ids_[url] = urls_.size() - 1;
    return urls_.size() - 1;
  }
  std::string UrlAt(uint32_t i) {
    std::lock_guard lock(urls_mu_);
    return urls_[i];
  }

  // One assign per blob at the filer, as weed benchmark does at its master, then the upload
  // with the token the assignment carries (docs/security.md).
  bool WriteOne(uint64_t i, std::string& buf, std::string& err) {
    cluster::AssignRequest req;
    req.set_count(1);
    req.set_collection(opts_.collection);
    req.set_replication(opts_.replication);
    auto a = filer_.Assign(req);
    if (!a.ok() || a->locations_size() == 0) {
      err = a.ok() ? "assign: no volume server" : StrCat("assign: ", a.status().ToString());
      return false;
    }
    const auto& loc = a->locations(0);
    std::string url = loc.url().empty() ? loc.public_url() : loc.url();
    FillBlob(opts_.seed, i, &buf, opts_.size);
    auto up = volumes_.Upload(url, a->fid(), buf, opts_.fsync, a->auth());
    if (!up.ok()) {
      err = StrCat("upload ", a->fid(), ": ", up.status().ToString());
      return false;
    }
    records_[i].fid = a->fid();
    records_[i].url_index = UrlIndex(url);
    records_[i].ok = true;
    return true;
  }

  bool ReadOne(uint64_t i, std::string& buf, std::string& err) {
    const Record& r = records_[i];
    auto g = volumes_.Read(UrlAt(r.url_index), r.fid);
    if (!g.ok()) {
      err = StrCat("read ", r.fid, ": ", g.status().ToString());
      return false;
    }
    FillBlob(opts_.seed, i, &buf, opts_.size);
    if (*g != buf) {
      err = StrCat("read ", r.fid, ": content differs from what was written");
      return false;
    }
    return true;
  }

  uint64_t Phase(const char* name, bool write) {
    std::printf("------------ %s Benchmark ----------\n", name);
    std::fflush(stdout);
    std::vector<uint64_t> order;
    for (int64_t i = 0; i < opts_.n; ++i) {
      if (write || records_[i].ok) order.push_back(i);
    }
    if (!write) std::shuffle(order.begin(), order.end(), std::mt19937_64(opts_.seed));
    Stats stats;
    std::atomic<size_t> next{0};
    std::atomic<bool> done{false};
    std::mutex err_mu;
    uint64_t errors_printed = 0;
    auto start = std::chrono::steady_clock::now();
    std::thread progress([&] {
      uint64_t last = 0;
      auto t0 = std::chrono::steady_clock::now();
      while (!done) {
        std::this_thread::sleep_for(std::chrono::milliseconds(200));
        auto now = std::chrono::steady_clock::now();
        if (now - t0 < std::chrono::seconds(1) && !done) continue;
        double secs = std::chrono::duration<double>(now - t0).count();
        uint64_t c = stats.completed() + stats.failed();
        std::printf("Completed %lu of %zu requests, %.1f%% %.1f/s %.1fMB/s\n", c, order.size(),
                    order.empty() ? 100.0 : 100.0 * c / order.size(), (c - last) / secs,
                    (c - last) * opts_.size / secs / 1e6);
        std::fflush(stdout);
        last = c;
        t0 = now;
      }
    });
    std::vector<std::thread> workers;
    for (int w = 0; w < opts_.concurrency; ++w) {
      workers.emplace_back([&] {
        std::string buf, err;
        for (;;) {
          size_t k = next.fetch_add(1);
          if (k >= order.size()) break;
          auto t = std::chrono::steady_clock::now();
          bool ok = write ? WriteOne(order[k], buf, err) : ReadOne(order[k], buf, err);
          double ms = std::chrono::duration<double, std::milli>(std::chrono::steady_clock::now() - t).count();
          stats.Add(ms, ok, opts_.size);
          if (!ok) {
            std::lock_guard lock(err_mu);
            if (errors_printed++ < 10) std::fprintf(stderr, "failed: %s\n", err.c_str());
          }
        }
      });
    }
    for (auto& t : workers) t.join();
    done = true;
    progress.join();
    double secs = std::chrono::duration<double>(std::chrono::steady_clock::now() - start).count();
    Report(stats, secs);
    return stats.failed();
  }

  void Report(const Stats& stats, double secs) {
    auto lat = stats.latencies();
    std::sort(lat.begin(), lat.end());
    double sum = std::accumulate(lat.begin(), lat.end(), 0.0);
    double avg = lat.empty() ? 0 : sum / lat.size();
    double var = 0;
    for (double v : lat) var += (v - avg) * (v - avg);
    double std_dev = lat.empty() ? 0 : std::sqrt(var / lat.size());
    std::printf("\nConcurrency Level:      %d\n", opts_.concurrency);
    std::printf("Time taken for tests:   %.3f seconds\n", secs);
    std::printf("Completed requests:      %zu\n", lat.size());
    std::printf("Failed requests:        %lu\n", stats.failed());
    std::printf("Total transferred:      %lu bytes\n", stats.bytes());
    std::printf("Requests per second:    %.2f [#/sec]\n", lat.size() / secs);
    std::printf("Transfer rate:          %.2f [Kbytes/sec]\n", stats.bytes() / 1024.0 / secs);
    std::printf("\nConnection Times (ms)\n");
    std::printf("              min      avg        max      std\n");
    std::printf("Total:        %.1f      %.1f       %.1f      %.1f\n", lat.empty() ? 0 : lat.front(), avg,
                lat.empty() ? 0 : lat.back(), std_dev);
    std::printf("\nPercentage of the requests served within a certain time (ms)\n");
    for (int p : {50, 66, 75, 80, 90, 95, 98, 99, 100}) {
      double v = 0;
      if (!lat.empty()) {
        size_t idx = std::min(lat.size() - 1, static_cast<size_t>(std::ceil(lat.size() * p / 100.0)) - (p ? 1 : 0));
        v = lat[idx];
      }
      std::printf("  %3d%%    %5.1f ms\n", p, v);
    }
    std::printf("\n");
    std::fflush(stdout);
  }

  BenchOptions opts_;
  filer::FilerClient filer_;
  volume::VolumeClient volumes_;
  std::vector<Record> records_;
  std::mutex urls_mu_;
  std::vector<std::string> urls_;
  std::map<std::string, uint32_t> url_ids_;
};

}  // namespace

int BenchmarkMain(int argc, char** argv) {
  BenchOptions o;
  FlagSet flags("benchmark", "kelp benchmark [flags]",
                "Writes -n blobs of -size bytes at concurrency -c (assign at the filer, upload to volume servers),\n"
                "then reads them all back in random order, checking every byte. Exit code 1 if any request failed.");
  flags.Add("filer", &o.filer, "filer address host:port (HTTP)");
  flags.Alias("master", "filer");
  flags.Alias("server", "filer");
  flags.Add("c", &o.concurrency, "number of concurrent requests");
  flags.Add("n", &o.n, "number of blobs to write and read");
  flags.Add("size", &o.size, "blob size, in bytes");
  flags.Add("collection", &o.collection, "collection to write into");
  flags.Add("replication", &o.replication, "replication \"xyz\" (empty = the filer's default)");
  flags.Add("write", &o.write, "run the write phase");
  flags.Add("read", &o.read, "run the read phase (needs the write phase in the same run)");
  flags.Add("fsync", &o.fsync, "ask volume servers to fsync every write");
  flags.Add("seed", &o.seed, "seed for blob contents and read order");
  std::string security_file;
  security::AddSecurityFlag(flags, &security_file);
  flags.ParseOrExit(argc, argv);
  if (o.concurrency < 1 || o.concurrency > 10000 || o.n < 1 || o.size < 1 || o.size > (256 << 20)) {
    std::fprintf(stderr, "kelp benchmark: -c must be in [1, 10000], -n >= 1, -size in [1, 256 MiB]\n");
    return 2;
  }
  if (o.read && !o.write) {
    std::fprintf(stderr, "kelp benchmark: -read needs -write in the same run (it checks what was written)\n");
    return 2;
  }
  InitLogging("warn");
  if (absl::Status s = security::InstallFromFile(security_file, security::kClientComponent); !s.ok()) {
    std::fprintf(stderr, "kelp benchmark: %s\n", std::string(s.message()).c_str());
    return 1;
  }
  return Benchmark(o).Run();
}

}  // namespace kelp
