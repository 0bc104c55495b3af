#include "filer/http/serve.h"

#include "filer/http/content.h"
#include "filer/http/format.h"
#include "shared/log.h"
#include "shared/status.h"
#include "shared/strings.h"

namespace kelp::filer {
namespace {

struct Probe {
  const http::Request* req = nullptr;
  std::string target;
  GetChunksResponse g;
};
thread_local Probe probe;

}  // namespace

void ServeFileBytes(http::ResponseWriter& w, bool head_only, int status,
                    const http::Headers& headers, const GetChunksResponse& g, uint64_t offset,
                    uint64_t length, volume::BlobStore& io) {
  if (head_only) {
    (void)w.WriteHead(status, headers, static_cast<int64_t>(length));
    return;
  }
  if (InlineOnly(g) && offset + length <= g.inline_data().size()) {
    if (!w.WriteHead(status, headers, static_cast<int64_t>(length)).ok()) return;
    (void)w.Write(std::string_view(g.inline_data()).substr(offset, length));
    return;
  }
  if (!w.WriteHead(status, headers, static_cast<int64_t>(length)).ok()) return;
  absl::Status s =
      StreamContent(g, offset, length, io, [&](std::string_view piece) { return w.Write(piece); });
  if (!s.ok()) {
    spdlog::warn("http: read of inode {} [{}, +{}) failed after the head was sent: {}",
                 g.attr().ino(), offset, length, s);
    w.CloseAfter();
  }
}

absl::Status JsonStream::MaybeFlush() {
  if (buf_.size() < flush_at_) return absl::OkStatus();
  if (!w_.head_written()) {
    http::Headers h;
    h.Set("Content-Type", "application/json");
    RETURN_IF_ERROR(w_.WriteHead(200, h, -1));
  }
  absl::Status s = w_.Write(buf_);
  buf_.clear();
  return s;
}

absl::Status JsonStream::Finish() {
  if (!w_.head_written()) {
    w_.SendJson(200, buf_);
    return absl::OkStatus();
  }
  absl::Status s = w_.Write(buf_);
  buf_.clear();
  return s;
}

void JsonStream::Fail(const absl::Status& s) {
  if (!w_.head_written()) {
    w_.SendStatus(s);
    return;
  }
  spdlog::warn("http: listing failed part way: {}", s);
  w_.CloseAfter();
}

void StashProbe(const http::Request& req, GetChunksResponse g) {
  probe.req = &req;
  probe.target = req.target();
  probe.g = std::move(g);
}

std::optional<GetChunksResponse> TakeProbe(const http::Request& req) {
  if (probe.req != &req || probe.target != req.target()) return std::nullopt;
  probe.req = nullptr;
  return std::move(probe.g);
}

void DropProbe() { probe.req = nullptr; }

std::string MessageJson(std::string_view text) {
  std::string out = "{\"message\":";
  AppendJsonString(&out, text);
  out += "}\n";
  return out;
}

}  // namespace kelp::filer
