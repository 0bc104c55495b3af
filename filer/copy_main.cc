// kelp filer.copy: copies a namespace from one store to another (filer/store/copy.h).
#include <cstdio>
#include <string>

#include "cmd/commands.h"
#include "filer/fsck/fsck.h"
#include "filer/store/copy.h"
#include "filer/store/open_store.h"
#include "shared/flags.h"
#include "shared/log.h"
#include "shared/strings.h"

namespace kelp {
namespace {

// A store named on the command line: a PostgreSQL URL (postgres://, postgresql://), "postgres:"
// and a libpq connection string, or a directory (a filer's -dir, a kelp server -dir or the
// RocksDB directory itself).
filer::StoreOptions ParseStore(const std::string& spec, const std::string& keyspace) {
  filer::StoreOptions o;
  o.keyspace = keyspace;
  if (spec.rfind("postgres://", 0) == 0 || spec.rfind("postgresql://", 0) == 0) {
    o.kind = "postgres";
    o.dsn = spec;
  } else if (spec.rfind("postgres:", 0) == 0) {
    o.kind = "postgres";
    o.dsn = spec.substr(9);
  } else {
    o.kind = "rocksdb";
    o.dir = spec;
  }
  return o;
}

}  // namespace

int CopyMain(int argc, char** argv) {
  std::string from, to, from_ks = "kelp", to_ks = "kelp";
  filer::CopyOptions o;
  uint64_t batch = o.batch;
  FlagSet flags("filer.copy", "kelp filer.copy -from=STORE -to=STORE [flags]",
                "Copies a filer's namespace from one store to another, e.g. RocksDB to PostgreSQL and back.\n"
                "A STORE is a directory (a kelp filer -dir, a kelp server -dir or the RocksDB directory), a URL\n"
                "postgresql://user@host:5432/db, or postgres:<libpq connection string>. Every filer on either store\n"
                "must be stopped. The copy is read back and compared before this reports success.\n"
                "Exit code: 0 copied, 1 failed, 2 usage. See docs/filer-stores.md.");
  flags.Add("from", &from, "the store to copy from");
  flags.Add("to", &to, "the store to copy into (a directory is created; it must hold no namespace yet)");
  flags.Add("from.keyspace", &from_ks, "postgres source: the table of the namespace");
  flags.Add("to.keyspace", &to_ks, "postgres destination: the table of the namespace");
  flags.Add("batch", &batch, "keys written per batch");
  flags.Add("force", &o.into_non_empty, "copy into a destination that already holds keys (they are kept)");
  flags.ParseOrExit(argc, argv);
  if (from.empty() || to.empty() || !flags.args().empty()) {
    std::fprintf(stderr, "kelp filer.copy: -from and -to are required (see 'kelp filer.copy -h')\n");
    return 2;
  }
  InitLogging("warn");
  o.batch = static_cast<size_t>(std::max<uint64_t>(batch, 1));
  o.progress = [](std::string_view line) { std::printf("filer.copy: %.*s\n", static_cast<int>(line.size()), line.data()); };

  filer::StoreOptions src = ParseStore(from, from_ks);
  std::string src_where;
  auto in = filer::OpenOfflineStore(src, src.dir, &src_where);
  if (!in.ok()) {
    std::fprintf(stderr, "kelp filer.copy: source: %s\n", std::string(in.status().message()).c_str());
    return 1;
  }
  filer::StoreOptions dst = ParseStore(to, to_ks);
  std::string dst_where;
  absl::StatusOr<std::unique_ptr<filer::KvStore>> out;
  if (dst.kind == "rocksdb" && !filer::FindFilerStore(dst.dir).ok()) {
    dst.dir = StrCat(dst.dir, "/meta");  // a new filer -dir
    dst_where = dst.dir;
    out = filer::OpenKvStore(dst);
  } else {
    out = filer::OpenOfflineStore(dst, dst.dir, &dst_where);
  }
  if (!out.ok()) {
    std::fprintf(stderr, "kelp filer.copy: destination: %s\n", std::string(out.status().message()).c_str());
    return 1;
  }
  auto r = filer::CopyStore(**in, **out, o);
  if (!r.ok()) {
    std::fprintf(stderr, "kelp filer.copy: %s\n", std::string(r.status().message()).c_str());
    return 1;
  }
  std::printf("filer.copy: %s -> %s: %llu keys, %llu bytes, digest %016llx, verified\n", src_where.c_str(),
              dst_where.c_str(), static_cast<unsigned long long>(r->keys), static_cast<unsigned long long>(r->bytes),
              static_cast<unsigned long long>(r->digest));
  return 0;
}

}  // namespace kelp
