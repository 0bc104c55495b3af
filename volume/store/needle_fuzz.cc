// libFuzzer target: the needle, index record and superblock decoders. When the first byte is
// odd the needle's checksum is fixed up first, so the fuzzer gets past the hash to the rest
// of the decoder. Properties: a decoded needle re-encodes to the same bytes; nothing crashes.
#include <cstdint>
#include <string>
#include <string_view>

#include "shared/coding.h"
#include "shared/hash.h"
#include "shared/testing/fuzz_util.h"
#include "volume/store/needle.h"

using namespace kelp::volume;

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  if (size == 0) return 0;
  const bool fix_checksum = data[0] & 1;
  std::string buf(reinterpret_cast<const char*>(data + 1), size - 1);
  if (fix_checksum && buf.size() >= format::kHeaderSize) {
    NeedleHeader h = DecodeHeader(buf.data());
    if (!h.tombstone() && format::kHeaderSize + uint64_t{h.size} + format::kFooterSize <= buf.size()) {
      kelp::EncodeFixed64LE(buf.data() + format::kHeaderSize + h.size,
             kelp::Hash64(buf.data() + format::kHeaderSize, h.size));
    }
  }
  auto n = DecodeNeedle(buf);
  if (n.ok()) {
    FUZZ_CHECK(n->header.length() <= buf.size());
    std::string again;
    if (n->header.tombstone()) {
      EncodeTombstone(n->header.key, n->header.cookie, n->append_time_ns, &again);
    } else {
      EncodeNeedle(n->header.key, n->header.cookie, n->data, n->checksum, n->append_time_ns, &again);
    }
    FUZZ_CHECK(again.size() == n->header.length());
    // Padding bytes are not checked by the decoder; everything before them must match.
    size_t meaningful = format::kHeaderSize + format::kFooterSize + (n->header.tombstone() ? 0 : n->header.size);
    FUZZ_CHECK(std::string_view(again).substr(0, meaningful) == std::string_view(buf).substr(0, meaningful));
  }
  if (buf.size() >= format::kIndexRecordSize) {
    IndexRecord r = DecodeIndexRecord(buf.data());
    char out[format::kIndexRecordSize];
    EncodeIndexRecord(r, out);
    FUZZ_CHECK(std::string_view(out, sizeof out) == std::string_view(buf.data(), sizeof out));
  }
  if (auto sb = DecodeSuperblock(buf); sb.ok()) {
    auto back = DecodeSuperblock(EncodeSuperblock(*sb));
    FUZZ_CHECK(back.ok() && back->replication == sb->replication &&
               back->compaction_revision == sb->compaction_revision);
  }
  return 0;
}
