#include "filer/core/txn.h"

namespace kelp::filer {
namespace {

// Innermost scope of this thread (scopes of different services nest, e.g. in tests that run
// two filers in one process).
thread_local TxnScope* tls_top = nullptr;

}  // namespace

TxnScope::TxnScope(const void* owner, KvStore* kv) : owner_(owner) {
  if (Current(owner) != nullptr) return;  // joined
  txn_ = kv->Begin();
  prev_ = tls_top;
  tls_top = this;
}

TxnScope::~TxnScope() {
  if (!txn_) return;
  tls_top = prev_;
  txn_.reset();  // rolls back unless committed
}

KvTxn* TxnScope::Current(const void* owner) {
  for (TxnScope* s = tls_top; s != nullptr; s = s->prev_) {
    if (s->owner_ == owner) return s->txn_.get();
  }
  return nullptr;
}

}  // namespace kelp::filer
