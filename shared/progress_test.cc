#include "shared/progress.h"

#include <catch2/catch.hpp>
#include <string>
#include <vector>

namespace kelp {

TEST_CASE("progress: nothing before the first interval, then at most one line per interval") {
  std::vector<std::string> lines;
  Progress p([&](std::string_view l) { lines.emplace_back(l); }, std::chrono::hours(1));
  for (uint64_t i = 1; i <= 100000; ++i) p.Tick("inodes", i);
  CHECK(lines.empty());  // a short run prints nothing

  Progress q([&](std::string_view l) { lines.emplace_back(l); }, std::chrono::nanoseconds(0));
  q.Tick("copy", 50, 200, "bytes");  // with a total, every tick looks at the clock
  REQUIRE(lines.size() == 1);
  CHECK(lines[0].rfind("copy: 25% (", 0) == 0);
  lines.clear();
  Progress r([&](std::string_view l) { lines.emplace_back(l); }, std::chrono::nanoseconds(0));
  for (int i = 0; i < 255; ++i) r.Tick("keys", 7);
  CHECK(lines.empty());  // without a total the clock is read every 256 ticks
  r.Tick("keys", 7);
  REQUIRE(lines.size() == 1);
  CHECK(lines[0].rfind("keys: 7 (", 0) == 0);
}

TEST_CASE("progress: the line names the phase, counts with commas, sizes in MiB and GiB") {
  Progress p([](std::string_view) {});
  CHECK(p.Line("dentries", 1234567, 0, "").rfind("dentries: 1,234,567 (", 0) == 0);
  CHECK(p.Line("vacuum", 3ull << 30, 12ull << 30, "bytes")
            .rfind("vacuum: 25% (3.0 GiB of 12.0 GiB, ", 0) == 0);
  CHECK(p.Line("blobs", 10, 40, "blobs").rfind("blobs: 25% (10 of 40 blobs, ", 0) == 0);
  CHECK(WithCommas(0) == "0");
  CHECK(WithCommas(999) == "999");
  CHECK(WithCommas(1000) == "1,000");
}

}  // namespace kelp
