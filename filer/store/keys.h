// The filer's key layout on the KvStore. Every key starts with one family byte; integers in
// keys are big-endian so byte order is numeric order. The prose spec, with the value formats,
// is docs/filer-keys.md; change both together. Value encodings live in records.h.
//
// Pure functions; thread-safe.
#pragma once

#include <cstdint>
#include <string>
#include <string_view>

#include "shared/coding.h"

namespace kelp::filer::keys {

// Bumped when the layout changes incompatibly; stored under MetaKey(kFormatVersionName).
inline constexpr uint64_t kFormatVersion = 1;
inline constexpr std::string_view kFormatVersionName = "format";

// Family bytes (docs/filer-keys.md, "Families").
inline constexpr char kMeta = 'M';       // M name                          -> meta value
inline constexpr char kSequence = 'Q';   // Q name                          -> u64 BE high-water mark
inline constexpr char kCounter = 'N';    // N stripe(u32 BE)                -> zigzag varint inode delta
inline constexpr char kInode = 'I';      // I ino                           -> InodeRecord
inline constexpr char kDentry = 'D';     // D parent name                   -> DentryValue
inline constexpr char kDirIndex = 'K';   // K parent cookie                 -> DirIndexValue
inline constexpr char kChunk = 'C';      // C ino seq                       -> ChunkValue
inline constexpr char kInline = 'F';     // F ino                           -> raw content bytes
inline constexpr char kXattr = 'X';      // X ino name                      -> raw value bytes
inline constexpr char kOrphan = 'O';     // O ino                           -> varint unlink time ns
inline constexpr char kGc = 'G';         // G due_ms seq                    -> GcValue
inline constexpr char kEvent = 'E';      // E seq                           -> serialized kelp.filer.Event
inline constexpr char kEventRange = 'R'; // R first                         -> EventRangeValue (shared stores)
inline constexpr char kSession = 'S';    // S session                       -> SessionValue
inline constexpr char kHolder = 'H';     // H ino session                   -> varint opens
inline constexpr char kSessionOpen = 'U';// U session \0 ino                -> empty
inline constexpr char kJournal = 'J';    // J ino seq                       -> JournalValue (varint ms, data)

// Sequence names (family Q).
inline constexpr std::string_view kInodeSeq = "inode";
inline constexpr std::string_view kChunkSeq = "chunk";
inline constexpr std::string_view kEventSeq = "event";
inline constexpr std::string_view kGcSeq = "gc";
inline constexpr std::string_view kSessionSeq = "session";
// The cluster's (filer/cluster/topology.cc): volume ids and needle keys handed out by Assign.
inline constexpr std::string_view kVolumeIdSeq = "volume_id";
inline constexpr std::string_view kNeedleKeySeq = "needle_key";
// Meta names (family M).
inline constexpr std::string_view kEventFloorName = "event_floor";  // u64 BE: seqs below were trimmed
inline constexpr std::string_view kCoordinatorName = "coordinator";  // the coordinator lease (filer/cluster/lease.h)

inline constexpr uint64_t kRootIno = 1;

inline std::string Family(char f) { return std::string(1, f); }

inline std::string WithIno(char family, uint64_t ino) {
  std::string k(1, family);
  PutFixed64BE(&k, ino);
  return k;
}

inline std::string MetaKey(std::string_view name) { return std::string(1, kMeta).append(name); }
inline std::string SequenceKey(std::string_view name) {
  return std::string(1, kSequence).append(name);
}
inline std::string CounterKey(uint32_t stripe) {
  std::string k(1, kCounter);
  PutFixed32BE(&k, stripe);
  return k;
}

// The stripe of a CounterKey (0 if the key is too short).
inline uint32_t CounterStripe(std::string_view key) {
  uint32_t v = 0;
  if (key.empty()) return 0;
  key.remove_prefix(1);
  return GetFixed32BE(&key, &v) ? v : 0;
}

inline std::string InodeKey(uint64_t ino) { return WithIno(kInode, ino); }

inline std::string DentryKey(uint64_t parent, std::string_view name) {
  return WithIno(kDentry, parent).append(name);
}
inline std::string DentryPrefix(uint64_t parent) { return WithIno(kDentry, parent); }

inline std::string DirIndexKey(uint64_t parent, uint64_t cookie) {
  std::string k = WithIno(kDirIndex, parent);
  PutFixed64BE(&k, cookie);
  return k;
}
inline std::string DirIndexPrefix(uint64_t parent) { return WithIno(kDirIndex, parent); }

inline std::string ChunkKey(uint64_t ino, uint64_t seq) {
  std::string k = WithIno(kChunk, ino);
  PutFixed64BE(&k, seq);
  return k;
}
inline std::string ChunkPrefix(uint64_t ino) { return WithIno(kChunk, ino); }

inline std::string InlineKey(uint64_t ino) { return WithIno(kInline, ino); }

// A journaled chunk's bytes: the same (ino, seq) as its C record.
inline std::string JournalKey(uint64_t ino, uint64_t seq) {
  std::string k = WithIno(kJournal, ino);
  PutFixed64BE(&k, seq);
  return k;
}
inline std::string JournalPrefix(uint64_t ino) { return WithIno(kJournal, ino); }

inline std::string XattrKey(uint64_t ino, std::string_view name) {
  return WithIno(kXattr, ino).append(name);
}
inline std::string XattrPrefix(uint64_t ino) { return WithIno(kXattr, ino); }

inline std::string OrphanKey(uint64_t ino) { return WithIno(kOrphan, ino); }

inline std::string GcKey(uint64_t due_ms, uint64_t seq) {
  std::string k = WithIno(kGc, due_ms);
  PutFixed64BE(&k, seq);
  return k;
}

inline std::string EventKey(uint64_t seq) { return WithIno(kEvent, seq); }
inline std::string EventRangeKey(uint64_t first) { return WithIno(kEventRange, first); }

inline std::string SessionKey(std::string_view session) { return std::string(1, kSession).append(session); }
inline std::string HolderKey(uint64_t ino, std::string_view session) {
  return WithIno(kHolder, ino).append(session);
}
inline std::string HolderPrefix(uint64_t ino) { return WithIno(kHolder, ino); }
inline std::string SessionOpenPrefix(std::string_view session) {
  std::string k(1, kSessionOpen);
  k.append(session);
  k.push_back('\0');
  return k;
}
inline std::string SessionOpenKey(std::string_view session, uint64_t ino) {
  std::string k = SessionOpenPrefix(session);
  PutFixed64BE(&k, ino);
  return k;
}

// The smallest key greater than every key starting with prefix ("" if there is none), for
// the exclusive end of a prefix scan or DeleteRange.
inline std::string PrefixEnd(std::string_view prefix) {
  std::string end(prefix);
  while (!end.empty()) {
    auto& c = end.back();
    if (static_cast<uint8_t>(c) != 0xff) {
      c = static_cast<char>(static_cast<uint8_t>(c) + 1);
      return end;
    }
    end.pop_back();
  }
  return end;
}

// How many leading bytes of key name the run of keys it is written next to (0: none), for
// RocksDB's memtable insert hints (rocksdb_kv_store.cc): the memtable remembers where the last
// key of each run went, and a key that belongs right after it goes in without a search from
// the top of the skip list. A create writes eight keys of seven families, so the one position
// RocksDB keeps for all of them by default always missed. Runs: a directory's names, and its
// cookies; a counter stripe, written over itself; events, GC entries, chunk and journal seqs,
// inline contents, holders and opens, each family one run (their new keys mostly count up).
// Only keys of the exact shape of their family: a shorter key of a family (a prefix) is where
// a range delete starts, and RocksDB 7.8 shares the remembered positions between its point
// and range tables (rocksdb_kv_store.cc deletes such a range key by key). Inodes have none: a
// new file's record and its directory's alternate, and a run per inode would cost memtable
// space for each file written once.
inline size_t InsertHintPrefix(std::string_view key) {
  if (key.empty()) return 0;
  switch (key[0]) {
    case kDentry:
      return key.size() > 9 ? 9 : 0;
    case kDirIndex:
      return key.size() == 17 ? 9 : 0;
    case kCounter:
      return key.size() == 5 ? 5 : 0;
    case kEvent:
    case kInline:
      return key.size() == 9 ? 1 : 0;
    case kChunk:
    case kJournal:
    case kGc:
      return key.size() == 17 ? 1 : 0;
    case kHolder:
      return key.size() > 9 ? 1 : 0;
    case kSessionOpen:
      return key.size() > 9 ? 1 : 0;
    default:
      return 0;
  }
}

// The field accessors below read keys a scan returned; a key too short for the field (a
// damaged store) reads as 0 or "", never out of bounds (found by filer_records_fuzz).
// The big-endian u64 that follows the family byte of a key (the ino, parent, due time or seq).
inline uint64_t FirstU64(std::string_view key) { return key.size() >= 9 ? DecodeFixed64BE(key.substr(1, 8)) : 0; }
// The big-endian u64 after the first one (cookie, chunk seq, GC seq).
inline uint64_t SecondU64(std::string_view key) { return key.size() >= 17 ? DecodeFixed64BE(key.substr(9, 8)) : 0; }
// The bytes after family + u64: the name in dentry and xattr keys.
inline std::string_view NameOf(std::string_view key) { return key.size() > 9 ? key.substr(9) : std::string_view(); }
// The session of an H key.
inline std::string_view HolderSession(std::string_view key) { return key.size() > 9 ? key.substr(9) : std::string_view(); }
// The ino of a U key (its last 8 bytes).
inline uint64_t SessionOpenIno(std::string_view key) {
  return key.size() >= 17 ? DecodeFixed64BE(key.substr(key.size() - 8)) : 0;
}

}  // namespace kelp::filer::keys
