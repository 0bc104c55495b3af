// Subscribe: an event stream from a given sequence, optionally limited to a subtree.
#include <sys/stat.h>

#include <cerrno>
#include <unordered_map>

#include "filer/core/filer_service.h"
#include "filer/store/keys.h"
#include "shared/status.h"

namespace kelp::filer {
namespace {

// Directories whose place in the tree a subscriber remembers before starting over.
constexpr size_t kPlacementCache = 65536;

}  // namespace

absl::StatusOr<std::unique_ptr<EventSubscription>> FilerService::Subscribe(
    uint64_t from_seq, std::string_view path_prefix, uint64_t skip_origin) {
  uint64_t root = keys::kRootIno;
  if (!path_prefix.empty() && path_prefix != "/") {
    ASSIGN_OR_RETURN(Attr a, ResolvePath(path_prefix));
    if (!S_ISDIR(a.mode())) return PosixError(ENOTDIR, "path_prefix is not a directory");
    root = a.ino();
  }
  uint64_t next = events_.published() + 1;
  bool reset = false;
  if (from_seq > next) {
    // Newer than anything this filer wrote: the subscriber saw a different history (the
    // store was replaced). Everything it cached is suspect.
    reset = true;
  } else if (from_seq != 0) {
    next = from_seq;  // EventSubscription::Next resets if this is below the floor
  }

  std::function<bool(const Event&)> filter;
  if (root != keys::kRootIno) {
    auto cache = std::make_shared<std::unordered_map<uint64_t, bool>>();
    filter = [this, root, cache](const Event& e) {
      auto within = [&](uint64_t dir) {
        if (dir == 0) return false;
        if (auto it = cache->find(dir); it != cache->end()) return it->second;
        auto r = IsWithin(dir, root);
        bool inside = r.ok() ? *r : true;  // cannot tell any more: deliver
        if (cache->size() >= kPlacementCache) cache->clear();
        (*cache)[dir] = inside;
        return inside;
      };
      bool hit = false;
      switch (e.kind()) {
        case EVENT_CREATE:
        case EVENT_DELETE: hit = within(e.parent()); break;
        case EVENT_RENAME: hit = within(e.parent()) || within(e.new_parent()); break;
        default: hit = e.ino() == root || within(e.attr().parent()); break;
      }
      bool is_dir = S_ISDIR(e.attr().mode());
      if (is_dir && e.kind() == EVENT_RENAME) cache->clear();  // a subtree moved
      if (is_dir && e.kind() == EVENT_DELETE) cache->erase(e.ino());
      return hit;
    };
  }
  return std::make_unique<EventSubscription>(&events_, kv_, clock_, next, reset, std::move(filter),
                                             skip_origin);
}

}  // namespace kelp::filer
