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
  std::unique_lock lock(mu_);
  not_full_.wait(lock, [&] { return stopping_ || queue_.size() < max_queue_; });
  if (stopping_) return false;
  queue_.push_back(std::move(task));
  not_empty_.notify_one();
  return true;
}

bool ThreadPool::TrySubmit(std::function<void()> task) {
  std::lock_guard lock(mu_);
  if (stopping_ || queue_.size() >= max_queue_) return false;
  queue_.push_back(std::move(task));
  not_empty_.notify_one();
  return true;
}

size_t ThreadPool::queued() const {
  std::lock_guard lock(mu_);
  return queue_.size();
}

void ThreadPool::Stop() {
  {
    std::lock_guard lock(mu_);
    if (stopping_ && threads_.empty()) return;
    stopping_ = true;
  }
  not_empty_.notify_all();
  not_full_.notify_all();
  for (auto& t : threads_) {
    if (t.joinable()) t.join();
  }
  threads_.clear();
}

void ThreadPool::Run() {
  for (;;) {
    std::function<void()> task;
    {
      std::unique_lock lock(mu_);
      not_empty_.wait(lock, [&] { return stopping_ || !queue_.empty(); });
      if (queue_.empty()) return;  // stopping and drained
      task = std::move(queue_.front());
      queue_.pop_front();
      not_full_.notify_one();
    }
    try {
      task();
    } catch (const std::exception& e) {
      spdlog::error("{}: task threw: {}", name_, e.what());
    } catch (...) {
      spdlog::error("{}: task threw a non-exception", name_);
    }
  }
}

}  // namespace kelp
