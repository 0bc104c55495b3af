// Options of the filer core (FilerService). Every field says its default and unit; the
// `kelp filer` flags print the same text.
#pragma once

#include <chrono>
#include <cstddef>
#include <cstdint>

namespace kelp::filer {

class Clock;

struct FilerOptions {
  // Mutexes guarding inodes (striped by inode number). More stripes, fewer false conflicts.
  // Default: 4096.
  size_t lock_stripes = 4096;

  // A session that sends no KeepAlive for this long lapses: its open files are released and
  // unlinked-but-open inodes it held are purged. OpenSession tells clients to KeepAlive every
  // third of it. Default: 60 s.
  std::chrono::milliseconds session_timeout{60'000};
  // After a start that found sessions in the store, orphans (unlinked inodes that were open)
  // are kept this long before being purged, so mounts can re-announce their open files
  // (KeepAlive reattach). Default: 60 s.
  std::chrono::milliseconds orphan_grace{60'000};

  // A file's chunk list is compacted (records no byte is read from are dropped and their
  // blobs collected) when it has more than max(compact_min_chunks, 2 x the count after its
  // last compaction) records. Default: 64 records.
  uint32_t compact_min_chunks = 64;

  // Event log retention: the log keeps about this many events (sequence gaps count too; it
  // is trimmed in steps of 1%, at most 10,000 events). Default: 1,000,000 events.
  uint64_t event_retention_count = 1'000'000;
  // The log drops events older than this (once the oldest is 1% older). Default: 24 h.
  std::chrono::milliseconds event_retention_age{24LL * 3600 * 1000};

  // Stores several filers share (docs/filer-stores.md): event seqs come in ranges of this
  // many (more when one mutation needs more). Default: 4096.
  uint64_t event_range_size = 4096;
  // A range hands out seqs for at most this long; events of other filers become visible to
  // this filer's subscribers within about this plus event_poll_interval. Default: 100 ms.
  std::chrono::milliseconds event_range_life{100};
  // A range still open this long after it was taken is revoked by any filer (its owner died);
  // a write still using it fails and is retried with a new range. Default: 5 s.
  std::chrono::milliseconds event_range_lease{5'000};
  // How often a filer reads which ranges the others hold open, retires its own and revokes
  // stale ones. Default: 50 ms.
  std::chrono::milliseconds event_poll_interval{50};

  // Blobs deleted per ClusterApi::DeleteBlobs call. Default: 256.
  size_t gc_batch = 256;
  // How long the GC loop lets new garbage gather before a delete round, so deletes go out in
  // batches. Default: 200 ms.
  std::chrono::milliseconds gc_gather{200};
  // How often the GC loop looks at the queue when nothing woke it. Default: 10 s.
  std::chrono::milliseconds gc_idle_interval{10'000};
  // Backoff of a blob whose delete failed: doubles per attempt from min to max.
  // Default: 1 s to 10 min.
  std::chrono::milliseconds gc_retry_min{1'000};
  std::chrono::milliseconds gc_retry_max{600'000};

  // Period of the maintenance loop (session expiry, orphan purge, event trimming, moving
  // journaled bytes to blobs). Default: 1 s.
  std::chrono::milliseconds maintenance_interval{1'000};
  // Journaled bytes (small writes an fsync committed with the metadata) move to blobs once
  // they are this old: bytes rewritten sooner never travel twice. Default: 10 s.
  std::chrono::milliseconds journal_age{10'000};
  // Bytes moved to blobs per maintenance round at most. Default: 64 MiB.
  uint64_t journal_move_bytes = 64 << 20;

  // Start() runs the GC and maintenance threads. Tests turn this off and call
  // RunMaintenance() / GcWorker::RunOnce() themselves. Default: true.
  bool background_loops = true;

  // Time source; nullptr = the real clock. Not owned.
  Clock* clock = nullptr;
};

}  // namespace kelp::filer
