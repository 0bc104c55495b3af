// KvStore over libpq. Every connection is in pipeline mode with its statements prepared once
// (binary parameters and results, so keys and values travel as raw bytes): a transaction
// sends BEGIN together with its first read, and its writes together with COMMIT, so a
// read-check-write costs one round trip per read plus one.
//
// Threads: connections live in a pool; a transaction or a snapshot scan holds one until it
// ends. A thread that already holds a connection never waits for another (it opens one more),
// so a transaction that needs a second one briefly (a sequence range taken on the side) cannot
// deadlock the pool.
#include "filer/store/pg_kv_store.h"

#include <libpq-fe.h>

#include <algorithm>
#include <atomic>
#include <chrono>
#include <random>
#include <thread>
#include <vector>

#include "absl/base/thread_annotations.h"
#include "shared/coding.h"
#include "shared/log.h"
#include "shared/metrics.h"
#include "shared/mutex.h"
#include "shared/status.h"
#include "shared/strings.h"

namespace kelp::filer {
namespace {

// Rows fetched per statement of an unbounded scan.
constexpr int64_t kScanPage = 1000;
// Statements sent in one pipeline before reading results: keeps the server's replies within
// socket buffers (a blocking libpq connection that only writes could deadlock otherwise).
constexpr size_t kMaxPipeline = 500;
// Attempts of a plain Write that keeps conflicting.
constexpr int kWriteAttempts = 50;

constexpr Oid kByteaOid = 17;
constexpr Oid kInt8Oid = 20;

enum Flavor { kPostgres, kCockroach, kYugabyte };

std::string_view FlavorName(Flavor f) {
  switch (f) {
    case kCockroach: return "cockroachdb";
    case kYugabyte: return "yugabytedb";
    default: return "postgres";
  }
}

// Prepared statements, by index.
enum StmtId {
  kBegin,
  kBeginSnapshot,
  kCommit,
  kRollback,
  kDurable,  // PostgreSQL: this transaction's commit waits for the WAL flush
  kXid,      // PostgreSQL: makes a transaction write a commit record (Sync)
  kGet,
  kScan,
  kScanToEnd,
  kCount,
  kCountToEnd,
  kPut,
  kDel,
  kDelRange,
  kDelRangeToEnd,
  kRequire,
  kSize,
  kNumStmts,
};

struct StmtDef {
  const char* name;
  std::vector<Oid> types;
};

const StmtDef& Def(StmtId id) {
  static const StmtDef defs[kNumStmts] = {
      {"kelp_begin", {}},
      {"kelp_begin_snapshot", {}},
      {"kelp_commit", {}},
      {"kelp_rollback", {}},
      {"kelp_durable", {}},
      {"kelp_xid", {}},
      {"kelp_get", {kByteaOid}},
      {"kelp_scan", {kByteaOid, kByteaOid, kInt8Oid}},
      {"kelp_scan_to_end", {kByteaOid, kInt8Oid}},
      {"kelp_count", {kByteaOid, kByteaOid}},
      {"kelp_count_to_end", {kByteaOid}},
      {"kelp_put", {kByteaOid, kByteaOid}},
      {"kelp_del", {kByteaOid}},
      {"kelp_del_range", {kByteaOid, kByteaOid}},
      {"kelp_del_range_to_end", {kByteaOid}},
      {"kelp_require", {kByteaOid}},
      {"kelp_size", {}},
  };
  return defs[id];
}

std::string Sql(StmtId id, Flavor f, const std::string& t) {
  switch (id) {
    case kBegin: return "BEGIN ISOLATION LEVEL SERIALIZABLE";
    case kBeginSnapshot:
      return f == kCockroach ? "BEGIN TRANSACTION READ ONLY"
                             : "BEGIN ISOLATION LEVEL REPEATABLE READ, READ ONLY";
    case kCommit: return "COMMIT";
    case kRollback: return "ROLLBACK";
    case kDurable: return "SET LOCAL synchronous_commit TO ON";
    case kXid: return "SELECT txid_current()";
    case kGet: return StrCat("SELECT v FROM ", t, " WHERE k = $1");
    case kScan: return StrCat("SELECT k, v FROM ", t, " WHERE k >= $1 AND k < $2 ORDER BY k LIMIT $3");
    case kScanToEnd: return StrCat("SELECT k, v FROM ", t, " WHERE k >= $1 ORDER BY k LIMIT $2");
    case kCount: return StrCat("SELECT count(*) FROM ", t, " WHERE k >= $1 AND k < $2");
    case kCountToEnd: return StrCat("SELECT count(*) FROM ", t, " WHERE k >= $1");
    case kPut:
      return StrCat("INSERT INTO ", t, " (k, v) VALUES ($1, $2) ON CONFLICT (k) DO UPDATE SET v = excluded.v");
    case kDel: return StrCat("DELETE FROM ", t, " WHERE k = $1");
    case kDelRange: return StrCat("DELETE FROM ", t, " WHERE k >= $1 AND k < $2");
    case kDelRangeToEnd: return StrCat("DELETE FROM ", t, " WHERE k >= $1");
    // Fails with division_by_zero (22012) when the key is absent, which aborts the pipeline
    // before any write of the batch runs: a conditional write in portable SQL.
    case kRequire: return StrCat("SELECT 1 / count(*) FROM ", t, " WHERE k = $1");
    case kSize: return StrCat("SELECT pg_total_relation_size('", t, "')");
    default: return "";
  }
}

bool Supported(StmtId id, Flavor f) {
  if (id == kDurable || id == kXid) return f == kPostgres;
  if (id == kSize) return f != kCockroach;
  return true;
}

// Server notices ("relation already exists, skipping") are not errors; keep them off stderr.
void IgnoreNotice(void*, const char*) {}

struct ResultDeleter {
  void operator()(PGresult* r) const { PQclear(r); }
};
using Result = std::unique_ptr<PGresult, ResultDeleter>;

std::string Int8(int64_t v) {
  std::string s;
  PutFixed64BE(&s, static_cast<uint64_t>(v));
  return s;
}

// One statement of a pipeline, with its parameters (binary).
struct Stmt {
  StmtId id;
  std::vector<std::string_view> params;
  const std::string* require_key = nullptr;  // kRequire: the key, for MissingKeyError
};

absl::Status ErrorOf(const PGresult* r, PGconn* conn, const Stmt* stmt) {
  const char* state = r ? PQresultErrorField(r, PG_DIAG_SQLSTATE) : nullptr;
  std::string msg = r ? PQresultErrorMessage(r) : PQerrorMessage(conn);
  while (!msg.empty() && (msg.back() == '\n' || msg.back() == ' ')) msg.pop_back();
  std::string_view code = state ? state : "";
  if (code == "40001" || code == "40P01") return ConflictError(msg);
  if (code == "22012" && stmt && stmt->require_key) return MissingKeyError(*stmt->require_key);
  if (code.substr(0, 2) == "08" || code == "57P01" || code == "57P02" || code == "57P03" ||
      PQstatus(conn) != CONNECTION_OK) {
    return absl::UnavailableError(StrCat("postgres: ", msg));
  }
  if (code.substr(0, 2) == "53") return absl::ResourceExhaustedError(StrCat("postgres: ", msg));
  return absl::InternalError(StrCat("postgres (", code, "): ", msg));
}

class PgConn {
 public:
  PgConn(PGconn* conn, Flavor flavor) : conn_(conn), flavor_(flavor) {}
  ~PgConn() { PQfinish(conn_); }

