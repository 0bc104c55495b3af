#include "shared/strings.h"

#include <catch2/catch.hpp>

namespace kelp {

TEST_CASE("SplitSkipEmpty: pieces between separators, empty ones dropped") {
  using V = std::vector<std::string_view>;
  CHECK(SplitSkipEmpty("a,b", ',') == V{"a", "b"});
  CHECK(SplitSkipEmpty(",a,,b,", ',') == V{"a", "b"});
  CHECK(SplitSkipEmpty("", ',').empty());
  CHECK(SplitSkipEmpty(",,", ',').empty());
  CHECK(SplitSkipEmpty("one", ',') == V{"one"});
  CHECK(SplitSkipEmpty("h:1:/p", ':') == V{"h", "1", "/p"});
}

}  // namespace kelp
