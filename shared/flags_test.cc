#include "shared/flags.h"

#include <catch2/catch.hpp>

using kelp::FlagSet;

namespace {
struct Opts {
  std::string dir = "/tmp";
  int port = 8080;
  bool debug = false;
  uint64_t limit = 30000;
  double ratio = 0.3;
};

FlagSet Make(Opts* o) {
  FlagSet f("test", "kelp test [flags]", "Testing.");
  f.Add("dir", &o->dir, "data directory");
  f.Add("port", &o->port, "HTTP port");
  f.Add("debug", &o->debug, "verbose logs");
  f.Add("volumeSizeLimitMB", &o->limit, "volume size limit, in MiB");
  f.Add("garbageThreshold", &o->ratio, "fraction");
  f.Alias("master", "dir");
  return f;
}
}  // namespace

TEST_CASE("go-style flag spellings all parse") {
  Opts o;
  FlagSet f = Make(&o);
  REQUIRE(f.Parse(std::vector<std::string>{"-dir=/data", "--port=9", "-debug", "-volumeSizeLimitMB", "64",
                                           "-garbageThreshold=0.5", "pos"})
              .ok());
  CHECK(o.dir == "/data");
  CHECK(o.port == 9);
  CHECK(o.debug);
  CHECK(o.limit == 64);
  CHECK(o.ratio == 0.5);
  CHECK(f.args() == std::vector<std::string>{"pos"});
  CHECK(f.IsSet("port"));
}

TEST_CASE("bool flags take explicit values, aliases map") {
  Opts o;
  o.debug = true;
  FlagSet f = Make(&o);
  REQUIRE(f.Parse(std::vector<std::string>{"-debug=false", "-master=/m"}).ok());
  CHECK_FALSE(o.debug);
  CHECK(o.dir == "/m");
}

TEST_CASE("unknown flags and bad values are errors") {
  Opts o;
  CHECK_FALSE(Make(&o).Parse(std::vector<std::string>{"-nope=1"}).ok());
  CHECK_FALSE(Make(&o).Parse(std::vector<std::string>{"-port=abc"}).ok());
  CHECK_FALSE(Make(&o).Parse(std::vector<std::string>{"-port=99999999999"}).ok());
  CHECK_FALSE(Make(&o).Parse(std::vector<std::string>{"-volumeSizeLimitMB=-1"}).ok());
  CHECK_FALSE(Make(&o).Parse(std::vector<std::string>{"-debug=maybe"}).ok());
  CHECK_FALSE(Make(&o).Parse(std::vector<std::string>{"-port"}).ok());
  auto s = Make(&o).Parse(std::vector<std::string>{"-bogus"});
  CHECK(std::string(s.message()).find("-bogus") != std::string::npos);
}

TEST_CASE("usage lists every flag with its default") {
  Opts o;
  FlagSet f = Make(&o);
  REQUIRE(f.Parse(std::vector<std::string>{"-h"}).ok());
  CHECK(f.help_requested());
  std::string u = f.Usage();
  CHECK(u.find("-port int") != std::string::npos);
  CHECK(u.find("(default 8080)") != std::string::npos);
  CHECK(u.find("(default \"/tmp\")") != std::string::npos);
  CHECK(u.find("in MiB (default 30000)") != std::string::npos);
}