  static absl::StatusOr<std::unique_ptr<PgConn>> Connect(const std::string& dsn, Flavor flavor,
                                                         const std::string& table, bool async_commit) {
    PGconn* raw = PQconnectdb(dsn.c_str());
    PQsetNoticeProcessor(raw, IgnoreNotice, nullptr);
    auto conn = std::make_unique<PgConn>(raw, flavor);
    if (PQstatus(raw) != CONNECTION_OK) {
      std::string msg = PQerrorMessage(raw);
      while (!msg.empty() && msg.back() == '\n') msg.pop_back();
      return absl::UnavailableError(StrCat("connect to postgres: ", msg));
    }
    if (flavor == kPostgres && async_commit) {
      Result r(PQexec(raw, "SET synchronous_commit TO OFF"));
      if (PQresultStatus(r.get()) != PGRES_COMMAND_OK) return ErrorOf(r.get(), raw, nullptr);
    }
    for (int i = 0; i < kNumStmts; ++i) {
      StmtId id = static_cast<StmtId>(i);
      if (!Supported(id, flavor)) continue;
      const StmtDef& d = Def(id);
      Result r(PQprepare(raw, d.name, Sql(id, flavor, table).c_str(), static_cast<int>(d.types.size()),
                         d.types.data()));
      if (PQresultStatus(r.get()) != PGRES_COMMAND_OK) return ErrorOf(r.get(), raw, nullptr);
    }
    if (PQenterPipelineMode(raw) != 1) return absl::InternalError("libpq: cannot enter pipeline mode");
    return conn;
  }

