#include "shared/security/security_config.h"

#include <catch2/catch.hpp>

using namespace kelp::security;

TEST_CASE("security.toml in SeaweedFS's layout parses every section") {
  auto c = ParseSecurityConfig(R"(
# comment
[jwt.signing]
key = "0123456789abcdef-write"
expires_after_seconds = 30
[jwt.signing.read]
key = "0123456789abcdef-read"
[jwt.filer_signing]
key = "0123456789abcdef-filer"
[jwt.filer_signing.read]
key = "0123456789abcdef-filer-read"
expires_after_seconds = 0
[grpc]
ca = "/etc/kelp/ca.crt"
[grpc.volume]
cert = "/etc/kelp/volume.crt"
key = "/etc/kelp/volume.key"
[grpc.client]
cert = "/etc/kelp/client.crt"
key = "/etc/kelp/client.key"
)", "t.toml");
  REQUIRE(c.ok());
  CHECK(c->volume_write.key == "0123456789abcdef-write");
  CHECK(c->volume_write.expires_after_seconds == 30);
  CHECK(c->volume_read.key == "0123456789abcdef-read");
  CHECK(c->volume_read.expires_after_seconds == 10);
  CHECK(c->filer_write.enabled());
  CHECK(c->filer_read.expires_after_seconds == 0);
  CHECK(c->grpc_tls());
  CHECK(c->grpc.at("volume").cert == "/etc/kelp/volume.crt");
  CHECK(c->grpc.count("filer") == 0);
  // The summary names what is on and never a key.
  std::string s = c->ToString();
  CHECK(s.find("volume writes") != std::string::npos);
  CHECK(s.find("mutual TLS") != std::string::npos);
  CHECK(s.find("0123456789abcdef") == std::string::npos);
}

TEST_CASE("an empty file or no file turns everything off") {
  auto c = ParseSecurityConfig("", "empty.toml");
  REQUIRE(c.ok());
  CHECK_FALSE(c->volume_write.enabled());
  CHECK_FALSE(c->grpc_tls());
  auto none = LoadSecurityConfig("");
  REQUIRE(none.ok());
  CHECK_FALSE(none->filer_write.enabled());
  // SeaweedFS's scaffold has empty keys: off.
  auto scaffold = ParseSecurityConfig("[jwt.signing]\nkey = \"\"\nexpires_after_seconds = 10\n", "s");
  REQUIRE(scaffold.ok());
  CHECK_FALSE(scaffold->volume_write.enabled());
}

TEST_CASE("mistakes in security.toml are clear errors, never a silently open server") {
  auto err = [](const char* toml) {
    auto c = ParseSecurityConfig(toml, "bad.toml");
    REQUIRE_FALSE(c.ok());
    CHECK(c.status().code() == absl::StatusCode::kInvalidArgument);
    CHECK(std::string(c.status().message()).find("bad.toml") != std::string::npos);
    return std::string(c.status().message());
  };
  CHECK(err("[jwt.signing]\nkeys = \"0123456789abcdef\"\n").find("keys") != std::string::npos);
  CHECK(err("[jwt.signing]\nkey = \"short\"\n").find("shorter") != std::string::npos);
  CHECK(err("[jwt.signing]\nkey = 5\n").find("string") != std::string::npos);
  CHECK(err("[jwt.signing]\nkey = \"0123456789abcdef\"\nexpires_after_seconds = -1\n").find("seconds") !=
        std::string::npos);
  CHECK(err("[jwt.sigining]\nkey = \"0123456789abcdef\"\n").find("sigining") != std::string::npos);
  CHECK(err("[grpc]\nca = \"/ca.crt\"\n").find("no [grpc.filer]") != std::string::npos);
  CHECK(err("[grpc.volume]\ncert = \"/v.crt\"\nkey = \"/v.key\"\n").find("[grpc] ca") != std::string::npos);
  CHECK(err("[grpc]\nca = \"/ca\"\n[grpc.volume]\ncert = \"/v.crt\"\n").find("both") != std::string::npos);
  CHECK(err("[access]\nui = false\n").find("not supported") != std::string::npos);
  CHECK(err("[jwt.signing\nkey = 1").find("line") != std::string::npos);
}

TEST_CASE("a security file that cannot be read is an error") {
  auto c = LoadSecurityConfig("/nonexistent/security.toml");
  REQUIRE_FALSE(c.ok());
  CHECK(std::string(c.status().message()).find("/nonexistent/security.toml") != std::string::npos);
}
