#include "shared/http/http_parser.h"

#include <catch2/catch.hpp>

using namespace kelp::http;

TEST_CASE("request head parses, with query and percent-decoding") {
  RequestHead h;
  auto r = ParseRequestHead("GET /a%20b/c?x=1&y=a+b HTTP/1.1\r\nHost: h\r\nX-Y:  z \r\n\r\nrest", &h);
  REQUIRE(r.kind == ParseResult::kOk);
  CHECK(h.method == "GET");
  CHECK(h.path == "/a b/c");
  CHECK(h.query == "x=1&y=a+b");
  CHECK(h.headers.Get("x-y") == "z");
  CHECK(h.keep_alive);
  CHECK(r.consumed == std::string("GET /a%20b/c?x=1&y=a+b HTTP/1.1\r\nHost: h\r\nX-Y:  z \r\n\r\n").size());
  CHECK(*QueryParam(h.query, "y") == "a b");
  CHECK_FALSE(QueryParam(h.query, "z").has_value());
}

TEST_CASE("incomplete heads wait for more") {
  RequestHead h;
  CHECK(ParseRequestHead("GET / HTTP/1.1\r\nHost: h\r\n", &h).kind == ParseResult::kIncomplete);
  CHECK(ParseRequestHead("", &h).kind == ParseResult::kIncomplete);
}

TEST_CASE("malformed requests are errors with the right status") {
  RequestHead h;
  struct Case {
    const char* text;
    int status;
  } cases[] = {
      {"\x01\x02\x03garbage\r\n\r\n", 400},
      {"GET / HTTP/1.1\r\nHost: h\r\nContent-Length: 1\r\nContent-Length: 2\r\n\r\n", 400},
      {"GET / HTTP/1.1\r\nHost: h\r\nContent-Length: -5\r\n\r\n", 400},
      {"GET / HTTP/1.1\r\nHost: h\r\nContent-Length: 5\r\nTransfer-Encoding: chunked\r\n\r\n", 400},
      {"GET / HTTP/1.1\r\nHost: h\r\nTransfer-Encoding: gzip\r\n\r\n", 501},
      {"GET / HTTP/2.0\r\nHost: h\r\n\r\n", 505},
      {"GET noslash HTTP/1.1\r\nHost: h\r\n\r\n", 400},
      {"GET /%zz HTTP/1.1\r\nHost: h\r\n\r\n", 400},
      {"GET / HTTP/1.1\r\n\r\n", 400},
      {"GET / HTTP/1.1\r\nHost: h\r\n folded\r\n\r\n", 400},
      {"GET / HTTP/1.1\r\nBad Header: x\r\nHost: h\r\n\r\n", 400},
  };
  for (const auto& c : cases) {
    INFO(c.text);
    auto r = ParseRequestHead(c.text, &h);
    REQUIRE(r.kind == ParseResult::kError);
    CHECK(r.status == c.status);
  }
  // Binary garbage with no line end is rejected without waiting for more.
  CHECK(ParseRequestHead("\x16\x03\x01\x02", &h).kind == ParseResult::kError);
}

TEST_CASE("chunked decoder handles split input and trailers") {
  std::string wire = "5\r\nhello\r\n6;ext=1\r\n world\r\n0\r\nTrailer: x\r\n\r\n";
  for (size_t step = 1; step <= wire.size(); ++step) {
    ChunkedDecoder d;
    std::string out;
    size_t pos = 0;
    std::string pending;
    while (!d.done() && pos < wire.size()) {
      pending += wire.substr(pos, step);
      pos += step;
      int64_t used = d.Decode(pending, &out, 1 << 20);
      REQUIRE(used >= 0);
      pending.erase(0, used);
    }
    CHECK(d.done());
    CHECK(out == "hello world");
  }
  ChunkedDecoder bad;
  std::string out;
  CHECK(bad.Decode("zz\r\n", &out, 100) < 0);
}

TEST_CASE("response heads and framing") {
  ResponseHead h;
  auto r = ParseResponseHead("HTTP/1.1 200 OK\r\nContent-Length: 3\r\n\r\nabc", "GET", &h);
  REQUIRE(r.kind == ParseResult::kOk);
  CHECK(h.status == 200);
  CHECK(h.framing.content_length == 3);
  r = ParseResponseHead("HTTP/1.1 200 OK\r\nContent-Length: 3\r\n\r\n", "HEAD", &h);
  CHECK(h.framing.content_length == 0);
  r = ParseResponseHead("HTTP/1.0 200 OK\r\n\r\n", "GET", &h);
  CHECK(h.framing.until_close);
  CHECK_FALSE(h.keep_alive);
}

TEST_CASE("percent encoding round trips") {
  std::string raw = "/dir/a b?#%\xff";
  CHECK(*PercentDecode(PercentEncodePath(raw), false) == raw);
  CHECK(PercentEncodePath("/a/b") == "/a/b");
  CHECK(PercentEncodeQuery("/a") == "%2Fa");
}
