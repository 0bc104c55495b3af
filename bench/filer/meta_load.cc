// meta_load: metadata operations against one or more filers over their HTTP API (AGFS
// dialect), to see how filers sharing one store scale.
//
//   meta_load -filers=127.0.0.1:8888,127.0.0.1:8889 -clients=16 -seconds=10
//
// Each client owns a directory (/meta-load/c<i>, made first) and, for `seconds`, creates
// empty files in it (POST /api/v1/files) and stats each one after creating it (GET
// /api/v1/stat); client i talks to filer i % (number of filers). Reports operations per second
// in all and per filer, and latency. Not a CI test.
#include <algorithm>
#include <atomic>
#include <chrono>
#include <cstdio>
#include <mutex>
#include <string>
#include <thread>
#include <vector>

#include "shared/flags.h"
#include "shared/http/http_client.h"
#include "shared/log.h"
#include "shared/strings.h"

using namespace kelp;
using Steady = std::chrono::steady_clock;

int main(int argc, char** argv) {
  std::string filers_flag = "127.0.0.1:8888";
  int clients = 16, seconds = 10;
  std::string prefix = "/meta-load";
  FlagSet flags("meta_load", "meta_load [flags]", "Creates and stats files through filers' HTTP APIs.");
  flags.Add("filers", &filers_flag, "filers' HTTP host:port, comma-separated");
  flags.Add("clients", &clients, "client threads");
  flags.Add("seconds", &seconds, "length of the run, in s");
  flags.Add("prefix", &prefix, "directory the clients work under");
  flags.ParseOrExit(argc - 1, argv + 1);
  InitLogging("warn");
  std::vector<std::string> filers;
  for (size_t p = 0; p <= filers_flag.size();) {
    size_t c = filers_flag.find(',', p);
    if (c == std::string::npos) c = filers_flag.size();
    if (c > p) filers.push_back(filers_flag.substr(p, c - p));
    p = c + 1;
  }
  if (filers.empty()) return 2;
  http::HttpClient http;
  for (int i = 0; i < clients; ++i) {
    auto r = http.Do("POST", filers[0], StrCat("/api/v1/directories?path=", prefix), {}, "");
    r = http.Do("POST", filers[0], StrCat("/api/v1/directories?path=", prefix, "/c", i), {}, "");
    if (!r.ok() || (r->status != 201 && r->status != 409)) {
      std::fprintf(stderr, "mkdir: %s\n", r.ok() ? r->body.c_str() : r.status().ToString().c_str());
      return 1;
    }
  }
  std::vector<std::atomic<uint64_t>> per_filer(filers.size());
  std::atomic<uint64_t> errors{0};
  std::mutex mu;
  std::vector<double> create_us, stat_us;
  auto start = Steady::now();
  auto end = start + std::chrono::seconds(seconds);
  std::vector<std::thread> ts;
  for (int i = 0; i < clients; ++i) {
    ts.emplace_back([&, i] {
      const std::string& f = filers[i % filers.size()];
      std::vector<double> c_us, s_us;
      for (uint64_t n = 0; Steady::now() < end; ++n) {
        std::string path = StrCat(prefix, "/c", i, "/f", n);
        auto t0 = Steady::now();
        auto r = http.Do("POST", f, StrCat("/api/v1/files?path=", path), {}, "");
        c_us.push_back(std::chrono::duration<double, std::micro>(Steady::now() - t0).count());
        if (!r.ok() || r->status != 201) {
          ++errors;
          continue;
        }
        t0 = Steady::now();
        r = http.Get(f, StrCat("/api/v1/stat?path=", path));
        s_us.push_back(std::chrono::duration<double, std::micro>(Steady::now() - t0).count());
        if (!r.ok() || r->status != 200) {
          ++errors;
          continue;
        }
        per_filer[i % filers.size()] += 2;
      }
      std::lock_guard lock(mu);
      create_us.insert(create_us.end(), c_us.begin(), c_us.end());
      stat_us.insert(stat_us.end(), s_us.begin(), s_us.end());
    });
  }
  for (auto& t : ts) t.join();
  double secs = std::chrono::duration<double>(Steady::now() - start).count();
  auto q = [](std::vector<double> v) {
    if (v.empty()) return std::string("-");
    std::sort(v.begin(), v.end());
    auto at = [&](double p) { return v[std::min(v.size() - 1, static_cast<size_t>(p * v.size()))]; };
    return fmt::format("p50 {:.0f} p99 {:.0f} us", at(0.5), at(0.99));
  };
  uint64_t total = 0;
  for (auto& n : per_filer) total += n;
  std::printf("meta_load: %zu filer(s), %d clients, %.1f s: %.0f ops/s (create + stat), %llu errors\n", filers.size(),
              clients, secs, total / secs, static_cast<unsigned long long>(errors.load()));
  for (size_t k = 0; k < filers.size(); ++k) std::printf("  %s: %.0f ops/s\n", filers[k].c_str(), per_filer[k] / secs);
  std::printf("  create %s; stat %s\n", q(create_us).c_str(), q(stat_us).c_str());
  return errors == 0 ? 0 : 1;
}