  bool broken() const { return broken_ || PQstatus(conn_) != CONNECTION_OK; }

  // Runs stmts in order, in as few round trips as kMaxPipeline allows. out[i] is the result
  // of stmts[i] (results after a failed statement are not kept). Returns the first error.
  absl::Status Run(const std::vector<Stmt>& stmts, std::vector<Result>* out) {
    RETURN_IF_ERROR(Drain());
    if (out) out->clear();
    for (size_t start = 0; start < stmts.size(); start += kMaxPipeline) {
      size_t end = std::min(stmts.size(), start + kMaxPipeline);
      for (size_t i = start; i < end; ++i) RETURN_IF_ERROR(Send(stmts[i]));
      RETURN_IF_ERROR(SyncPipeline());
      absl::Status first_error;
      for (size_t i = start; i < end; ++i) {
        Result r = NextResult();
        if (!r) {
          broken_ = true;
          return ErrorOf(nullptr, conn_, &stmts[i]);
        }
        ExecStatusType st = PQresultStatus(r.get());
        if (st == PGRES_FATAL_ERROR) {
          if (first_error.ok()) first_error = ErrorOf(r.get(), conn_, &stmts[i]);
        } else if (st == PGRES_PIPELINE_ABORTED) {
          if (first_error.ok()) first_error = absl::InternalError("postgres: pipeline aborted");
        } else if (out && first_error.ok()) {
          out->push_back(std::move(r));
        }
      }
      RETURN_IF_ERROR(ReadSync());
      if (!first_error.ok()) return first_error;
    }
    return absl::OkStatus();
  }

  // Sends stmt (ROLLBACK of an abandoned transaction) without waiting: its result is read
  // before the next Run. The server ends the transaction at once, releasing its locks.
  void SendAndForget(StmtId id) {
    if (broken()) return;
    if (!Send(Stmt{id, {}}).ok() || !SyncPipeline().ok()) {
      broken_ = true;
      return;
    }
    ++forgotten_;
  }

  Flavor flavor() const { return flavor_; }

 private:
  absl::Status Send(const Stmt& s) {
    const StmtDef& d = Def(s.id);
    const char* values[3];
    int lengths[3];
    int formats[3] = {1, 1, 1};
    for (size_t i = 0; i < s.params.size() && i < 3; ++i) {
      // libpq wants a non-null pointer for an empty binary value.
      values[i] = s.params[i].empty() ? "" : s.params[i].data();
      lengths[i] = static_cast<int>(s.params[i].size());
    }
    if (PQsendQueryPrepared(conn_, d.name, static_cast<int>(s.params.size()), values, lengths, formats, 1) != 1) {
      broken_ = true;
      return ErrorOf(nullptr, conn_, &s);
    }
    return absl::OkStatus();
  }

  absl::Status SyncPipeline() {
    if (PQpipelineSync(conn_) != 1) {
      broken_ = true;
      return ErrorOf(nullptr, conn_, nullptr);
    }
    return absl::OkStatus();
  }

  // The result of the next statement; consumes the NULL that ends it.
  Result NextResult() {
    Result r(PQgetResult(conn_));
    if (!r) return r;
    while (PGresult* extra = PQgetResult(conn_)) PQclear(extra);
    return r;
  }

  absl::Status ReadSync() {
    Result r(PQgetResult(conn_));
    if (!r || PQresultStatus(r.get()) != PGRES_PIPELINE_SYNC) {
      broken_ = true;
      return absl::UnavailableError(StrCat("postgres: lost the pipeline (", PQerrorMessage(conn_), ")"));
    }
    return absl::OkStatus();
  }

