// libFuzzer target: the filer's value decoders (records.h) and key field accessors (keys.h),
// as fsck and the core meet them in a damaged store. The first byte picks the record kind.
// Properties: no crash; a decoded value encodes to bytes that decode to the same value.
#include <cstdint>
#include <string>
#include <string_view>

#include "filer/store/keys.h"
#include "filer/store/records.h"
#include "shared/testing/fuzz_util.h"

using namespace kelp::filer;

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  if (size == 0) return 0;
  std::string_view v(reinterpret_cast<const char*>(data + 1), size - 1);
  switch (data[0] % 6) {
    case 0:
      if (auto r = DecodeInode(7, v); r.ok()) {
        std::string e = EncodeInode(*r);
        auto again = DecodeInode(7, e);
        FUZZ_CHECK(again.ok() && EncodeInode(*again) == e);
      }
      break;
    case 1:
      if (auto d = DecodeDentry(v); d.ok()) {
        auto again = DecodeDentry(EncodeDentry(*d));
        FUZZ_CHECK(again.ok() && again->ino == d->ino && again->type == d->type && again->cookie == d->cookie);
      }
      break;
    case 2:
      if (auto d = DecodeDirIndex(v); d.ok()) {
        auto again = DecodeDirIndex(EncodeDirIndex(d->ino, d->type, d->name));
        FUZZ_CHECK(again.ok() && again->ino == d->ino && again->type == d->type && again->name == d->name);
      }
      break;
    case 3:
      if (auto c = DecodeChunk(9, v); c.ok()) {
        auto again = DecodeChunk(9, EncodeChunk(*c));
        FUZZ_CHECK(again.ok() && again->SerializeAsString() == c->SerializeAsString());
      }
      break;
    case 4:
      if (auto g = DecodeGc(v); g.ok()) {
        auto again = DecodeGc(EncodeGc(*g));
        FUZZ_CHECK(again.ok() && again->fid == g->fid && again->attempts == g->attempts && again->ino == g->ino);
      }
      break;
    case 5:
      // Keys as a scan returns them: any bytes, however short.
      (void)keys::FirstU64(v);
      (void)keys::SecondU64(v);
      (void)keys::NameOf(v);
      (void)keys::PrefixEnd(v);
      break;
  }
  return 0;
}
