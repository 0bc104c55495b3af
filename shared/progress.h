// Progress lines for long-running work (filer.fsck, vacuum): Tick() is cheap enough to call
// per item; a line goes out at most every `every` (default 2 s), never before the first
// interval has passed, so short runs print nothing.
//
//   Progress p([](std::string_view l) { std::fprintf(stderr, "%s\n", l.data()); });
//   for (...) p.Tick("inodes", ++n);            // "inodes: 1,234,567 (3.1 s, 400,000/s)"
//   p.Tick("copy", done, total, "bytes");       // "copy: 45% (123 MiB of 270 MiB, ...)"
//
// Thread-safety: one thread at a time (the caller's loop).
#pragma once

#include <chrono>
#include <cstdint>
#include <functional>
#include <string>
#include <string_view>

namespace kelp {

class Progress {
 public:
  using Clock = std::chrono::steady_clock;
  explicit Progress(std::function<void(std::string_view)> out,
                    Clock::duration every = std::chrono::seconds(2));

  // done items of phase so far (total 0 = unknown); unit "bytes" prints sizes.
  void Tick(std::string_view phase, uint64_t done, uint64_t total = 0, std::string_view unit = "");
  // The line Tick would print now (for tests and a final summary).
  std::string Line(std::string_view phase, uint64_t done, uint64_t total,
                   std::string_view unit) const;

 private:
  std::function<void(std::string_view)> out_;
  Clock::duration every_;
  Clock::time_point start_, next_;
  uint32_t calls_ = 0;
};

// "1,234,567".
std::string WithCommas(uint64_t n);

}  // namespace kelp
