#include "shared/progress.h"

#include <cstdio>

namespace kelp {

std::string WithCommas(uint64_t n) {
  std::string digits = std::to_string(n), out;
  for (size_t i = 0; i < digits.size(); ++i) {
    if (i > 0 && (digits.size() - i) % 3 == 0) out += ',';
    out += digits[i];
  }
  return out;
}

namespace {

std::string Size(uint64_t bytes) {
  char buf[32];
  if (bytes >= (1ull << 30)) {
    std::snprintf(buf, sizeof(buf), "%.1f GiB", static_cast<double>(bytes) / (1ull << 30));
  } else {
    std::snprintf(buf, sizeof(buf), "%.0f MiB", static_cast<double>(bytes) / (1ull << 20));
  }
  return buf;
}

}  // namespace

Progress::Progress(std::function<void(std::string_view)> out, Clock::duration every)
    : out_(std::move(out)), every_(every), start_(Clock::now()), next_(start_ + every) {}

void Progress::Tick(std::string_view phase, uint64_t done, uint64_t total, std::string_view unit) {
  // The clock is read every 256 calls: a tick in a tight loop costs an increment.
  if ((++calls_ & 255) != 0 && total == 0) return;
  Clock::time_point now = Clock::now();
  if (now < next_) return;
  next_ = now + every_;
  out_(Line(phase, done, total, unit));
}

std::string Progress::Line(std::string_view phase, uint64_t done, uint64_t total,
                           std::string_view unit) const {
  double secs = std::chrono::duration<double>(Clock::now() - start_).count();
  bool bytes = unit == "bytes";
  std::string what = bytes ? Size(done) : WithCommas(done);
  std::string line(phase);
  line += ": ";
  char buf[96];
  if (total > 0) {
    std::snprintf(buf, sizeof(buf), "%.0f%% (",
                  100.0 * static_cast<double>(done) / static_cast<double>(total));
    line += buf;
    line += what + " of " + (bytes ? Size(total) : WithCommas(total));
    if (!bytes && !unit.empty()) line += " " + std::string(unit);
    line += ", ";
  } else {
    line += what;
    if (!bytes && !unit.empty()) line += " " + std::string(unit);
    line += " (";
  }
  double rate = secs > 0 ? static_cast<double>(done) / secs : 0;
  if (bytes) {
    std::snprintf(buf, sizeof(buf), "%.1f s, %.0f MiB/s)", secs, rate / (1 << 20));
  } else {
    std::snprintf(buf, sizeof(buf), "%.1f s, %s/s)", secs,
                  WithCommas(static_cast<uint64_t>(rate)).c_str());
  }
  line += buf;
  return line;
}

}  // namespace kelp
