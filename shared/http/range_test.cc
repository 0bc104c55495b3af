#include "shared/http/range.h"

#include <catch2/catch.hpp>

using namespace kelp::http;
using Kind = RangeRequest::Kind;

TEST_CASE("Range headers: the forms RFC 9110 has") {
  auto r = ParseRange("bytes=0-99", 1000);
  CHECK(r.kind == Kind::kPartial);
  CHECK(r.offset == 0);
  CHECK(r.length == 100);

  r = ParseRange("bytes=500-", 1000);
  CHECK(r.kind == Kind::kPartial);
  CHECK(r.offset == 500);
  CHECK(r.length == 500);

  r = ParseRange("bytes=-10", 1000);
  CHECK(r.kind == Kind::kPartial);
  CHECK(r.offset == 990);
  CHECK(r.length == 10);

  // The end is clamped; a suffix longer than the file is the whole file.
  r = ParseRange("bytes=990-5000", 1000);
  CHECK(r.kind == Kind::kPartial);
  CHECK(r.length == 10);
  r = ParseRange("bytes=-5000", 1000);
  CHECK(r.kind == Kind::kPartial);
  CHECK(r.offset == 0);
  CHECK(r.length == 1000);

  r = ParseRange(" Bytes = 999-999 ", 1000);
  CHECK(r.kind == Kind::kPartial);
  CHECK(r.offset == 999);
  CHECK(r.length == 1);

  CHECK(ParseRange("", 1000).kind == Kind::kWhole);
  CHECK(ParseRange("bytes=0-1,5-6", 1000).kind == Kind::kWhole);
  CHECK(ContentRange(10, 5, 1000) == "bytes 10-14/1000");
}

TEST_CASE("Range headers: unsatisfiable and malformed") {
  CHECK(ParseRange("bytes=1000-", 1000).kind == Kind::kUnsatisfiable);
  CHECK(ParseRange("bytes=1000-2000", 1000).kind == Kind::kUnsatisfiable);
  CHECK(ParseRange("bytes=-0", 1000).kind == Kind::kUnsatisfiable);
  CHECK(ParseRange("bytes=0-", 0).kind == Kind::kUnsatisfiable);
  CHECK(ParseRange("bytes=-5", 0).kind == Kind::kUnsatisfiable);

  CHECK(ParseRange("bytes=5-1", 1000).kind == Kind::kMalformed);
  CHECK(ParseRange("bytes=a-b", 1000).kind == Kind::kMalformed);
  CHECK(ParseRange("bytes=-", 1000).kind == Kind::kMalformed);
  CHECK(ParseRange("bytes=-1-2", 1000).kind == Kind::kMalformed);
  CHECK(ParseRange("bytes=+1-2", 1000).kind == Kind::kMalformed);
  CHECK(ParseRange("bytes=1", 1000).kind == Kind::kMalformed);
  CHECK(ParseRange("items=0-1", 1000).kind == Kind::kMalformed);
  CHECK(ParseRange("bytes=99999999999999999999-", 1000).kind == Kind::kMalformed);
  CHECK(ParseRange("0-1", 1000).kind == Kind::kMalformed);
}

TEST_CASE("If-None-Match") {
  CHECK(EtagMatches("\"abc\"", "abc"));
  CHECK(EtagMatches("\"abc\"", "\"abc\""));
  CHECK(EtagMatches("W/\"abc\"", "abc"));
  CHECK(EtagMatches("\"x\", \"abc\"", "abc"));
  CHECK(EtagMatches("*", "abc"));
  CHECK_FALSE(EtagMatches("\"abd\"", "abc"));
  CHECK_FALSE(EtagMatches("", "abc"));
}
