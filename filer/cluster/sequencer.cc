#include "filer/cluster/sequencer.h"

#include <cstring>

#include "shared/status.h"
#include "shared/strings.h"

namespace kelp::filer {
namespace {

std::string EncodeU64(uint64_t v) {
  std::string s(8, '\0');
  for (int i = 7; i >= 0; --i) {
    s[i] = static_cast<char>(v & 0xff);
    v >>= 8;
  }
  return s;
}

uint64_t DecodeU64(std::string_view s) {
  uint64_t v = 0;
  for (unsigned char c : s.substr(0, 8)) v = (v << 8) | c;
  return v;
}

}  // namespace

Sequencer::Sequencer(KvStore* kv, std::string key, uint64_t reserve_step)
    : kv_(kv), key_(std::move(key)), step_(reserve_step == 0 ? 1 : reserve_step) {}

absl::Status Sequencer::Load() {
  std::lock_guard lock(mu_);
  auto v = kv_->Get(key_);
  if (v.ok()) {
    if (v->size() != 8) return absl::DataLossError(StrCat("sequence ", key_, " is corrupt"));
    next_ = reserved_until_ = std::max<uint64_t>(1, DecodeU64(*v));
  } else if (v.status().code() != absl::StatusCode::kNotFound) {
    return v.status();
  }
  return absl::OkStatus();
}

absl::Status Sequencer::ReserveLocked(uint64_t until) {
  RETURN_IF_ERROR(kv_->Put(key_, EncodeU64(until), /*sync=*/true));
  reserved_until_ = until;
  return absl::OkStatus();
}

absl::StatusOr<uint64_t> Sequencer::Next(uint64_t count) {
  if (count == 0) count = 1;
  std::lock_guard lock(mu_);
  if (next_ + count > reserved_until_) RETURN_IF_ERROR(ReserveLocked(next_ + std::max(count, step_)));
  uint64_t first = next_;
  next_ += count;
  return first;
}

absl::Status Sequencer::RaiseAbove(uint64_t v) {
  std::lock_guard lock(mu_);
  if (v < next_) return absl::OkStatus();
  next_ = v + 1;
  if (next_ > reserved_until_) return ReserveLocked(next_ + step_);
  return absl::OkStatus();
}

uint64_t Sequencer::peek() const {
  std::lock_guard lock(mu_);
  return next_;
}

}  // namespace kelp::filer
