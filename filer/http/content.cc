#include "filer/http/content.h"

#include <cerrno>
#include <cstring>
#include <memory>

#include "filer/client/chunk_intervals.h"
#include "shared/hash.h"
#include "shared/status.h"
#include "shared/strings.h"

namespace kelp::filer {
namespace {

constexpr size_t kPiece = 64 << 10;

}  // namespace

absl::StatusOr<UploadedBlobs> UploadBlobs(std::string_view head, BodySource& body, uint64_t base,
                                          size_t blob_size, int64_t size_hint, volume::BlobStore& io) {
  UploadedBlobs out;
  auto fail = [&](absl::Status s) -> absl::Status {
    std::vector<std::string> fids;
    for (const auto& c : out.chunks) fids.push_back(c.fid());
    io.Discard(fids);
    return s;
  };
  // Not a std::string: resizing one would zero-fill a whole blob for every request.
  size_t cap = blob_size;
  if (size_hint >= 0) cap = std::max<size_t>(1, std::min<uint64_t>(blob_size, size_hint));
  std::unique_ptr<char[]> buf(new char[cap]);
  bool ended = false;
  while (!ended || !head.empty()) {
    size_t n = std::min(head.size(), cap);
    std::memcpy(buf.get(), head.data(), n);
    head.remove_prefix(n);
    while (n < cap && !ended) {
      auto k = body.Read(buf.get() + n, cap - n);
      if (!k.ok()) return fail(k.status());
      if (*k == 0) ended = true;
      n += *k;
    }
    if (n == 0) break;
    auto fid = io.Put(std::string_view(buf.get(), n), /*fsync=*/false);
    if (!fid.ok()) return fail(fid.status());
    Chunk c;
    c.set_fid(*fid);
    c.set_offset(base + out.bytes);
    c.set_size(n);
    c.set_blob_offset(0);
    c.set_blob_size(n);
    out.chunks.push_back(std::move(c));
    out.bytes += n;
    if (n < cap) break;  // the body ended inside this blob
    if (cap < blob_size && head.empty()) {
      // The buffer was cut to the announced size: the body must end here.
      char probe;
      auto k = body.Read(&probe, 1);
      if (!k.ok()) return fail(k.status());
      if (*k != 0) return fail(PosixError(EINVAL, "request body longer than announced"));
      break;
    }
  }
  return out;
}

absl::Status StreamContent(const GetChunksResponse& g, uint64_t offset, uint64_t length, volume::BlobStore& io,
                           const volume::ByteSink& sink) {
  const uint64_t size = g.attr().size();
  if (offset >= size || length == 0) return absl::OkStatus();
  length = std::min(length, size - offset);
  const std::string& inl = g.inline_data();
  auto intervals =
      ClipIntervals(ResolveVisibleIntervals(g.chunks(), size, inl.size()), offset, length);
  static const std::string zeros(kPiece, '\0');
  for (const auto& iv : intervals) {
    switch (iv.source) {
      case VisibleInterval::Source::kHole:
        for (uint64_t done = 0; done < iv.size;) {
          size_t n = std::min<uint64_t>(kPiece, iv.size - done);
          RETURN_IF_ERROR(sink(std::string_view(zeros.data(), n)));
          done += n;
        }
        break;
      case VisibleInterval::Source::kInline:
        for (uint64_t done = 0; done < iv.size;) {
          size_t n = std::min<uint64_t>(kPiece, iv.size - done);
          RETURN_IF_ERROR(sink(std::string_view(inl).substr(iv.offset + done, n)));
          done += n;
        }
        break;
      case VisibleInterval::Source::kChunk:
        if (iv.chunk->fid().empty()) {  // journaled: its bytes came with the chunk list
          if (iv.blob_offset + iv.size > iv.chunk->data().size()) return absl::DataLossError("journaled chunk too short");
          RETURN_IF_ERROR(sink(std::string_view(iv.chunk->data()).substr(iv.blob_offset, iv.size)));
          break;
        }
        RETURN_IF_ERROR(io.Get(iv.chunk->fid(), iv.blob_offset, iv.size, sink));
        break;
    }
  }
  return absl::OkStatus();
}

std::string ContentEtag(const GetChunksResponse& g) {
  Hasher h;
  uint64_t size = g.attr().size();
  h.Update(&size, sizeof size);
  h.Update(g.inline_data());
  for (const auto& c : g.chunks()) {
    uint64_t v[4] = {c.offset(), c.size(), c.blob_offset(), c.seq()};
    h.Update(v, sizeof v);
    h.Update(c.fid());
  }
  char buf[24];
  snprintf(buf, sizeof buf, "\"%016llx\"", static_cast<unsigned long long>(h.Digest()));
  return buf;
}

}  // namespace kelp::filer
