// The store transaction of the filer operation running on this thread. FilerService::Transact
// opens one (TxnScope) around an operation; everything the operation reads through
// FilerService::rd() goes through it, and its Mutation commits through it. So on a store
// several filers share, every read-check-write (create's EEXIST, rmdir's emptiness, rename's
// loop check, link counts) is one serializable transaction; on a store only this process
// opens, the transaction passes straight through and the striped locks do that job.
//
// One scope per thread and service at a time: a Transact inside another joins it.
#pragma once

#include <memory>

#include "filer/store/kv_store.h"

namespace kelp::filer {

class TxnScope {
 public:
  // Begins a transaction on kv for owner, unless this thread already runs one for owner
  // (then this scope joins it and ends nothing).
  TxnScope(const void* owner, KvStore* kv);
  ~TxnScope();
  TxnScope(const TxnScope&) = delete;
  TxnScope& operator=(const TxnScope&) = delete;

  bool joined() const { return txn_ == nullptr; }

  // The transaction this thread runs for owner, or null.
  static KvTxn* Current(const void* owner);

 private:
  const void* owner_ = nullptr;
  std::unique_ptr<KvTxn> txn_;
  TxnScope* prev_ = nullptr;
};

}  // namespace kelp::filer
