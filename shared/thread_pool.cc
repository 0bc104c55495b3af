#include "shared/thread_pool.h"

#include <pthread.h>

#include "shared/log.h"

namespace kelp {

ThreadPool::ThreadPool(std::string name, size_t threads, size_t max_queue)
    : name_(std::move(name)), max_queue_(max_queue == 0 ? 1 : max_queue) {
  if (threads == 0) threads = 1;
  threads_.reserve(threads);
  for (size_t i = 0; i < threads; ++i) {
    threads_.emplace_back([this, i] {
      std::string tname = (name_ + std::to_string(i)).substr(0, 15);
      pthread_setname_np(pthread_self(), tname.c_str());
      Run();
    });
  }
}

ThreadPool::~ThreadPool() { Stop(); }

bool ThreadPool::Submit(std::function<void()> task) {
  MutexLock lock(mu_);
  while (!stopping_ && queue_.size() >= max_queue_) not_full_.Wait(lock);
  if (stopping_) return false;
  queue_.push_back(std::move(task));
  busy_.fetch_add(1, std::memory_order_relaxed);
  not_empty_.NotifyOne();
  return true;
}

bool ThreadPool::TrySubmit(std::function<void()> task) {
  MutexLock lock(mu_);
  if (stopping_ || queue_.size() >= max_queue_) return false;
  queue_.push_back(std::move(task));
  busy_.fetch_add(1, std::memory_order_relaxed);
  not_empty_.NotifyOne();
  return true;
}

size_t ThreadPool::queued() const {
  MutexLock lock(mu_);
  return queue_.size();
}

void ThreadPool::Stop() {
  {
    MutexLock lock(mu_);
    if (stopping_ && threads_.empty()) return;
    stopping_ = true;
  }
  not_empty_.NotifyAll();
  not_full_.NotifyAll();
  for (auto& t : threads_) {
    if (t.joinable()) t.join();
  }
  threads_.clear();
}

void ThreadPool::Run() {
  for (;;) {
    std::function<void()> task;
    {
      MutexLock lock(mu_);
      while (!stopping_ && queue_.empty()) not_empty_.Wait(lock);
      if (queue_.empty()) return;  // stopping and drained
      task = std::move(queue_.front());
      queue_.pop_front();
      not_full_.NotifyOne();
    }
    try {
      task();
    } catch (const std::exception& e) {
      spdlog::error("{}: task threw: {}", name_, e.what());
    } catch (...) {
      spdlog::error("{}: task threw a non-exception", name_);
    }
    busy_.fetch_sub(1, std::memory_order_relaxed);
  }
}

}  // namespace kelp
