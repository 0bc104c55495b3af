// A fixed set of worker threads fed from a bounded queue. Submit blocks while the queue is
// full (back-pressure); TrySubmit refuses instead. Stop() drains queued work, then joins.
// Submit/TrySubmit may be called from any thread, including a worker.
#pragma once

#include <atomic>
#include <cstddef>
#include <deque>
#include <functional>
#include <string>
#include <thread>
#include <vector>

#include "absl/base/thread_annotations.h"
#include "shared/mutex.h"

namespace kelp {

class ThreadPool {
 public:
  ThreadPool(std::string name, size_t threads, size_t max_queue);
  ~ThreadPool();  // calls Stop()
  ThreadPool(const ThreadPool&) = delete;
  ThreadPool& operator=(const ThreadPool&) = delete;

  // Returns false only after Stop().
  bool Submit(std::function<void()> task);
  // Returns false if the queue is full or the pool is stopped.
  bool TrySubmit(std::function<void()> task);
  void Stop();

  size_t size() const { return threads_.size(); }
  size_t queued() const;
  // Tasks queued or running, read without the lock.
  size_t busy() const { return busy_.load(std::memory_order_relaxed); }

 private:
  void Run();

  const std::string name_;
  const size_t max_queue_;
  mutable Mutex mu_;
  CondVar not_empty_, not_full_;
  std::deque<std::function<void()>> queue_ ABSL_GUARDED_BY(mu_);
  bool stopping_ ABSL_GUARDED_BY(mu_) = false;
  std::vector<std::thread> threads_;
  std::atomic<size_t> busy_{0};
};

}  // namespace kelp