  absl::Status Drain() {
    while (forgotten_ > 0) {
      --forgotten_;
      Result r = NextResult();
      if (!r) {
        broken_ = true;
        return ErrorOf(nullptr, conn_, nullptr);
      }
      RETURN_IF_ERROR(ReadSync());
    }
    return absl::OkStatus();
  }

  PGconn* const conn_;
  const Flavor flavor_;
  bool broken_ = false;
  int forgotten_ = 0;
};

std::string_view Bytes(const PGresult* r, int row, int col) {
  return std::string_view(PQgetvalue(r, row, col), static_cast<size_t>(PQgetlength(r, row, col)));
}

int64_t Int8At(const PGresult* r, int row, int col) {
  std::string_view v = Bytes(r, row, col);
  if (v.size() != 8) return 0;
  return static_cast<int64_t>(DecodeFixed64BE(v));
}

thread_local int tls_held = 0;  // connections this thread holds, from any PgKvStore

class PgKvStore;

// A connection borrowed from the pool; returned (or dropped if broken) when destroyed.
class Lease {
 public:
  Lease() = default;
  Lease(PgKvStore* store, std::unique_ptr<PgConn> conn) : store_(store), conn_(std::move(conn)) {}
  Lease(Lease&& o) noexcept = default;
  Lease& operator=(Lease&& o) noexcept;
  ~Lease();
  PgConn* operator->() { return conn_.get(); }
  PgConn* get() { return conn_.get(); }
  explicit operator bool() const { return conn_ != nullptr; }
  void Return();

 private:
  PgKvStore* store_ = nullptr;
  std::unique_ptr<PgConn> conn_;
};

class PgKvStore : public KvStore {
 public:
  PgKvStore(PgKvOptions opts, Flavor flavor, std::string table)
      : opts_(std::move(opts)),
        flavor_(flavor),
        table_(std::move(table)),
        syncs_(MetricsRegistry::Default().GetCounter(
            "kelp_filer_wal_syncs_total", "WAL syncs (fsync, synced writes); a sync with nothing new is skipped")),
        conflicts_(MetricsRegistry::Default().GetCounter(
            "kelp_filer_store_conflicts_total",
            "Store transactions that lost to a concurrent change and were retried (SQLSTATE 40001/40P01)")) {}
  ~PgKvStore() override {
    MutexLock lock(mu_);
    idle_.clear();
  }

  absl::StatusOr<Lease> Acquire() {
    MutexLock lock(mu_);
    for (;;) {
      if (!idle_.empty()) {
        auto c = std::move(idle_.back());
        idle_.pop_back();
        ++tls_held;
        return Lease(this, std::move(c));
      }
      if (open_ < opts_.connections || tls_held > 0) break;
      cv_.Wait(lock);
    }
    ++open_;
    lock.Unlock();
    auto c = PgConn::Connect(opts_.dsn, flavor_, table_, opts_.async_commit);
    if (!c.ok()) {
      MutexLock l(mu_);
      --open_;
      cv_.NotifyOne();
      return c.status();
    }
    ++tls_held;
    return Lease(this, std::move(*c));
  }

  void Release(std::unique_ptr<PgConn> c) {
    --tls_held;
    MutexLock lock(mu_);
    if (c->broken()) {
      --open_;
      c.reset();
    } else {
      idle_.push_back(std::move(c));
    }
    cv_.NotifyOne();
  }

  absl::StatusOr<std::string> Get(std::string_view key) override {
    ASSIGN_OR_RETURN(Lease c, Acquire());
    std::vector<Result> out;
    RETURN_IF_ERROR(c->Run({Stmt{kGet, {key}}}, &out));
    return GetValue(out.back().get());
  }

  using KvStore::Scan;
  std::unique_ptr<KvIterator> Scan(std::string_view begin, std::string_view end, size_t limit_hint) override;

  absl::StatusOr<uint64_t> Count(std::string_view begin, std::string_view end) override {
    ASSIGN_OR_RETURN(Lease c, Acquire());
    std::vector<Result> out;
    RETURN_IF_ERROR(c->Run({CountStmt(begin, end)}, &out));
    return static_cast<uint64_t>(Int8At(out.back().get(), 0, 0));
  }

