// libFuzzer target: opening a volume from damaged files (the .idx loader and the .dat tail
// scan), in memory. The input describes a few needles written through the real encoder, then
// damage: the .dat cut at some point with some bytes flipped, and an .idx that is the real one
// damaged the same way or raw fuzz bytes. Properties: Open never crashes; once open, the
// volume answers every read with data that matches its checksum or an error, takes a new
// write, and reading it back after a reopen gives the same bytes.
#include <fuzzer/FuzzedDataProvider.h>

#include <cstdint>
#include <string>

#include "shared/hash.h"
#include "shared/testing/fuzz_util.h"
#include "volume/store/mem_env.h"
#include "volume/store/needle.h"
#include "volume/store/volume.h"

using namespace kelp::volume;

namespace {

void Damage(FuzzedDataProvider& in, std::string* file) {
  if (in.ConsumeBool() && !file->empty()) file->resize(in.ConsumeIntegralInRange<size_t>(0, file->size()));
  int flips = in.ConsumeIntegralInRange(0, 3);
  for (int i = 0; i < flips && !file->empty(); ++i) {
    size_t at = in.ConsumeIntegralInRange<size_t>(0, file->size() - 1);
    (*file)[at] = static_cast<char>(in.ConsumeIntegral<uint8_t>());
  }
}

}  // namespace

extern "C" int LLVMFuzzerInitialize(int*, char***) {
  kelp::fuzz::QuietLogs();
  return 0;
}

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  FuzzedDataProvider in(data, size);
  std::string dat = EncodeSuperblock(Superblock{in.ConsumeBool() ? "000" : "001", 0});
  std::string idx;
  int needles = in.ConsumeIntegralInRange(0, 8);
  for (int i = 0; i < needles; ++i) {
    uint64_t key = in.ConsumeIntegralInRange<uint64_t>(0, 16);
    uint32_t cookie = in.ConsumeIntegralInRange<uint32_t>(0, 3);
    IndexRecord r;
    r.key = key;
    r.offset_units = static_cast<uint32_t>(dat.size() / format::kAlignment);
    if (in.ConsumeBool()) {
      EncodeTombstone(key, cookie, 1, &dat);
      r.size = format::kTombstoneSize;
    } else {
      std::string body = in.ConsumeRandomLengthString(256);
      EncodeNeedle(key, cookie, body, kelp::Hash64(body), 1, &dat);
      r.size = static_cast<uint32_t>(body.size());
    }
    char rec[format::kIndexRecordSize];
    EncodeIndexRecord(r, rec);
    idx.append(rec, sizeof rec);
  }
  Damage(in, &dat);
  if (in.ConsumeBool()) {
    Damage(in, &idx);
  } else {
    idx = in.ConsumeRandomLengthString(512);
  }

  MemEnv env;
  env.WriteFile("/v/1.dat", dat);
  env.WriteFile("/v/1.idx", idx);
  Volume::Options o;
  o.dir = "/v";
  o.id = 1;
  o.env = &env;
  std::string payload = "written after recovery";
  {
    auto v = Volume::Open(o);
    if (!v.ok()) return 0;
    std::string buf;
    for (uint64_t key = 0; key <= 16; ++key) {
      for (uint32_t cookie = 0; cookie <= 3; ++cookie) {
        auto n = (*v)->Read(key, cookie, &buf);
        if (n.ok()) FUZZ_CHECK(kelp::Hash64(n->data) == n->checksum);
      }
    }
    bool more = false;
    (void)(*v)->List(0, 100, &more);
    if (!(*v)->Write(100, 7, payload).ok()) return 0;
  }
  auto v = Volume::Open(o);
  FUZZ_CHECK(v.ok());
  std::string buf;
  auto n = (*v)->Read(100, 7, &buf);
  FUZZ_CHECK(n.ok() && n->data == payload);
  return 0;
}
