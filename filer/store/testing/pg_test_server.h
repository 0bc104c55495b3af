// A throwaway PostgreSQL server for tests: initdb into a fresh temporary directory, started
// on a Unix socket in that directory (and optionally a loopback port), stopped and deleted
// when the object goes. PostgreSQL refuses to run as root, so as root the server runs as the
// `postgres` user (Debian's postgresql package creates it). The binaries come from
// $KELP_PG_BIN, else the newest /usr/lib/postgresql/<version>/bin.
//
// Not thread-safe; create it from the test's main thread.
#pragma once

#include <sys/types.h>

#include <memory>
#include <string>

#include "absl/status/statusor.h"

namespace kelp::filer::testing {

class PgTestServer {
 public:
  struct Options {
    // Also listen on this 127.0.0.1 port; 0 = the Unix socket only.
    int tcp_port = 0;
    // fsync off makes tests faster; benchmarks keep PostgreSQL's default (on).
    bool fsync = false;
    int max_connections = 200;
  };

  static absl::StatusOr<std::unique_ptr<PgTestServer>> Start(const Options& options);
  static absl::StatusOr<std::unique_ptr<PgTestServer>> Start() { return Start(Options{}); }
  ~PgTestServer();

  // libpq connection string of the server's `postgres` database.
  const std::string& dsn() const { return dsn_; }
  // A connection string of a new, empty database (so tests do not see each other's tables).
  absl::StatusOr<std::string> CreateDatabase(const std::string& name);
  pid_t pid() const { return pid_; }
  const std::string& dir() const { return dir_; }

 private:
  PgTestServer() = default;
  std::string dir_;
  std::string dsn_;
  pid_t pid_ = -1;
};

// One server per test binary, started on first use (the test fails with the reason when it
// cannot start) and stopped when the binary exits.
PgTestServer& SharedPgTestServer();

}  // namespace kelp::filer::testing
