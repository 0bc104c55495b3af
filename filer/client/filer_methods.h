// The numbers of the filer's metadata methods on the wire (shared/rpc frames, method field).
// proto/filer.proto lists each with its request and response; docs/rpc-protocol.md describes
// the transport. Numbers are never reused: a method that goes keeps its number retired.
#pragma once

#include <cstdint>

namespace kelp::filer {

enum class FilerMethod : uint16_t {
  kLookup = 1,
  kGetAttr = 2,
  kReadDir = 3,
  kCreate = 4,
  kSymlink = 5,
  kLink = 6,
  kUnlink = 7,
  kRmdir = 8,
  kRename = 9,
  kSetAttr = 10,
  kGetXattr = 11,
  kSetXattr = 12,
  kListXattr = 13,
  kRemoveXattr = 14,
  kStatFs = 15,
  kGetChunks = 16,
  kCommitChunks = 17,
  kWriteInline = 18,
  kFsync = 19,
  kOpenSession = 20,
  kKeepAlive = 21,
  kOpen = 22,
  kRelease = 23,
  kAssign = 24,
  kLookupVolume = 25,
  kSubscribe = 26,
  kResolvePath = 27,
  kUnlinkBatch = 28,
  kCommitBatch = 29,
};

inline constexpr uint16_t MethodNumber(FilerMethod m) { return static_cast<uint16_t>(m); }
// The highest number in use (a new method takes the next one and moves this).
inline constexpr FilerMethod kLastFilerMethod = FilerMethod::kCommitBatch;

}  // namespace kelp::filer
