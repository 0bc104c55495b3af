#include "shared/metrics.h"

#include <catch2/catch.hpp>

TEST_CASE("metrics render as prometheus text") {
  kelp::MetricsRegistry r;
  r.GetCounter("kelp_test_requests_total", "Requests.", {{"method", "GET"}})->Inc(3);
  r.GetGauge("kelp_test_volumes", "Volumes.")->Set(7);
  r.GetHistogram("kelp_test_latency_seconds", "Latency.")->Observe(0.002);
  int id = r.AddCallback("kelp_test_rss_bytes", "RSS.", [] { return 42.0; });
  std::string out = r.Render();
  CHECK(out.find("# TYPE kelp_test_requests_total counter") != std::string::npos);
  CHECK(out.find("kelp_test_requests_total{method=\"GET\"} 3") != std::string::npos);
  CHECK(out.find("kelp_test_volumes 7") != std::string::npos);
  CHECK(out.find("kelp_test_latency_seconds_bucket{le=\"0.0025\"} 1") != std::string::npos);
  CHECK(out.find("kelp_test_latency_seconds_bucket{le=\"0.001\"} 0") != std::string::npos);
  CHECK(out.find("kelp_test_latency_seconds_count 1") != std::string::npos);
  CHECK(out.find("kelp_test_rss_bytes 42") != std::string::npos);
  r.RemoveCallback(id);
  CHECK(r.Render().find("kelp_test_rss_bytes 42") == std::string::npos);
  // Same name and labels give the same counter.
  CHECK(r.GetCounter("kelp_test_requests_total", "", {{"method", "GET"}})->value() == 3);
  CHECK(kelp::ResidentBytes() > 0);
}
