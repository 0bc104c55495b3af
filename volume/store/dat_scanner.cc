#include "volume/store/dat_scanner.h"

#include <algorithm>

namespace kelp::volume {
namespace {
constexpr size_t kReadAhead = 1 << 20;
}  // namespace

const char* DatScanner::Window(uint64_t off, size_t n) {
  if (off >= buf_start_ && off + n <= buf_start_ + buf_.size())
    return buf_.data() + (off - buf_start_);
  size_t want = std::max<uint64_t>(n, std::min<uint64_t>(kReadAhead, end_ - off));
  buf_.resize(want);
  buf_start_ = off;
  auto got = file_.ReadAt(off, want, buf_.data());
  if (!got.ok()) {
    status_ = got.status();
    buf_.clear();
    return nullptr;
  }
  buf_.resize(*got);
  if (*got < n) return nullptr;
  return buf_.data();
}

bool DatScanner::IntactAt(uint64_t off) {
  if (end_ - off < format::kHeaderSize) return false;
  const char* h = Window(off, format::kHeaderSize);
  if (h == nullptr) return false;
  NeedleHeader header = DecodeHeader(h);
  if (!header.tombstone() && header.size > format::kMaxDataSize) return false;
  if (header.length() > end_ - off) return false;
  const char* p = Window(off, header.length());
  return p != nullptr && DecodeNeedle(std::string_view(p, header.length())).ok();
}

DatScanner::Step DatScanner::Next() {
  if (started_) offset_ = next_;
  started_ = true;
  raw_ = {};
  if (offset_ == end_) return Step::kEnd;
  if (end_ - offset_ < format::kHeaderSize) return Step::kTorn;
  const char* h = Window(offset_, format::kHeaderSize);
  if (h == nullptr) return status_.ok() ? Step::kTorn : Step::kError;
  NeedleHeader header = DecodeHeader(h);
  if (!header.tombstone() && header.size > format::kMaxDataSize) return Step::kTorn;
  uint64_t len = header.length();
  if (len > end_ - offset_) return Step::kTorn;
  const char* p = Window(offset_, len);
  if (p == nullptr) return status_.ok() ? Step::kTorn : Step::kError;
  auto decoded = DecodeNeedle(std::string_view(p, len));
  next_ = offset_ + len;
  if (decoded.ok()) {
    // Window() may move the buffer, so take the views only now.
    needle_ = *decoded;
    raw_ = std::string_view(p, len);
    return Step::kNeedle;
  }
  // A bad checksum: corruption inside the file if an intact needle follows, else the tail
  // was torn (the usual crash: header written, data not, or a zero-filled tail).
  if (next_ < end_ && IntactAt(next_)) return Step::kCorrupt;
  if (!status_.ok()) return Step::kError;
  return Step::kTorn;
}

}  // namespace kelp::volume
