#include "filer/store/copy.h"

#include <fmt/format.h>

#include "filer/store/keys.h"
#include "shared/hash.h"
#include "shared/status.h"
#include "shared/strings.h"

namespace kelp::filer {
namespace {

// Counts a copied key and value into r and the digest.
void Account(std::string_view key, std::string_view value, Hasher& h, CopyResult& r) {
  std::string len;
  PutFixed64BE(&len, key.size());
  h.Update(len);
  h.Update(key);
  h.Update(value);
  ++r.keys;
  r.bytes += key.size() + value.size();
}

// Digest of the copied keys of a store, in key order.
absl::StatusOr<CopyResult> Digest(KvStore& kv) {
  CopyResult r;
  Hasher h;
  auto it = kv.Scan("", "");
  for (; it->Valid(); it->Next()) {
    if (CopiedKey(it->key())) Account(it->key(), it->value(), h, r);
  }
  RETURN_IF_ERROR(it->status());
  r.digest = h.Digest();
  return r;
}

}  // namespace

bool CopiedKey(std::string_view key) {
  if (key.empty()) return false;
  if (key[0] == keys::kEventRange) return false;
  if (key == keys::MetaKey(keys::kCoordinatorName)) return false;
  return true;
}

absl::StatusOr<CopyResult> CopyStore(KvStore& from, KvStore& to, const CopyOptions& o) {
  if (!o.into_non_empty) {
    auto it = to.Scan("", "", 1);
    if (it->Valid()) return absl::FailedPreconditionError("the destination store is not empty");
    RETURN_IF_ERROR(it->status());
  }
  const size_t batch_size = std::max<size_t>(o.batch, 1);
  CopyResult r;
  Hasher h;
  WriteBatch b;
  auto it = from.Scan("", "");
  for (; it->Valid(); it->Next()) {
    if (!CopiedKey(it->key())) continue;
    Account(it->key(), it->value(), h, r);
    b.Put(it->key(), it->value());
    if (b.size() >= batch_size) {
      RETURN_IF_ERROR(to.Write(b, false));
      b.Clear();
    }
    if (o.progress && r.keys % 100'000 == 0) o.progress(fmt::format("{} keys copied", r.keys));
  }
  RETURN_IF_ERROR(it->status());
  it.reset();
  if (!b.empty()) RETURN_IF_ERROR(to.Write(b, false));
  RETURN_IF_ERROR(to.Sync());
  r.digest = h.Digest();

  ASSIGN_OR_RETURN(CopyResult back, Digest(to));
  if (!o.into_non_empty && (back.keys != r.keys || back.digest != r.digest)) {
    return absl::DataLossError(StrCat("the copy differs from the source: ", back.keys, " keys read back, ", r.keys,
                                      " written"));
  }
  return r;
}

}  // namespace kelp::filer
