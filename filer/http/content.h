// File content over HTTP, independent of the dialects: a write body split into blobs of at
// most blob_size bytes (each uploaded through volume::BlobStore as it fills, so memory stays at one
// blob per request), and a read that streams the visible intervals of a chunk list (holes
// as zeros, inline data as the bottom layer; filer/client/chunk_intervals.h) blob range by
// blob range. Pure functions over their arguments; thread-safe.
#pragma once

#include <cstdint>
#include <string>
#include <string_view>
#include <vector>

#include "absl/status/statusor.h"
#include "volume/client/blob_store.h"
#include "filer/http/body.h"
#include "proto/filer.pb.h"

namespace kelp::filer {

struct UploadedBlobs {
  std::vector<Chunk> chunks;  // one per blob, consecutive from the base offset
  uint64_t bytes = 0;
};

// Uploads head followed by the rest of body as blobs of blob_size bytes (the last may be
// shorter) placed at file offset base. size_hint is the expected total (head included) when
// known, else -1: it only sizes the buffer. On failure the blobs already uploaded are
// discarded.
absl::StatusOr<UploadedBlobs> UploadBlobs(std::string_view head, BodySource& body, uint64_t base,
                                          size_t blob_size, int64_t size_hint, volume::BlobStore& io);

// Delivers bytes [offset, offset + length) of the file g describes to sink (clipped to the
// file size), in pieces of at most 64 KiB for holes and inline data and as the volume
// server sends them for blobs.
absl::Status StreamContent(const GetChunksResponse& g, uint64_t offset, uint64_t length, volume::BlobStore& io,
                           const volume::ByteSink& sink);

// A strong validator of the content: the same bytes committed the same way give the same
// tag; any commit, truncate or inline write changes it. Quoted, ready for an ETag header.
std::string ContentEtag(const GetChunksResponse& g);

// True when g's content is all inline data (no chunk record): a read needs no volume server.
inline bool InlineOnly(const GetChunksResponse& g) { return g.chunks_size() == 0; }

}  // namespace kelp::filer
