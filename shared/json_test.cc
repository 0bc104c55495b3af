#include "shared/json.h"

#include <catch2/catch.hpp>

using kelp::JsonString;

TEST_CASE("JSON strings escape what they must and keep UTF-8") {
  CHECK(JsonString("plain") == "\"plain\"");
  CHECK(JsonString("a\"b\\c\n\t\x01") == "\"a\\\"b\\\\c\\n\\t\\u0001\"");
  CHECK(JsonString("h\xC3\xA9llo \xE2\x82\xAC") == "\"h\xC3\xA9llo \xE2\x82\xAC\"");
  CHECK(JsonString("bad \xFF byte") == "\"bad \xEF\xBF\xBD byte\"");
  CHECK(JsonString("cut \xE2\x82") == "\"cut \xEF\xBF\xBD\xEF\xBF\xBD\"");
}

TEST_CASE("JSON strings: AppendJsonString appends, and every control character is escaped") {
  std::string out = "x=";
  kelp::AppendJsonString(&out, "a\rb");
  CHECK(out == "x=\"a\\rb\"");
  for (int c = 0; c < 0x20; ++c) {
    std::string lit = JsonString(std::string(1, static_cast<char>(c)));
    CAPTURE(c);
    CHECK(lit.size() > 3);  // escaped: never the raw byte between the quotes
    CHECK(lit.find(static_cast<char>(c)) == std::string::npos);
  }
}
