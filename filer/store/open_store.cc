#include "filer/store/open_store.h"

#include <filesystem>

#include "filer/store/pg_kv_store.h"
#include "shared/strings.h"

namespace kelp::filer {

void AddStoreFlags(FlagSet& flags, StoreOptions& o, const std::string& prefix) {
  flags.Add(prefix + "store", &o.kind,
            "metadata store: rocksdb (embedded, under -dir) or postgres (PostgreSQL, CockroachDB or YugabyteDB "
            "at -store.dsn; several filers may share it)");
  flags.Add(prefix + "store.dsn", &o.dsn,
            "postgres store: libpq connection string or URL, e.g. postgresql://kelp@db:5432/kelp");
  flags.Add(prefix + "store.keyspace", &o.keyspace,
            "postgres store: the table holding this namespace (several clusters can share a database)");
  flags.Add(prefix + "store.connections", &o.connections, "postgres store: connections kept open to the database");
  flags.Add(prefix + "store.walZeroAheadMB", &o.rocks.wal_zero_ahead_mb,
            "rocksdb store: how far ahead of the WAL's writes its file is written with zeros, in MiB, so a synced "
            "write overwrites blocks that exist, with no allocation or size change to sync (0: plain appends)");
  flags.Add(prefix + "store.blobMinBytes", &o.rocks.blob_min_bytes,
            "rocksdb store: values of at least this many bytes (journaled writes, inline data) go to blob files, "
            "written once and never rewritten by compactions (0: every value in the tables)");
}

absl::StatusOr<std::unique_ptr<KvStore>> OpenKvStore(const StoreOptions& o) {
  if (o.kind == "rocksdb") {
    if (o.dir.empty()) return absl::InvalidArgumentError("the rocksdb store needs a directory");
    std::error_code ec;
    std::filesystem::create_directories(o.dir, ec);
    if (ec) return absl::FailedPreconditionError(StrCat("cannot create ", o.dir, ": ", ec.message()));
    return OpenRocksKvStore(o.dir, o.rocks);
  }
  if (o.kind == "postgres" || o.kind == "postgresql") {
    if (o.connections < 1) return absl::InvalidArgumentError("-store.connections must be at least 1");
    PgKvOptions p;
    p.dsn = o.dsn;
    p.keyspace = o.keyspace;
    p.connections = static_cast<size_t>(o.connections);
    return OpenPgKvStore(p);
  }
  return absl::InvalidArgumentError(StrCat("unknown -store '", o.kind, "': rocksdb or postgres"));
}

std::string DescribeStore(const StoreOptions& o) {
  if (o.kind == "rocksdb") return StrCat("rocksdb ", o.dir);
  return StrCat(o.kind, " table ", o.keyspace);
}

}  // namespace kelp::filer
