#include "shared/hash.h"

#include <algorithm>
#include <cstddef>
#include <string>

#include <catch2/catch.hpp>

namespace kelp {
namespace {

// 300,000 bytes: past xxHash3's 240-byte short path, so its vector code (whichever the CPU
// gets) hashes most of it.
std::string Patterned() {
  std::string s(300000, '\0');
  for (size_t i = 0; i < s.size(); ++i) s[i] = static_cast<char>((i * 131 + 7) & 0xff);
  return s;
}

}  // namespace

// The values are what the header-inlined xxHash3 (its SSE2 code) gave before the hashing moved
// to the library's dispatch: checksums already on disk (needles, cache entries) must still match.
TEST_CASE("hash: xxHash3 values are the on-disk ones on any vector unit") {
  CHECK(Hash64("", 0) == 0x2d06800538d394c2ULL);
  CHECK(Hash64("abc") == 0x78af5f94892f3950ULL);
  const std::string big = Patterned();
  CHECK(Hash64(big) == 0x3ef2dba2c088772cULL);
  CHECK(Hash64(big.data(), 1000) == 0x571d5cbfef44331bULL);
  CHECK(Hash64WithSeed("3,01637037d6", 262144) == 0x5661fa96086034c6ULL);
  CHECK(Hash64WithSeed("3,01637037d6", 0) != Hash64WithSeed("3,01637037d6", 262144));
}

TEST_CASE("hash: the incremental digest equals the one-shot hash whatever the pieces") {
  const std::string big = Patterned();
  for (size_t piece : {size_t{1}, size_t{63}, size_t{240}, size_t{4096}, size_t{65536}, big.size()}) {
    Hasher h;
    for (size_t at = 0; at < big.size(); at += piece) h.Update(big.data() + at, std::min(piece, big.size() - at));
    INFO("piece " << piece);
    CHECK(h.Digest() == Hash64(big));
  }
  Hasher empty;
  CHECK(empty.Digest() == Hash64("", 0));
}

}  // namespace kelp