  absl::Status Write(const WriteBatch& batch, bool sync) override {
    if (batch.empty()) return absl::OkStatus();
    thread_local std::minstd_rand rng{std::random_device{}()};
    for (int attempt = 0;; ++attempt) {
      absl::Status s;
      {
        auto c = Acquire();
        if (!c.ok()) return c.status();
        std::vector<Stmt> stmts{Stmt{kBegin, {}}};
        AppendWrites(batch, sync, &stmts);
        stmts.push_back(Stmt{kCommit, {}});
        s = (*c)->Run(stmts, nullptr);
        if (!s.ok()) (*c)->SendAndForget(kRollback);
      }
      if (s.ok()) {
        Committed(sync);
        return s;
      }
      if (!IsConflict(s) || attempt + 1 >= kWriteAttempts) return s;
      conflicts_->Inc();
      std::this_thread::sleep_for(std::chrono::microseconds(
          std::uniform_int_distribution<int>(100, 1000 << std::min(attempt, 6))(rng)));
    }
  }

  absl::Status Sync() override {
    if (flavor_ != kPostgres || !opts_.async_commit) return absl::OkStatus();
    uint64_t target = async_commits_.load();
    if (synced_.load() >= target) return absl::OkStatus();
    // A transaction that has an xid writes a commit record; with synchronous_commit on, its
    // COMMIT returns once the WAL is flushed up to it, which covers every earlier commit.
    ASSIGN_OR_RETURN(Lease c, Acquire());
    absl::Status s = c->Run({Stmt{kBegin, {}}, Stmt{kDurable, {}}, Stmt{kXid, {}}, Stmt{kCommit, {}}}, nullptr);
    if (!s.ok()) {
      c->SendAndForget(kRollback);
      return s;
    }
    syncs_->Inc();
    uint64_t cur = synced_.load();
    while (cur < target && !synced_.compare_exchange_weak(cur, target)) {
    }
    return absl::OkStatus();
  }

  uint64_t ApproximateSize() override {
    if (!Supported(kSize, flavor_)) return 0;
    auto now = std::chrono::steady_clock::now();
    {
      MutexLock lock(size_mu_);
      if (now - size_at_ < std::chrono::seconds(10) && size_at_.time_since_epoch().count() != 0) return size_;
    }
    uint64_t size = 0;
    if (auto c = Acquire(); c.ok()) {
      std::vector<Result> out;
      if ((*c)->Run({Stmt{kSize, {}}}, &out).ok()) size = static_cast<uint64_t>(Int8At(out.back().get(), 0, 0));
    }
    MutexLock lock(size_mu_);
    size_ = size;
    size_at_ = now;
    return size;
  }

  std::unique_ptr<KvTxn> Begin() override;
  bool shared() const override { return true; }
  std::string_view kind() const override { return FlavorName(flavor_); }

  // --- helpers shared with transactions and iterators ---
  static absl::StatusOr<std::string> GetValue(const PGresult* r) {
    if (PQntuples(r) == 0) return absl::NotFoundError("key not found");
    return std::string(Bytes(r, 0, 0));
  }

  Stmt CountStmt(std::string_view begin, std::string_view end) const {
    if (end.empty()) return Stmt{kCountToEnd, {begin}};
    return Stmt{kCount, {begin, end}};
  }

  // Appends the statements of batch, checks first (so a failed one stops the writes).
  void AppendWrites(const WriteBatch& batch, bool sync, std::vector<Stmt>* stmts) const {
    if (sync && flavor_ == kPostgres && opts_.async_commit) stmts->push_back(Stmt{kDurable, {}});
    for (const auto& op : batch.ops()) {
      if (op.kind == WriteBatch::Op::kRequire) stmts->push_back(Stmt{kRequire, {op.key}, &op.key});
    }
    for (const auto& op : batch.ops()) {
      switch (op.kind) {
        case WriteBatch::Op::kPut: stmts->push_back(Stmt{kPut, {op.key, op.value}}); break;
        case WriteBatch::Op::kDelete: stmts->push_back(Stmt{kDel, {op.key}}); break;
        case WriteBatch::Op::kDeleteRange:
          if (op.value.empty()) {
            stmts->push_back(Stmt{kDelRangeToEnd, {op.key}});
          } else if (op.key < op.value) {
            stmts->push_back(Stmt{kDelRange, {op.key, op.value}});
          }
          break;
        case WriteBatch::Op::kRequire: break;
      }
    }
  }

