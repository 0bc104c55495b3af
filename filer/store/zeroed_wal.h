// RocksDB's write-ahead log over blocks written with zeros ahead of it.
//
// A synced write that appends to a file allocates blocks and changes the file's size, so its
// fdatasync also writes that metadata: ext4 with a journal waits for a journal commit, ext4
// without one writes the inode and the allocation synchronously (measured with fio on this
// project's machines: 548 us mean and stalls up to 199 ms, against 404 us and 2.7 ms for
// overwriting blocks already written). This file system hands RocksDB WAL files whose next
// bytes already exist as zeros on disk: each WAL write lands inside the file, and the sync
// after it writes the data and flushes the device. A background thread keeps the zeroed
// region ahead of the writer and syncs it there, off the writer's path.
//
// Recovery stays RocksDB's own: its log reader skips zero-filled space silently (it is what
// preallocated log files hold), and a record torn by a crash fails its checksum, which the
// point-in-time recovery mode treats as the log's end. A WAL that is closed is cut back to
// the bytes RocksDB wrote.
#pragma once

#include <cstdint>
#include <memory>
#include <string_view>

#include <rocksdb/file_system.h>

namespace kelp::filer {

struct ZeroedWalOptions {
  // How far ahead of the WAL's writer the zeroed region reaches, in bytes; it is extended
  // once the writer is within half of it.
  uint64_t ahead_bytes = 4ULL << 20;
};

// Wraps base: files named like RocksDB's WALs (<digits>.log) are zeroed ahead; every other
// call goes to base.
std::shared_ptr<rocksdb::FileSystem> NewZeroedWalFileSystem(std::shared_ptr<rocksdb::FileSystem> base,
                                                            const ZeroedWalOptions& options);

// Whether name (a path or a file name) is one of RocksDB's WAL files: <digits>.log.
bool IsRocksWalName(std::string_view name);

}  // namespace kelp::filer
