// ChunkFetcher: reads byte ranges of blobs for the read path. Random reads are ranged fetches
// (through the ChunkCache when there is one: a miss fetches just the range the reader asked
// for, and the aligned cache blocks around it are fetched and inserted in the background, at
// most Options::max_fills at once; without a pool, the miss fetches the blocks itself; once the
// cache is full, only one miss in Options::full_fill_every fetches its blocks). Sequential
// readers are served from read-ahead windows: a window of
// the blob is fetched whole, and when a reader passes its middle the next window is fetched in
// the background; a window that missed the cache is inserted under the same rule as a random
// miss's blocks. Concurrent readers of one window wait for a single fetch.
//
// A blob that one window reads whole and that is more than half a window long (a stream's
// chunk), on a volume server on this machine (BlobStore::ReadsLocally), is neither written
// through nor inserted after a window read: its window comes straight from the volume's file,
// as cheaply as from the cache's, and a second copy on the same disk would cost the write its
// page-cache pages and the cache its room (docs/mount.md, "Local reads"). Random reads of it
// still fill the cache.
//
// Thread-safety: every method may be called from any thread. mu_ guards the window table and
// is never held across a fetch.
#pragma once

#include <atomic>
#include <cstdint>
#include <list>
#include <map>
#include <memory>
#include <set>
#include <string>
#include <utility>
#include <vector>

#include "absl/base/thread_annotations.h"
#include "absl/status/status.h"
#include "mount/cache/chunk_cache.h"
#include "mount/core/clients.h"
#include "shared/buffer_pool.h"
#include "shared/metrics.h"
#include "shared/mutex.h"
#include "shared/thread_pool.h"

namespace kelp::mount {

class ChunkFetcher {
 public:
  struct Options {
    // Read-ahead window, in bytes; 0 turns read-ahead off. Default: 4 MiB.
    uint64_t window = 4 << 20;
    // Windows held in memory at most (LRU). Default: 16.
    size_t max_windows = 16;
    // Windows fetched ahead of a sequential reader once it passes the middle of one, as many at
    // once as the prefetch pool has threads (4). Default: 4 (2 left the CPUs a third idle on a
    // sequential read: bench/RESULTS.md, "Midday, 2026-12-03").
    int depth = 4;
    // Background cache fills after random-read misses, at most this many at once (a miss
    // finding them all busy leaves its block uncached). 0 = the reader fetches the blocks.
    // Default: 1. With 2, random 4 KiB reads of a 1 GiB file through a full 1000 MiB cache ran
    // at 28-33k reads/s against 53k with 1: every fill past a full cache pushes out another
    // block, and its 256 KiB read and write slow the misses; a cold cache warms about a tenth
    // slower (bench/RESULTS.md, "Evening, 2026-12-04").
    int max_fills = 1;
    // Once the cache has no room left, a miss (a random read's blocks, or a read-ahead window
    // that was not cached) goes into the cache only once in this many misses (1: every miss). Past
    // a full cache a fill pushes another block out, so when the reads cover more than the cache
    // holds (sysbench's 1 GiB through a 1000 MiB cache) each fill trades one block for another at
    // the cost of a 256 KiB read and write and leaves the hit rate where it was; one in 8 still
    // lets a new working set take the cache over, 8 times more slowly. Default: 8
    // (bench/RESULTS.md, "Morning, 2026-12-05 (2)").
    int full_fill_every = 8;
  };
  // blobs must outlive this; cache and pool may be null (no cache, no background prefetch).
  ChunkFetcher(BlobStore* blobs, ChunkCache* cache, ThreadPool* pool, Options options);
  ~ChunkFetcher();

  // Copies bytes [offset, offset + len) of blob fid into dst. blob_size is the blob's whole
  // size (0 = unknown: no cache, no read-ahead). sequential: the caller streams through.
  absl::Status Read(const std::string& fid, uint64_t blob_size, uint64_t offset, size_t len, char* dst,
                    bool sequential);

  // A sequential reader will soon read byte blob_offset of this blob: fetch its window in the
  // background (the read path calls this for the chunks after the one being read).
  void PrefetchAt(const std::string& fid, uint64_t blob_size, uint64_t blob_offset);
  uint64_t window() const { return opts_.window; }
  int depth() const { return opts_.depth; }