  void Committed(bool sync) {
    if (sync) {
      syncs_->Inc();
    } else {
      ++async_commits_;
    }
  }
  void Conflicted() { conflicts_->Inc(); }

 private:
  const PgKvOptions opts_;
  const Flavor flavor_;
  const std::string table_;
  Counter* const syncs_;
  Counter* const conflicts_;

  Mutex mu_;
  CondVar cv_;
  std::vector<std::unique_ptr<PgConn>> idle_ ABSL_GUARDED_BY(mu_);
  size_t open_ ABSL_GUARDED_BY(mu_) = 0;

  // Async commits so far, and how many of them a Sync() covered.
  std::atomic<uint64_t> async_commits_{0};
  std::atomic<uint64_t> synced_{0};

  Mutex size_mu_;
  uint64_t size_ ABSL_GUARDED_BY(size_mu_) = 0;
  std::chrono::steady_clock::time_point size_at_ ABSL_GUARDED_BY(size_mu_);
};

Lease& Lease::operator=(Lease&& o) noexcept {
  if (this != &o) {
    Return();
    store_ = o.store_;
    conn_ = std::move(o.conn_);
  }
  return *this;
}

Lease::~Lease() { Return(); }

void Lease::Return() {
  if (conn_) store_->Release(std::move(conn_));
}

// Rows of [begin, end) a page at a time. Over a connection of its own (a snapshot: a
// read-only transaction held until destroyed) or over a transaction's.
class PgIterator : public KvIterator {
 public:
  // conn: the transaction's connection (not owned), or null to hold `own` for a snapshot.
  PgIterator(PgKvStore* store, PgConn* conn, Lease own, std::string begin, std::string end, size_t limit_hint)
      : store_(store),
        conn_(conn ? conn : own.get()),
        own_(std::move(own)),
        next_(std::move(begin)),
        end_(std::move(end)),
        bounded_(limit_hint > 0),
        page_(limit_hint > 0 ? static_cast<int64_t>(limit_hint) : kScanPage) {}

  ~PgIterator() override {
    if (own_ && snapshot_) own_->SendAndForget(kRollback);
  }

  // Fetches the first page; with first_stmt (BEGIN...) in the same round trip.
  void Start(std::optional<StmtId> first_stmt) {
    if (first_stmt) snapshot_ = first_stmt == kBeginSnapshot;
    Fetch(first_stmt);
  }

  bool Valid() const override { return status_.ok() && pos_ < rows_; }
  void Next() override {
    ++pos_;
    if (pos_ >= rows_ && more_) Fetch(std::nullopt);
  }
  std::string_view key() const override { return Bytes(res_.get(), pos_, 0); }
  std::string_view value() const override { return Bytes(res_.get(), pos_, 1); }
  absl::Status status() const override { return status_; }

 private:
  void Fetch(std::optional<StmtId> first_stmt) {
    if (!conn_) {
      status_ = absl::UnavailableError("postgres: no connection");
      return;
    }
    std::string limit = Int8(page_);
    std::vector<Stmt> stmts;
    if (first_stmt) stmts.push_back(Stmt{*first_stmt, {}});
    if (end_.empty()) {
      stmts.push_back(Stmt{kScanToEnd, {next_, limit}});
    } else {
      stmts.push_back(Stmt{kScan, {next_, end_, limit}});
    }
    std::vector<Result> out;
    status_ = conn_->Run(stmts, &out);
    res_.reset();
    rows_ = pos_ = 0;
    more_ = false;
    if (!status_.ok()) {
      if (IsConflict(status_)) store_->Conflicted();
      return;
    }
    res_ = std::move(out.back());
    rows_ = PQntuples(res_.get());
    // A bounded scan stops at its hint; an unbounded one goes on after the last key.
    more_ = !bounded_ && rows_ == page_;
    if (more_) next_ = std::string(Bytes(res_.get(), rows_ - 1, 0)) + '\0';
  }

