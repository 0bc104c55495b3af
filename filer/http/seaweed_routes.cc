#include "filer/http/seaweed_routes.h"

#include <sys/stat.h>

#include <cerrno>

#include "filer/client/limits.h"
#include "filer/http/content.h"
#include "filer/http/format.h"
#include "filer/http/serve.h"
#include "shared/http/http_parser.h"
#include "shared/http/range.h"
#include "shared/status.h"
#include "shared/strings.h"

namespace kelp::filer {
namespace {

constexpr size_t kListPage = 1024;

bool IsGet(const http::Request& req) { return req.method() == "GET" || req.method() == "HEAD"; }
bool IsWrite(const http::Request& req) { return req.method() == "PUT" || req.method() == "POST"; }

// A Content-Type worth keeping with the file: not the ones clients send by default.
std::string MimeToKeep(std::string_view ct) {
  size_t semi = ct.find(';');
  std::string_view base = ct.substr(0, semi);
  if (base.empty() || http::EqualsIgnoreCase(base, "application/octet-stream") ||
      http::EqualsIgnoreCase(base, "application/x-www-form-urlencoded") ||
      (base.size() >= 10 && http::EqualsIgnoreCase(base.substr(0, 10), "multipart/"))) {
    return "";
  }
  return std::string(ct);
}

// 304 Not Modified: If-None-Match decides when present, else If-Modified-Since.
bool NotModified(const http::Request& req, std::string_view etag, int64_t mtime_ns) {
  std::string_view inm = req.header("If-None-Match");
  if (!inm.empty()) return http::EtagMatches(inm, etag);
  std::string_view ims = req.header("If-Modified-Since");
  int64_t since = ims.empty() ? -1 : ParseHttpDate(ims);
  return since >= 0 && mtime_ns / 1000000000 <= since;
}

void AppendEntry(std::string* out, std::string_view dir_path, const DirEntry& e) {
  const Attr& a = e.attr();
  out->append("{\"FullPath\":");
  AppendJsonString(out, dir_path == "/" ? StrCat("/", e.name()) : StrCat(dir_path, "/", e.name()));
  StrAppend(out, ",\"Mtime\":\"", Rfc3339Nano(a.mtime_ns()), "\",\"Crtime\":\"",
            Rfc3339Nano(a.crtime_ns()), "\",\"Mode\":", GoFileMode(a.mode()), ",\"Uid\":", a.uid(),
            ",\"Gid\":", a.gid(),
            ",\"Mime\":\"\",\"TtlSec\":0,\"UserName\":\"\",\"GroupNames\":null,\"SymlinkTarget\":");
  AppendJsonString(out, a.symlink_target());
  StrAppend(out, ",\"Md5\":null,\"FileSize\":", S_ISDIR(a.mode()) ? 0 : a.size(),
            ",\"Rdev\":", a.rdev(), ",\"Inode\":", a.ino(),
            ",\"Extended\":null,\"HardLinkId\":null,\"HardLinkCounter\":",
            S_ISDIR(a.mode()) ? 0 : a.nlink(), ",\"Content\":null,\"Remote\":null,\"Quota\":0}");
}

}  // namespace

bool SeaweedRoutes::RunInline(const http::Request& req) const {
  if (!opts_.inline_small) return false;
  auto p = CleanHttpPath(req.path());
  if (!p.ok()) return true;  // a quick 400
  if (IsGet(req)) {
    if (p->trailing_slash || !req.raw_query().empty()) return false;
    auto a = ops_->core()->ResolvePath(p->path);
    if (!a.ok()) return true;  // a quick 404
    if (!S_ISREG(a->mode()) || a->size() > kMaxInlineSize) return false;
    auto g = ops_->core()->GetChunks(a->ino());
    if (!g.ok() || !InlineOnly(*g)) return false;
    StashProbe(req, std::move(*g));
    return true;
  }
  if (IsWrite(req)) {
    // A small whole-file write is a few store writes, no volume server.
    return req.content_length() >= 0 && req.content_length() <= kMaxInlineSize &&
           !p->trailing_slash && req.raw_query().empty() &&
           MultipartBoundary(req.header("Content-Type")).empty();
  }
  if (req.method() == "DELETE") return req.raw_query().empty();  // no tree walk
  return false;
}

void SeaweedRoutes::Handle(http::Request& req, http::ResponseWriter& w) {
  auto p = CleanHttpPath(req.path());
  if (!p.ok()) return w.SendStatus(p.status());
  if (IsGet(req)) return Get(req, w, *p);
  if (IsWrite(req)) {
    if (req.method() == "POST") {
      if (auto from = req.query("mv.from")) return Move(req, w, *p, *from);
    }
    return Write(req, w, std::move(*p));
  }
  if (req.method() == "DELETE") return Delete(req, w, *p);
  w.SendError(405, StrCat("method ", req.method(), " not allowed"));
}

void SeaweedRoutes::Get(http::Request& req, http::ResponseWriter& w, const CleanPath& p) {
  FilerService* fs = ops_->core();
  std::optional<GetChunksResponse> g = TakeProbe(req);
  if (!g) {
    auto a = fs->ResolvePath(p.path);
    if (!a.ok()) return w.SendStatus(a.status());
    if (S_ISDIR(a->mode())) return List(req, w, p, *a);
    if (p.trailing_slash)
      return w.SendStatus(PosixError(ENOTDIR, StrCat("not a directory: ", p.path)));
    if (!S_ISREG(a->mode()))
      return w.SendStatus(PosixError(EINVAL, StrCat("not a regular file: ", p.path)));
    auto c = fs->GetChunks(a->ino());
    if (!c.ok()) return w.SendStatus(c.status());
    g = std::move(*c);
  }
  const Attr& attr = g->attr();
  const uint64_t size = attr.size();
  http::Headers h;
  std::string etag = ContentEtag(*g);
  h.Set("ETag", etag);
  h.Set("Last-Modified", HttpDate(attr.mtime_ns()));
  h.Set("Accept-Ranges", "bytes");
  if (NotModified(req, etag, attr.mtime_ns())) {
    (void)w.WriteHead(304, h, 0);
    return;
  }
  auto stored = fs->GetXattr(attr.ino(), kMimeXattr);
  std::string_view by_ext = MimeByExtension(p.name());
  h.Set("Content-Type",
        stored.ok() ? std::string_view(*stored)
                    : (by_ext.empty() ? std::string_view("application/octet-stream") : by_ext));

  std::string_view range_header = req.header("Range");
  std::string_view if_range = req.header("If-Range");
  if (!if_range.empty() && if_range != etag) range_header = {};  // changed since: send it all
  http::RangeRequest r = http::ParseRange(range_header, size);
  switch (r.kind) {
    case http::RangeRequest::Kind::kWhole:
      return ServeFileBytes(w, req.method() == "HEAD", 200, h, *g, 0, size, *ops_->io());
    case http::RangeRequest::Kind::kPartial:
      h.Set("Content-Range", http::ContentRange(r.offset, r.length, size));
      return ServeFileBytes(w, req.method() == "HEAD", 206, h, *g, r.offset, r.length, *ops_->io());
    case http::RangeRequest::Kind::kUnsatisfiable:
    case http::RangeRequest::Kind::kMalformed: {
      http::Headers eh;
      eh.Set("Content-Range", StrCat("bytes */", size));
      std::string why = r.kind == http::RangeRequest::Kind::kMalformed
                            ? "malformed Range header"
                            : StrCat("range not satisfiable for size ", size);
      return w.SendJson(416, StrCat("{\"error\":", JsonString(why), "}\n"), eh);
    }
  }
}

void SeaweedRoutes::List(http::Request& req, http::ResponseWriter& w, const CleanPath& p,
                         const Attr& dir) {
  size_t limit = opts_.default_list_limit;
  if (auto l = req.query("limit"); l && !l->empty()) {
    if (!ParseInt(*l, &limit) || limit == 0)
      return w.SendError(400, "limit must be a positive integer");
  }
  std::string after = req.query("lastFileName").value_or("");
  if (after.find('/') != std::string::npos || after.find('\0') != std::string::npos) {
    return w.SendError(400, "lastFileName must be a name, not a path");
  }
  JsonStream out(w);
  std::string& buf = out.buf();
  buf = "{\"Path\":";
  AppendJsonString(&buf, p.path);
  buf += ",\"Entries\":[";
  if (req.method() == "HEAD") {
    http::Headers h;
    h.Set("Content-Type", "application/json");
    (void)w.WriteHead(200, h, -1);
    return;
  }
  size_t emitted = 0;
  bool more = false;
  std::vector<DirEntry> page;
  for (;;) {
    page.clear();
    size_t want = std::min(kListPage, limit - emitted + 1);  // one past the limit: is there more?
    absl::Status s = ops_->core()->ListByName(dir.ino(), after, want, true, [&](DirEntry&& e) {
      page.push_back(std::move(e));
      return true;
    });
    if (!s.ok()) return out.Fail(s);
    for (const DirEntry& e : page) {
      if (emitted == limit) {
        more = true;
        break;
      }
      if (emitted > 0) buf += ',';
      AppendEntry(&buf, p.path, e);
      after = e.name();
      ++emitted;
    }
    if (absl::Status f = out.MaybeFlush(); !f.ok()) return out.Fail(f);
    if (more || page.size() < want) break;
  }
  StrAppend(&buf, "],\"Limit\":", limit, ",\"LastFileName\":");
  AppendJsonString(&buf, emitted > 0 ? after : req.query("lastFileName").value_or(""));
  StrAppend(&buf, ",\"ShouldDisplayLoadMore\":", more, ",\"EmptyFolder\":", emitted == 0, "}\n");
  if (absl::Status f = out.Finish(); !f.ok()) out.Fail(f);
}

void SeaweedRoutes::Write(http::Request& req, http::ResponseWriter& w, CleanPath p) {
  FileWrite fw;
  fw.make_parents = true;
  if (auto op = req.query("op"); op && *op == "append") fw.mode = FileWrite::Mode::kAppend;
  fw.sync = req.query("fsync").value_or("") == "true";
  fw.size_hint = req.content_length();
  std::string boundary = MultipartBoundary(req.header("Content-Type"));
  RequestBody raw(req);
  if (boundary.empty()) {
    if (p.trailing_slash || p.is_root()) {
      if (req.content_length() != 0) {
        return w.SendError(400,
                           "a directory path takes no body (or a multipart body with a filename)");
      }
      auto d = ops_->MkdirAll(p.path, 0755);
      if (!d.ok()) return w.SendStatus(d.status());
      return w.SendJson(201, StrCat("{\"name\":", JsonString(p.name()), ",\"size\":0}\n"));
    }
    fw.mime = MimeToKeep(req.header("Content-Type"));
    auto r = ops_->Write(p, raw, fw);
    if (!r.ok()) return w.SendStatus(r.status());
    return w.SendJson(201,
                      StrCat("{\"name\":", JsonString(p.name()), ",\"size\":", r->written, "}\n"));
  }
  MultipartFileBody part(&raw, boundary);
  if (absl::Status s = part.Open(); !s.ok()) return w.SendStatus(s);
  if (p.trailing_slash || p.is_root()) {
    if (part.filename().empty())
      return w.SendError(400, "the file part has no filename to name the file by");
    auto named = CleanHttpPath(p.Child(part.filename()).path);
    if (!named.ok()) return w.SendStatus(named.status());
    p = std::move(*named);
  }
  fw.size_hint = -1;
  fw.mime = MimeToKeep(part.content_type());
  auto r = ops_->Write(p, part, fw);
  if (!r.ok()) return w.SendStatus(r.status());
  w.SendJson(201, StrCat("{\"name\":", JsonString(p.name()), ",\"size\":", r->written, "}\n"));
}

void SeaweedRoutes::Move(http::Request& req, http::ResponseWriter& w, const CleanPath& to,
                         const std::string& from) {
  auto src = CleanHttpPath(from);
  if (!src.ok()) return w.SendStatus(src.status());
  CleanPath dst = to;
  // Into a directory when the target names one (as `mv a dir/` does).
  if (auto t = ops_->Stat(to); to.trailing_slash || (t.ok() && S_ISDIR(t->mode()))) {
    dst = to.Child(src->name());
  }
  auto r = ops_->Rename(*src, dst);
  if (!r.ok()) return w.SendStatus(r.status());
  w.Send(204, "", "");
}

void SeaweedRoutes::Delete(http::Request& req, http::ResponseWriter& w, const CleanPath& p) {
  bool recursive = req.query("recursive").value_or("") == "true";
  absl::Status s = ops_->Remove(p, recursive);
  if (!s.ok()) return w.SendStatus(s);
  w.Send(204, "", "");
}

}  // namespace kelp::filer