  // Offers freshly uploaded data to the cache (write-through), if it wants it.
  void OnUploaded(const std::string& fid, std::string_view blob);

  ChunkCache* cache() const { return cache_; }
  // Window buffers kept for the next windows (tests).
  size_t kept_window_buffers() const { return buffers_->kept(); }
  // Blobs the filer deleted (an unlink, rename or commit answered them): their cached blocks
  // go, so that live data keeps the room (in the background when there is a pool).
  void Forget(const google::protobuf::RepeatedPtrField<filer::FreedBlob>& blobs);

 private:
  // loading and status are guarded by mu_ (ABSL_GUARDED_BY cannot name the fetcher's lock
  // here); data is set before loading turns false and only read after.
  // Buffers of whole windows that went, for the next window to load into (at most 4): every
  // page of a fresh 4 MiB buffer costs a fault at its first touch (a trap to the hypervisor on
  // a VM), a fifth of the mount's samples in a sequential read through fresh ones.
  static constexpr size_t kKeptWindows = 4;
  struct Window {
    ~Window() {
      if (buffers) buffers->Give(std::move(data));
    }
    bool loading = true;
    absl::Status status;
    BufferPool::Buffer data;  // size bytes, never zeroed first: a read fills all of it
    size_t size = 0;
    std::shared_ptr<BufferPool> buffers;  // where data goes back to (it came from there)
  };
  using Key = std::pair<std::string, uint64_t>;  // fid, window index

  absl::Status ReadDirect(const std::string& fid, uint64_t blob_size, uint64_t offset, size_t len, char* dst);
  absl::Status ReadWindowed(const std::string& fid, uint64_t blob_size, uint64_t offset, size_t len, char* dst);
  // Returns the window, loading it in this thread if nobody has it (waits if someone loads it).
  std::shared_ptr<Window> GetWindow(const std::string& fid, uint64_t blob_size, uint64_t index);
  void Prefetch(const std::string& fid, uint64_t blob_size, uint64_t index);
  void LoadWindow(const std::string& fid, uint64_t blob_size, uint64_t index, const std::shared_ptr<Window>& w);
  void InsertBlocks(const std::string& fid, uint64_t blob_size, uint64_t start, std::string_view data);
  // Fetches blocks [start, end) of the blob and inserts them, in the background; false when
  // no fill slot or pool thread was free (or the range is being filled already).
  bool FillInBackground(const std::string& fid, uint64_t blob_size, uint64_t start, uint64_t end);
  // Whether a miss of n bytes of blocks (a random read's, or a read-ahead window's) may put them
  // into the cache: always while they fit, one miss in full_fill_every once they would push
  // others out.
  bool MayFill(uint64_t n);
  // Whether the cache leaves blob fid out because read-ahead windows read it from a local
  // volume's file (see the top of this file); counts local_skips_ when so.
  bool ReadsLocally(const std::string& fid, uint64_t blob_size);
  void EvictLocked() ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_);

  BlobStore* const blobs_;
  ChunkCache* const cache_;
  ThreadPool* const pool_;
  const Options opts_;
  Counter* window_hits_;
  Counter* window_loads_;
  Counter* direct_reads_;
  Counter* fills_;
  Counter* fills_skipped_;
  Counter* fills_declined_;
  Counter* local_skips_;
  std::atomic<uint64_t> full_misses_{0};  // misses that found the cache full
  const std::shared_ptr<BufferPool> buffers_;  // of opts_.window bytes

  Mutex mu_;  // a leaf: never held across a blob read, a cache call or a pool submit
  CondVar loaded_;
  std::map<Key, std::pair<std::shared_ptr<Window>, std::list<Key>::iterator>> windows_ ABSL_GUARDED_BY(mu_);
  std::list<Key> lru_ ABSL_GUARDED_BY(mu_);  // front = most recent
  bool stopping_ ABSL_GUARDED_BY(mu_) = false;
  int prefetching_ ABSL_GUARDED_BY(mu_) = 0;  // background tasks (prefetches and fills) running
  std::set<Key> filling_ ABSL_GUARDED_BY(mu_);   // fid, block start of the fills running
};

}  // namespace kelp::mount