  PgKvStore* const store_;
  PgConn* const conn_;
  Lease own_;
  std::string next_;
  const std::string end_;
  const bool bounded_;
  const int64_t page_;
  bool snapshot_ = false;
  Result res_;
  int rows_ = 0;
  int pos_ = 0;
  bool more_ = false;
  absl::Status status_;
};

class ErrorIterator : public KvIterator {
 public:
  explicit ErrorIterator(absl::Status s) : s_(std::move(s)) {}
  bool Valid() const override { return false; }
  void Next() override {}
  std::string_view key() const override { return {}; }
  std::string_view value() const override { return {}; }
  absl::Status status() const override { return s_; }

 private:
  absl::Status s_;
};

std::unique_ptr<KvIterator> PgKvStore::Scan(std::string_view begin, std::string_view end, size_t limit_hint) {
  auto c = Acquire();
  if (!c.ok()) return std::make_unique<ErrorIterator>(c.status());
  if (limit_hint > 0) {
    // One statement is a snapshot of its own; the connection goes back at once.
    auto it = std::make_unique<PgIterator>(this, c->get(), Lease(), std::string(begin), std::string(end), limit_hint);
    it->Start(std::nullopt);
    return it;
  }
  auto it = std::make_unique<PgIterator>(this, nullptr, std::move(*c), std::string(begin), std::string(end), 0);
  it->Start(kBeginSnapshot);
  return it;
}

// SERIALIZABLE, begun lazily with the first read (or the commit, for a blind write).
class PgTxn : public KvTxn {
 public:
  explicit PgTxn(PgKvStore* store) : store_(store) {}
  ~PgTxn() override {
    if (conn_ && begun_ && !done_) conn_->SendAndForget(kRollback);
  }

  absl::StatusOr<std::string> Get(std::string_view key) override {
    if (done_) return store_->Get(key);
    std::vector<Result> out;
    RETURN_IF_ERROR(Run(Stmt{kGet, {key}}, &out));
    return PgKvStore::GetValue(out.back().get());
  }

  using KvTxn::Scan;
  std::unique_ptr<KvIterator> Scan(std::string_view begin, std::string_view end, size_t limit_hint) override {
    if (done_) return store_->Scan(begin, end, limit_hint);
    if (auto s = Connect(); !s.ok()) return std::make_unique<ErrorIterator>(s);
    auto it = std::make_unique<PgIterator>(store_, conn_.get(), Lease(), std::string(begin), std::string(end),
                                           limit_hint);
    std::optional<StmtId> first;
    if (!begun_) first = kBegin;
    begun_ = true;
    it->Start(first);
    return it;
  }

  absl::StatusOr<uint64_t> Count(std::string_view begin, std::string_view end) override {
    if (done_) return store_->Count(begin, end);
    std::vector<Result> out;
    RETURN_IF_ERROR(Run(store_->CountStmt(begin, end), &out));
    return static_cast<uint64_t>(Int8At(out.back().get(), 0, 0));
  }

  absl::Status Commit(const WriteBatch& batch, bool sync) override {
    if (done_) return absl::FailedPreconditionError("transaction already committed");
    done_ = true;
    if (!begun_ && batch.empty()) return absl::OkStatus();
    RETURN_IF_ERROR(Connect());
    std::vector<Stmt> stmts;
    if (!begun_) stmts.push_back(Stmt{kBegin, {}});
    begun_ = true;
    store_->AppendWrites(batch, sync, &stmts);
    stmts.push_back(Stmt{kCommit, {}});
    absl::Status s = conn_->Run(stmts, nullptr);
    if (!s.ok()) {
      conn_->SendAndForget(kRollback);
      if (IsConflict(s)) store_->Conflicted();
    } else {
      store_->Committed(sync);
    }
    conn_.Return();
    return s;
  }

 private:
  absl::Status Connect() {
    if (conn_) return absl::OkStatus();
    ASSIGN_OR_RETURN(conn_, store_->Acquire());
    return absl::OkStatus();
  }

