#include "volume/http/volume_http_handler.h"

#include <cerrno>
#include <chrono>
#include <ctime>

#include "absl/strings/match.h"
#include "shared/buffer_pool.h"
#include "shared/json.h"
#include "shared/log.h"
#include "shared/security/jwt.h"
#include "shared/security/security.h"
#include "shared/status.h"
#include "shared/strings.h"
#include "shared/version.h"
#include "volume/http/request_parsing.h"

namespace kelp::volume {
namespace {

// Blobs up to this size are read whole into memory, verified, then sent; larger ones are
// verified in a streaming pass, then streamed.
constexpr uint64_t kBufferedReadMax = 4 << 20;
constexpr size_t kStreamChunk = 1 << 20;

std::string HexEtag(uint64_t checksum) { return fmt::format("{:016x}", checksum); }

// Upload bodies of 1-8 MiB are read into buffers kept for the next uploads (at most 8): a
// fresh string per upload was zero-filled before the body was read into it, and each of its
// freshly mapped pages faulted; the memset alone was 4 % of a sequential write's samples.
BufferPool& Bodies() {
  static BufferPool* pool =
      new BufferPool(8, 1 << 20, 8 << 20);  // never destroyed: workers may outlive statics
  return *pool;
}

std::string HttpDate(uint64_t unix_ns) {
  thread_local time_t last = -1;
  thread_local std::string text;
  time_t t = static_cast<time_t>(unix_ns / 1000000000);
  if (t != last) {
    tm parts;
    gmtime_r(&t, &parts);
    char buf[64];
    strftime(buf, sizeof buf, "%a, %d %b %Y %H:%M:%S GMT", &parts);
    text = buf;
    last = t;
  }
  return text;
}

bool IsDataMethod(std::string_view m) { return m == "PUT" || m == "POST" || m == "DELETE"; }

// A GET asking where a needle is, for a reader on this machine (docs/volume-http.md, "Local
// reads").
bool IsLocate(const http::Request& req) {
  return req.method() == "GET" && !req.header(kLocalReadHeader).empty();
}

}  // namespace

VolumeHttpHandler::VolumeHttpHandler(Options options, Store* store, BlobService* blobs,
                                     VolumeMetrics* metrics,
                                     std::shared_ptr<const security::SecurityConfig> security)
    : opts_(options),
      store_(store),
      blobs_(blobs),
      metrics_(metrics),
      budget_(options.upload_budget),
      security_(security ? std::move(security) : security::Current()) {}

absl::Status VolumeHttpHandler::Authorize(const http::Request& req, const FileId& fid, bool write) const {
  const security::JwtKey& key = write ? security_->volume_write : security_->volume_read;
  if (!key.enabled()) return absl::OkStatus();
  return security::VerifyFileIdToken(key, security::TokenOf(req.header("Authorization"), req.query("jwt")), fid);
}

bool VolumeHttpHandler::RunInline(const http::Request& req) const {
  const std::string& m = req.method();
  const std::string& path = req.path();
  if (m == "GET" || m == "HEAD") {
    if (path == "/status" || path == "/metrics" || IsLocate(req)) return true;
    auto fid = ParseFidPath(path);
    if (!fid.ok()) return true;  // the 400 is quick
    std::shared_ptr<Volume> v = store_->Get(fid->volume_id);
    if (!v) return true;
    std::optional<uint32_t> size = v->SizeOf(fid->key);
    return !size || *size <= opts_.inline_read_max;
  }
  if (m == "POST" && path == "/sync") return false;  // waits for fdatasync
  if (IsDataMethod(m)) {
    if (req.query("fsync") == "true") return false;
    auto fid = ParseFidPath(path);
    if (!fid.ok()) return true;
    if (req.query("type") == "replicate") return true;
    std::shared_ptr<Volume> v = store_->Get(fid->volume_id);
    return !v || v->copies() == 1;
  }
  return true;  // 405
}

void VolumeHttpHandler::Handle(http::Request& req, http::ResponseWriter& w) {
  auto start = std::chrono::steady_clock::now();
  Outcome out;
  Route(req, w, &out);
  if (metrics_) {
    double secs = std::chrono::duration<double>(std::chrono::steady_clock::now() - start).count();
    metrics_->Record(req.method(), w.status(), out.bytes_in, out.bytes_out, secs);
  }
}

void VolumeHttpHandler::Route(http::Request& req, http::ResponseWriter& w, Outcome* out) {
  const std::string& m = req.method();
  const std::string& path = req.path();
  if (path == "/status" && (m == "GET" || m == "HEAD")) return Status(w);
  if (http::ServeMetrics(req, w)) return;
  if (path == "/sync") {
    if (m == "POST") return Sync(req, w);
    http::Headers h;
    h.Set("Allow", "POST");
    w.Send(405, "{\"error\":\"method not allowed\"}\n", "application/json", h);
    return;
  }
  if (m != "GET" && m != "HEAD" && !IsDataMethod(m)) {
    http::Headers h;
    h.Set("Allow", "GET, HEAD, PUT, POST, DELETE");
    w.Send(405, "{\"error\":\"method not allowed\"}\n", "application/json", h);
    return;
  }
  auto fid = ParseFidPath(path);
  if (!fid.ok()) return w.SendStatus(fid.status());
  if (absl::Status a = Authorize(req, *fid, m != "GET" && m != "HEAD"); !a.ok()) {
    if (!req.body_done()) w.CloseAfter();  // don't read a body we refuse
    return w.SendStatus(a);
  }
  if (IsLocate(req)) return Locate(req, w, *fid);
  if (m == "GET" || m == "HEAD") return Get(req, w, *fid, out);
  if (m == "DELETE") return Delete(req, w, *fid);
  return Put(req, w, *fid, out);
}

void VolumeHttpHandler::Locate(const http::Request& req, http::ResponseWriter& w,
                               const FileId& fid) {
  // Only a process on this machine can open the file; anyone else gets nothing from the path.
  if (!absl::StartsWith(req.peer(), "127.")) {
    return w.SendError(403, "local reads are answered only to this machine (127.0.0.0/8)");
  }
  std::shared_ptr<Volume> v = store_->Get(fid.volume_id);
  if (!v) return w.SendError(404, kelp::StrCat("volume ", fid.volume_id, " is not on this server"));
  const std::string& path = v->dat_path();
  if (path.empty()) return w.SendError(403, "this volume is not on files a local reader can open");
  absl::StatusOr<Volume::Handle> h = v->FindChecked(fid.key, fid.cookie);
  if (!h.ok()) {
    if (ErrnoOf(h.status()) == ENOENT) return w.SendError(404, "not found");
    return w.SendStatus(h.status());
  }
  http::Headers hd;
  hd.Add(kDatPathHeader, path);
  hd.Add(kNeedleOffsetHeader, kelp::StrCat(h->offset));
  hd.Add(kNeedleSizeHeader, kelp::StrCat(h->size));
  (void)w.WriteHead(200, hd, 0);
}

void VolumeHttpHandler::Get(http::Request& req, http::ResponseWriter& w, const FileId& fid,
                            Outcome* out) {
  std::shared_ptr<Volume> v = store_->Get(fid.volume_id);
  if (!v) return w.SendError(404, kelp::StrCat("volume ", fid.volume_id, " is not on this server"));
  std::optional<Volume::Handle> handle = v->Find(fid.key);
  if (!handle) return w.SendError(404, "not found");

  // Verify before a single byte leaves: a corrupt needle is an error, never data. Small
  // needles reuse a per-thread buffer; larger ones get their own, so that 64 workers do not
  // each keep megabytes.
  thread_local std::string small_buf;
  std::string large_buf;
  std::string& buf = handle->size <= opts_.inline_read_max ? small_buf : large_buf;
  http::RangeRequest r = http::ParseRange(req.header("Range"), handle->size);
  // A part of a large needle: only the 64 KiB blocks it covers are read and checked, against
  // the sums taken when the needle was written or first verified whole (Volume::ReadRange).
  const bool part_only = req.method() == "GET" && r.kind == http::RangeRequest::Kind::kPartial &&
                         handle->size >= BlockSums::kMinNeedle;
  absl::StatusOr<DecodedNeedle> n = part_only ? v->ReadRange(*handle, fid.cookie, r.offset, r.length, &buf)
                                    : handle->size <= kBufferedReadMax ? v->Read(*handle, fid.cookie, &buf)
                                                                       : v->Verify(*handle, fid.cookie);
  if (!n.ok()) {
    if (ErrnoOf(n.status()) == ENOENT) return w.SendError(404, "not found");
    return w.SendStatus(n.status());
  }
  const uint64_t size = n->header.size;
  std::string etag = HexEtag(n->checksum);
  http::Headers h;
  h.Add("ETag", kelp::StrCat("\"", etag, "\""));
  h.Add("Last-Modified", HttpDate(n->append_time_ns));
  h.Add("Accept-Ranges", "bytes");

  std::string_view inm = req.header("If-None-Match");
  if (!inm.empty() && http::EtagMatches(inm, etag)) {
    (void)w.WriteHead(304, h, 0);
    return;
  }
  struct {
    uint64_t start, length;
  } range{0, size};
  int status = 200;
  switch (r.kind) {
    case http::RangeRequest::Kind::kWhole:
      break;
    case http::RangeRequest::Kind::kPartial:
      status = 206;
      range = {r.offset, r.length};
      h.Add("Content-Range", http::ContentRange(r.offset, r.length, size));
      break;
    case http::RangeRequest::Kind::kUnsatisfiable:
    case http::RangeRequest::Kind::kMalformed:
      h.Add("Content-Range", kelp::StrCat("bytes */", size));
      w.Send(416, "{\"error\":\"range not satisfiable\"}\n", "application/json", h);
      return;
  }
  h.Add("Content-Type", "application/octet-stream");
  if (req.method() == "GET") out->bytes_out = range.length;
  if (part_only) {
    if (!w.WriteHead(status, h, range.length).ok()) return;
    (void)w.Write(n->data);
    return;
  }
  if (!n->data.empty() || size == 0) {
    if (!w.WriteHead(status, h, range.length).ok()) return;
    (void)w.Write(n->data.substr(range.start, range.length));
    return;
  }
  // Large: stream from the file the needle was found in (immutable, even across vacuum).
  if (!w.WriteHead(status, h, range.length).ok()) return;
  if (req.method() == "HEAD") return;
  std::string chunk(std::min<uint64_t>(kStreamChunk, range.length), '\0');
  for (uint64_t done = 0; done < range.length;) {
    size_t want = std::min<uint64_t>(chunk.size(), range.length - done);
    absl::Status s =
        ReadFully(*handle->file, handle->data_offset() + range.start + done, want, chunk.data());
    if (!s.ok()) {
      spdlog::error("volume {}: streaming {} failed: {}", fid.volume_id, fid.ToString(), s);
      w.CloseAfter();
      return;
    }
    if (!w.Write(std::string_view(chunk.data(), want)).ok()) return;
    done += want;
  }
}

void VolumeHttpHandler::Put(http::Request& req, http::ResponseWriter& w, const FileId& fid,
                            Outcome* out) {
  if (req.content_length() > static_cast<int64_t>(opts_.file_size_limit)) {
    w.CloseAfter();  // don't read a body we refuse
    return w.SendError(413, kelp::StrCat("body of ", req.content_length(),
                                         " bytes exceeds the limit of ", opts_.file_size_limit));
  }
  // Chunked bodies have no length up front: budget for the largest allowed.
  uint64_t expected = req.content_length() >= 0 ? req.content_length() : opts_.file_size_limit;
  uint64_t taken = budget_.Acquire(expected, std::chrono::milliseconds(opts_.upload_wait_ms));
  if (taken == 0) return w.SendError(503, "too many uploads in progress; retry later");
  struct Releaser {
    UploadBudget& b;
    uint64_t n;
    ~Releaser() { b.Release(n); }
  } releaser{budget_, taken};
  struct Kept {
    BufferPool::Buffer b;
    ~Kept() { Bodies().Give(std::move(b)); }
  } kept;
  std::string chunked_body;  // a chunked body, whose length is not known up front
  std::string_view body;
  if (req.content_length() > 0) {
    const size_t n = static_cast<size_t>(req.content_length());
    kept.b = Bodies().Take(n);
    auto got = req.ReadFull(kept.b.get(), n);
    if (!got.ok()) return w.SendStatus(got.status());
    body = std::string_view(kept.b.get(), *got);
  } else if (req.content_length() < 0) {
    auto all = req.ReadAll(opts_.file_size_limit);
    if (!all.ok()) {
      if (ErrnoOf(all.status()) == EFBIG) w.CloseAfter();
      return w.SendStatus(all.status());
    }
    chunked_body = std::move(*all);
    body = chunked_body;
  }
  out->bytes_in = body.size();
  std::string_view data = body;
  std::string_view name;
  std::string_view ctype = req.header("Content-Type");
  if (IsMultipart(ctype)) {
    auto part = ParseMultipartFile(ctype, body);
    if (!part.ok()) return w.SendStatus(part.status());
    data = part->data;
    name = part->filename;
  }
  const bool fsync = req.query("fsync") == "true";
  const bool from_client = req.query("type") != "replicate";
  auto r = blobs_->Write(fid, data, fsync, from_client);
  if (!r.ok()) return w.SendStatus(r.status());
  std::string etag = HexEtag(r->checksum);
  http::Headers h;
  h.Add("ETag", kelp::StrCat("\"", etag, "\""));
  w.SendJson(201,
             kelp::StrCat("{\"name\":", JsonString(name), ",\"size\":", r->size, ",\"eTag\":\"",
                          etag, "\"}\n"),
             h);
}

void VolumeHttpHandler::Delete(http::Request& req, http::ResponseWriter& w, const FileId& fid) {
  const bool fsync = req.query("fsync") == "true";
  const bool from_client = req.query("type") != "replicate";
  auto r = blobs_->Delete(fid, fsync, from_client);
  if (!r.ok()) {
    if (ErrnoOf(r.status()) == ENOENT) return w.SendError(404, "not found");
    return w.SendStatus(r.status());
  }
  w.SendJson(202, kelp::StrCat("{\"size\":", *r, "}\n"));
}

void VolumeHttpHandler::Sync(http::Request& req, http::ResponseWriter& w) {
  std::vector<uint32_t> vids;
  const std::string all = req.query("volumes").value_or("");
  std::string_view list = all;
  while (!list.empty()) {
    size_t comma = list.find(',');
    std::string_view item = list.substr(0, comma);
    uint32_t vid = 0;
    if (!kelp::ParseInt(item, &vid) || vid == 0) {
      return w.SendError(400, kelp::StrCat("bad volume id \"", item, "\" in volumes="));
    }
    vids.push_back(vid);
    list = comma == std::string_view::npos ? std::string_view() : list.substr(comma + 1);
  }
  if (vids.empty()) return w.SendError(400, "volumes= names no volume");
  absl::Status s = blobs_->SyncVolumes(vids, req.query("type") != "replicate");
  if (!s.ok()) {
    if (ErrnoOf(s) == ENOENT) return w.SendError(404, std::string(s.message()));
    return w.SendStatus(s);
  }
  w.SendJson(200, kelp::StrCat("{\"synced\":", vids.size(), "}\n"));
}

void VolumeHttpHandler::Status(http::ResponseWriter& w) {
  std::string j =
      kelp::StrCat("{\"Version\":\"", kVersion, "\",\"MaxVolumes\":", store_->max_volumes(),
                   ",\"VolumeSizeLimit\":", store_->volume_size_limit(), ",\"Volumes\":[");
  bool first = true;
  for (const auto& v : store_->List()) {
    Volume::Stats s = v->GetStats();
    kelp::StrAppend(&j, first ? "" : ",", "{\"Id\":", v->id(),
                    ",\"Collection\":", JsonString(v->collection()), ",\"Replication\":\"",
                    v->replication(), "\",\"Size\":", s.size, ",\"FileCount\":", s.file_count,
                    ",\"DeleteCount\":", s.delete_count, ",\"DeletedByteCount\":", s.deleted_bytes,
                    ",\"GarbageRatio\":", fmt::format("{:.4f}", v->GarbageRatio()),
                    ",\"MaxKey\":", s.max_key, ",\"ReadOnly\":", s.read_only,
                    ",\"IndexMemory\":", s.map_bytes, "}");
    first = false;
  }
  j += "],\"DiskStatuses\":[";
  if (auto du = store_->GetDiskUsage(); du.ok()) {
    kelp::StrAppend(&j, "{\"Dir\":", JsonString(store_->dir()), ",\"All\":", du->total,
                    ",\"Free\":", du->free, ",\"Used\":", du->total - std::min(du->total, du->free),
                    "}");
  }
  kelp::StrAppend(&j, "],\"ResidentBytes\":", ResidentBytes(), "}\n");
  w.SendJson(200, j);
}

}  // namespace kelp::volume
