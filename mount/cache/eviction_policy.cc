#include "mount/cache/eviction_policy.h"

#include <list>

#include "absl/container/flat_hash_map.h"

namespace kelp::mount::cache {
namespace {

struct Node {
  uint64_t key;
  uint64_t bytes;
  uint8_t freq = 0;   // S3-FIFO: hits since insertion or last reinsertion, capped at 3
  bool main = false;  // S3-FIFO: in the main queue (else the small probation queue)
};
using NodeList = std::list<Node>;  // front = newest

// LRU when touch_moves, else FIFO.
class ListPolicy final : public EvictionPolicy {
 public:
  explicit ListPolicy(bool touch_moves) : touch_moves_(touch_moves) {}

  void Add(uint64_t key, uint64_t bytes, uint8_t) override {
    list_.push_front(Node{key, bytes});
    map_[key] = list_.begin();
    bytes_ += bytes;
  }
  void Touch(uint64_t key) override {
    if (!touch_moves_) return;
    auto it = map_.find(key);
    if (it != map_.end()) list_.splice(list_.begin(), list_, it->second);
  }
  void Erase(uint64_t key) override {
    auto it = map_.find(key);
    if (it == map_.end()) return;
    bytes_ -= it->second->bytes;
    list_.erase(it->second);
    map_.erase(it);
  }
  std::optional<uint64_t> Evict() override {
    if (list_.empty()) return std::nullopt;
    uint64_t key = list_.back().key;
    Erase(key);
    return key;
  }
  size_t size() const override { return list_.size(); }
  uint64_t bytes() const override { return bytes_; }
  std::vector<std::pair<uint64_t, uint8_t>> Export() const override {
    std::vector<std::pair<uint64_t, uint8_t>> out;
    out.reserve(list_.size());
    for (auto it = list_.rbegin(); it != list_.rend(); ++it) out.emplace_back(it->key, 0);
    return out;
  }

 private:
  const bool touch_moves_;
  NodeList list_;
  absl::flat_hash_map<uint64_t, NodeList::iterator> map_;
  uint64_t bytes_ = 0;
};

// S3-FIFO (Yang et al., "FIFO queues are all you need for cache eviction", SOSP 2023), by bytes.
// New entries go to a small probation FIFO holding ~10% of the bytes; one reuse while there
// promotes them to the main FIFO, otherwise they leave and their key goes to a ghost FIFO.
// A key found in the ghost is admitted straight into main. Main entries with reuse counts get
// reinserted (count decremented) instead of evicted: CLOCK with up to 3 lives. One-pass scans
// (a big sequential read) thus churn through the probation queue without touching main.
class S3FifoPolicy final : public EvictionPolicy {
 public:
  // state byte: bit 2 = in main, bits 0-1 = reuse count.
  void Add(uint64_t key, uint64_t bytes, uint8_t state) override {
    bool main = (state & 4) != 0;
    if (state == 0) {
      auto g = ghost_map_.find(key);
      if (g != ghost_map_.end()) {
        ghost_.erase(g->second);
        ghost_map_.erase(g);
        main = true;
      }
    }
    NodeList& q = main ? main_ : small_;
    q.push_front(Node{key, bytes, static_cast<uint8_t>(state & 3), main});
    map_[key] = q.begin();
    (main ? main_bytes_ : small_bytes_) += bytes;
  }
  void Touch(uint64_t key) override {
    auto it = map_.find(key);
    if (it != map_.end() && it->second->freq < 3) ++it->second->freq;
  }
  void Erase(uint64_t key) override {
    auto it = map_.find(key);
    if (it == map_.end()) return;
    Node& n = *it->second;
    (n.main ? main_bytes_ : small_bytes_) -= n.bytes;
    (n.main ? main_ : small_).erase(it->second);
    map_.erase(it);
  }
  std::optional<uint64_t> Evict() override {
    while (!map_.empty()) {
      bool from_small = !small_.empty() && (small_bytes_ * 10 >= bytes() || main_.empty());
      if (from_small) {
        Node& n = small_.back();
        if (n.freq >= 1) {  // reused while on probation: promote
          n.freq = 0;
          n.main = true;
          small_bytes_ -= n.bytes;
          main_bytes_ += n.bytes;
          main_.splice(main_.begin(), small_, std::prev(small_.end()));
          continue;
        }
        uint64_t key = n.key;
        Erase(key);
        RememberGhost(key);
        return key;
      }
      Node& n = main_.back();
      if (n.freq > 0) {
        --n.freq;
        main_.splice(main_.begin(), main_, std::prev(main_.end()));
        continue;
      }
      uint64_t key = n.key;
      Erase(key);
      return key;
    }
    return std::nullopt;
  }
  size_t size() const override { return map_.size(); }
  uint64_t bytes() const override { return small_bytes_ + main_bytes_; }
  std::vector<std::pair<uint64_t, uint8_t>> Export() const override {
    std::vector<std::pair<uint64_t, uint8_t>> out;
    out.reserve(map_.size());
    for (const NodeList* q : {&small_, &main_}) {
      for (auto it = q->rbegin(); it != q->rend(); ++it) {
        out.emplace_back(it->key, static_cast<uint8_t>((it->main ? 4 : 0) | it->freq));
      }
    }
    return out;
  }

 private:
  void RememberGhost(uint64_t key) {
    if (ghost_map_.contains(key)) return;
    ghost_.push_front(key);
    ghost_map_[key] = ghost_.begin();
    // As many ghosts as live entries: enough to recognise a key evicted one cache-turn ago.
    size_t limit = std::max<size_t>(map_.size(), 16);
    while (ghost_.size() > limit) {
      ghost_map_.erase(ghost_.back());
      ghost_.pop_back();
    }
  }

  NodeList small_, main_;
  uint64_t small_bytes_ = 0, main_bytes_ = 0;
  absl::flat_hash_map<uint64_t, NodeList::iterator> map_;
  std::list<uint64_t> ghost_;
  absl::flat_hash_map<uint64_t, std::list<uint64_t>::iterator> ghost_map_;
};

}  // namespace

std::unique_ptr<EvictionPolicy> MakeEvictionPolicy(EvictionKind kind) {
  switch (kind) {
    case EvictionKind::kS3Fifo:
      return std::make_unique<S3FifoPolicy>();
    case EvictionKind::kLru:
      return std::make_unique<ListPolicy>(true);
    case EvictionKind::kFifo:
      return std::make_unique<ListPolicy>(false);
  }
  return std::make_unique<ListPolicy>(true);
}

}  // namespace kelp::mount::cache