  absl::Status Run(Stmt stmt, std::vector<Result>* out) {
    RETURN_IF_ERROR(Connect());
    std::vector<Stmt> stmts;
    if (!begun_) stmts.push_back(Stmt{kBegin, {}});
    begun_ = true;
    stmts.push_back(std::move(stmt));
    absl::Status s = conn_->Run(stmts, out);
    if (IsConflict(s)) store_->Conflicted();
    return s;
  }

  PgKvStore* const store_;
  Lease conn_;
  bool begun_ = false;
  bool done_ = false;
};

std::unique_ptr<KvTxn> PgKvStore::Begin() { return std::make_unique<PgTxn>(this); }

bool ValidKeyspace(std::string_view k) {
  if (k.empty() || k.size() > 48) return false;
  if (!((k[0] >= 'a' && k[0] <= 'z') || (k[0] >= 'A' && k[0] <= 'Z'))) return false;
  for (char c : k) {
    bool ok = (c >= 'a' && c <= 'z') || (c >= 'A' && c <= 'Z') || (c >= '0' && c <= '9') || c == '_';
    if (!ok) return false;
  }
  return true;
}

}  // namespace

std::string PgCreateTableSql(std::string_view flavor, std::string_view table) {
  // YugabyteDB shards the first primary-key column by hash unless told ASC; range scans in
  // key order need it ordered. PostgreSQL does not accept ASC there; CockroachDB orders
  // primary keys anyway.
  std::string_view pk = flavor == "yugabytedb" ? "PRIMARY KEY (k ASC)" : "PRIMARY KEY (k)";
  return StrCat("CREATE TABLE IF NOT EXISTS ", table, " (k BYTEA NOT NULL, v BYTEA NOT NULL, ", pk, ")");
}

absl::StatusOr<std::unique_ptr<KvStore>> OpenPgKvStore(const PgKvOptions& options) {
  if (options.dsn.empty()) return absl::InvalidArgumentError("the postgres store needs -store.dsn");
  if (!ValidKeyspace(options.keyspace)) {
    return absl::InvalidArgumentError(StrCat("bad keyspace '", options.keyspace,
                                             "': letters, digits and _, starting with a letter, at most 48"));
  }
  std::string table = options.keyspace;
  std::transform(table.begin(), table.end(), table.begin(), [](char c) { return std::tolower(c); });

  PGconn* raw = PQconnectdb(options.dsn.c_str());
  std::unique_ptr<PGconn, void (*)(PGconn*)> conn(raw, PQfinish);
  PQsetNoticeProcessor(raw, IgnoreNotice, nullptr);
  if (PQstatus(raw) != CONNECTION_OK) {
    std::string msg = PQerrorMessage(raw);
    while (!msg.empty() && msg.back() == '\n') msg.pop_back();
    return absl::UnavailableError(StrCat("connect to postgres: ", msg));
  }
  Flavor flavor = kPostgres;
  {
    Result r(PQexec(raw, "SELECT version()"));
    if (PQresultStatus(r.get()) != PGRES_TUPLES_OK) return ErrorOf(r.get(), raw, nullptr);
    std::string v = PQgetvalue(r.get(), 0, 0);
    if (v.find("CockroachDB") != std::string::npos) {
      flavor = kCockroach;
    } else if (v.find("-YB-") != std::string::npos) {
      flavor = kYugabyte;
    }
  }
  // Two filers starting at once can both try to create the table; PostgreSQL may answer one
  // of them with a unique violation on its catalog, so try again.
  for (int attempt = 0;; ++attempt) {
    Result r(PQexec(raw, PgCreateTableSql(FlavorName(flavor), table).c_str()));
    if (PQresultStatus(r.get()) == PGRES_COMMAND_OK) break;
    absl::Status s = ErrorOf(r.get(), raw, nullptr);
    if (attempt >= 3) return s;
    std::this_thread::sleep_for(std::chrono::milliseconds(100));
  }
  conn.reset();
  auto store = std::make_unique<PgKvStore>(options, flavor, table);
  // One connection now, so a bad DSN or missing privileges show at start.
  {
    auto c = store->Acquire();
    if (!c.ok()) return c.status();
  }
  spdlog::info("filer store: {} table {} ({} connections)", FlavorName(flavor), table, options.connections);
  return std::unique_ptr<KvStore>(std::move(store));
}

}  // namespace kelp::filer
