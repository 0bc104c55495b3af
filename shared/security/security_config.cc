#include "shared/security/security_config.h"

#include <fstream>
#include <sstream>

#include <toml++/toml.h>

#include "absl/strings/str_join.h"
#include "shared/status.h"
#include "shared/strings.h"

namespace kelp::security {
namespace {

absl::Status Bad(std::string_view source, std::string_view what) {
  return absl::InvalidArgumentError(kelp::StrCat(source, ": ", what));
}

// Reads [table] key/expires_after_seconds into *out. Any other entry is an error, so a typo
// ("keys =") does not silently leave a server open.
absl::Status ReadJwtTable(const toml::table& t, std::string_view name, std::string_view source,
                          JwtKey* out, std::initializer_list<std::string_view> subtables) {
  for (const auto& [k, v] : t) {
    std::string_view key = k.str();
    if (key == "key") {
      const std::string* s = v.as_string() ? &v.as_string()->get() : nullptr;
      if (!s) return Bad(source, kelp::StrCat("[", name, "] key must be a string"));
      if (!s->empty() && s->size() < kMinKeyBytes) {
        return Bad(source, kelp::StrCat("[", name, "] key is shorter than ", kMinKeyBytes, " bytes"));
      }
      out->key = *s;
    } else if (key == "expires_after_seconds") {
      auto n = v.value<int64_t>();
      if (!n || *n < 0 || *n > 365 * 86400) {
        return Bad(source, kelp::StrCat("[", name, "] expires_after_seconds must be a number of seconds"));
      }
      out->expires_after_seconds = static_cast<int>(*n);
    } else if (std::find(subtables.begin(), subtables.end(), key) != subtables.end() && v.is_table()) {
      continue;  // a nested section, read by the caller
    } else {
      return Bad(source, kelp::StrCat("unknown entry \"", key, "\" in [", name, "]"));
    }
  }
  return absl::OkStatus();
}

}  // namespace

std::string SecurityConfig::ToString() const {
  std::vector<std::string> on;
  if (volume_write.enabled()) on.push_back("volume writes");
  if (volume_read.enabled()) on.push_back("volume reads");
  if (filer_write.enabled()) on.push_back("filer writes");
  if (filer_read.enabled()) on.push_back("filer reads");
  std::string s = "jwt: ";
  s += on.empty() ? "off" : absl::StrJoin(on, ", ");
  s += grpc_tls() ? "; grpc: mutual TLS" : "; grpc: plaintext";
  return s;
}

absl::StatusOr<SecurityConfig> ParseSecurityConfig(std::string_view text, std::string_view source) {
  toml::table root;
  try {
    root = toml::parse(text, source);
  } catch (const toml::parse_error& e) {
    return Bad(source, kelp::StrCat("line ", e.source().begin.line, ": ", e.description()));
  }
  SecurityConfig cfg;
  cfg.source = std::string(source);
  for (const auto& [k, v] : root) {
    std::string_view key = k.str();
    if (key == "jwt") {
      const toml::table* jwt = v.as_table();
      if (!jwt) return Bad(source, "jwt must be a table");
      for (const auto& [jk, jv] : *jwt) {
        std::string_view name = jk.str();
        const toml::table* t = jv.as_table();
        if (!t) return Bad(source, kelp::StrCat("[jwt.", name, "] must be a table"));
        if (name == "signing") {
          RETURN_IF_ERROR(ReadJwtTable(*t, "jwt.signing", source, &cfg.volume_write, {"read"}));
          if (const toml::table* r = (*t)["read"].as_table()) {
            RETURN_IF_ERROR(ReadJwtTable(*r, "jwt.signing.read", source, &cfg.volume_read, {}));
          }
        } else if (name == "filer_signing") {
          RETURN_IF_ERROR(ReadJwtTable(*t, "jwt.filer_signing", source, &cfg.filer_write, {"read"}));
          if (const toml::table* r = (*t)["read"].as_table()) {
            RETURN_IF_ERROR(ReadJwtTable(*r, "jwt.filer_signing.read", source, &cfg.filer_read, {}));
          }
        } else {
          return Bad(source, kelp::StrCat("unknown section [jwt.", name, "]"));
        }
      }
    } else if (key == "grpc") {
      const toml::table* g = v.as_table();
      if (!g) return Bad(source, "grpc must be a table");
      for (const auto& [gk, gv] : *g) {
        std::string_view name = gk.str();
        if (name == "ca") {
          auto ca = gv.value<std::string>();
          if (!ca) return Bad(source, "[grpc] ca must be a string (a PEM file)");
          cfg.grpc_ca = *ca;
          continue;
        }
        const toml::table* c = gv.as_table();
        if (!c) return Bad(source, kelp::StrCat("unknown entry \"", name, "\" in [grpc]"));
        TlsFiles files;
        for (const auto& [ck, cv] : *c) {
          auto s = cv.value<std::string>();
          if (!s) return Bad(source, kelp::StrCat("[grpc.", name, "] ", ck.str(), " must be a string"));
          if (ck.str() == "cert") {
            files.cert = *s;
          } else if (ck.str() == "key") {
            files.key = *s;
          } else if (ck.str() == "allowed_commonNames") {
            return Bad(source, kelp::StrCat("[grpc.", name, "] allowed_commonNames is not supported: every "
                                            "certificate the CA signed is accepted (docs/security.md)"));
          } else {
            return Bad(source, kelp::StrCat("unknown entry \"", ck.str(), "\" in [grpc.", name, "]"));
          }
        }
        if (files.cert.empty() != files.key.empty()) {
          return Bad(source, kelp::StrCat("[grpc.", name, "] needs both cert and key"));
        }
        if (!files.cert.empty()) cfg.grpc.emplace(std::string(name), std::move(files));
      }
    } else if (key == "access" || key == "guard" || key == "https" || key == "cors") {
      // Sections of SeaweedFS's security.toml that Kelp has no equivalent for: refuse rather
      // than let a user believe they are in force.
      return Bad(source, kelp::StrCat("section [", key, "] is not supported by kelp (docs/security.md)"));
    } else {
      return Bad(source, kelp::StrCat("unknown section [", key, "]"));
    }
  }
  if (cfg.grpc_tls() && cfg.grpc.empty()) {
    return Bad(source, "[grpc] ca is set but no [grpc.filer], [grpc.volume] or [grpc.client] has a cert");
  }
  if (!cfg.grpc_tls() && !cfg.grpc.empty()) {
    return Bad(source, "[grpc.<component>] certificates need [grpc] ca");
  }
  return cfg;
}

absl::StatusOr<SecurityConfig> LoadSecurityConfig(const std::string& path) {
  if (path.empty()) return SecurityConfig{};
  std::ifstream in(path);
  if (!in) return PosixError(errno == 0 ? ENOENT : errno, kelp::StrCat("cannot read ", path));
  std::stringstream ss;
  ss << in.rdbuf();
  return ParseSecurityConfig(ss.str(), path);
}

}  // namespace kelp::security
