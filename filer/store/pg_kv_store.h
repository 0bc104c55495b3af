// The KvStore over PostgreSQL's protocol (libpq): PostgreSQL itself, CockroachDB and
// YugabyteDB. One table of ordered binary keys per keyspace, transactions SERIALIZABLE and
// pipelined (one round trip per read, one for all the writes and the COMMIT), conflicts
// (SQLSTATE 40001, 40P01) answered as IsConflict so the filer redoes the operation. Schema,
// SQL and the retry rule: docs/filer-stores.md.
#pragma once

#include <cstddef>
#include <memory>
#include <string>

#include "absl/status/statusor.h"
#include "filer/store/kv_store.h"

namespace kelp::filer {

struct PgKvOptions {
  // libpq connection string ("host=/run/postgresql dbname=kelp") or URL
  // ("postgresql://user@host:5432/kelp?sslmode=require"). Required.
  std::string dsn;
  // The table that holds this namespace, so several clusters can share one database: letters,
  // digits and '_', starting with a letter. Created when missing. Default: kelp.
  std::string keyspace = "kelp";
  // Connections kept open to the database (a thread that already holds one may open more).
  // Default: 16.
  size_t connections = 16;
  // PostgreSQL only: commits that nobody asked to be durable skip the WAL flush
  // (synchronous_commit off) and Sync() flushes; a database crash may lose the last few
  // hundred ms of them, never a synced one (RocksDB's unsynced writes behave the same on power
  // loss). CockroachDB and YugabyteDB always commit durably. Default: true.
  bool async_commit = true;
};

// Connects, checks the server (PostgreSQL, CockroachDB or YugabyteDB) and creates the
// keyspace's table if it does not exist.
absl::StatusOr<std::unique_ptr<KvStore>> OpenPgKvStore(const PgKvOptions& options);

// The CREATE TABLE statement for a flavor ("postgres", "cockroachdb", "yugabytedb"), as
// docs/filer-stores.md shows it.
std::string PgCreateTableSql(std::string_view flavor, std::string_view table);

}  // namespace kelp::filer
