// Limits of the filer API that clients (the mount, the HTTP edge) must know too. The filer
// enforces them; a client may check early to save a round trip.
#pragma once

#include <cstdint>

namespace kelp::filer {

// Longest name of a directory entry, in bytes (Linux NAME_MAX).
inline constexpr uint32_t kMaxNameLen = 255;
// Longest symlink target, in bytes (PATH_MAX - 1).
inline constexpr uint32_t kMaxSymlinkLen = 4095;
// Largest content WriteInline accepts, in bytes. Files at most this big may live in the
// filer's store instead of on volume servers: one write, no volume round trip.
inline constexpr uint32_t kMaxInlineSize = 4096;
// Longest xattr name (XATTR_NAME_MAX) and largest xattr value (XATTR_SIZE_MAX), in bytes.
inline constexpr uint32_t kMaxXattrNameLen = 255;
inline constexpr uint32_t kMaxXattrValueLen = 65536;
// Most bytes of file data one CommitChunks may carry itself (journaled chunks: no blob, the
// filer keeps them with the metadata, one WAL sync for an fsync of small writes).
inline constexpr uint32_t kMaxJournalCommit = 1 << 20;
// Largest file size, in bytes (2^60), so offset arithmetic never overflows. Beyond: EFBIG.
inline constexpr uint64_t kMaxFileSize = 1ULL << 60;
// Most hard links one inode may have (ext4's EXT4_LINK_MAX); beyond it Link fails EMLINK.
inline constexpr uint32_t kMaxLinks = 65000;
// Rename flags (Linux values).
inline constexpr uint32_t kRenameNoReplace = 1;
inline constexpr uint32_t kRenameExchange = 2;
// SetXattr flags (Linux values).
inline constexpr uint32_t kXattrCreate = 1;
inline constexpr uint32_t kXattrReplace = 2;

}  // namespace kelp::filer
