// Choosing and opening the filer's store from flags: -store=rocksdb|postgres, -store.dsn,
// -store.keyspace, -store.connections (docs/filer-stores.md). Shared by `kelp filer`,
// `kelp server`, `kelp filer.fsck` and `kelp filer.copy`.
#pragma once

#include <memory>
#include <string>

#include "absl/status/statusor.h"
#include "filer/store/kv_store.h"
#include "shared/flags.h"

namespace kelp::filer {

struct StoreOptions {
  // "rocksdb" (embedded, in `dir`) or "postgres" (PostgreSQL, CockroachDB or YugabyteDB at
  // `dsn`, shareable by several filers). Default: rocksdb.
  std::string kind = "rocksdb";
  // RocksDB: the store's directory.
  std::string dir;
  // RocksDB: options of the embedded store (testing_power_cut).
  RocksKvOptions rocks;
  // postgres: libpq connection string or URL.
  std::string dsn;
  // postgres: the table holding this namespace. Default: kelp.
  std::string keyspace = "kelp";
  // postgres: connections kept open. Default: 16.
  int connections = 16;
};

// Registers -<prefix>store, -<prefix>store.dsn, -<prefix>store.keyspace and
// -<prefix>store.connections (the RocksDB directory comes from each command's -dir).
void AddStoreFlags(FlagSet& flags, StoreOptions& options, const std::string& prefix);

absl::StatusOr<std::unique_ptr<KvStore>> OpenKvStore(const StoreOptions& options);

// A human-readable name of where the store lives ("rocksdb /data/meta", "postgres table kelp").
std::string DescribeStore(const StoreOptions& options);

}  // namespace kelp::filer
