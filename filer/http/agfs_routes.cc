#include "filer/http/agfs_routes.h"

#include <sys/stat.h>

#include <cerrno>
#include <initializer_list>

#include "filer/http/agfs_body.h"

#include "filer/client/limits.h"
#include "filer/http/content.h"
#include "filer/http/format.h"
#include "filer/http/serve.h"
#include "shared/status.h"
#include "shared/strings.h"
#include "shared/version.h"

namespace kelp::filer {
namespace {

constexpr size_t kListPage = 1024;

// AGFS routes that need its plugin system, file handles or server-side scans.
bool Unsupported(std::string_view route) {
  for (std::string_view r : {"grep", "digest", "mounts", "mount", "unmount", "plugins"}) {
    if (route == r || route.rfind(StrCat(r, "/"), 0) == 0) return true;
  }
  return route == "handles" || route.rfind("handles/", 0) == 0;
}

bool MethodIn(const http::Request& req, std::initializer_list<std::string_view> methods) {
  for (auto m : methods) {
    if (req.method() == m) return true;
  }
  return false;
}

void SendMessage(http::ResponseWriter& w, int status, std::string_view text) {
  w.SendJson(status, MessageJson(text));
}

std::string_view TypeName(uint32_t mode) {
  switch (mode & S_IFMT) {
    case S_IFDIR:
      return "directory";
    case S_IFLNK:
      return "symlink";
    case S_IFREG:
      return "file";
    default:
      return "special";
  }
}

// AGFS's FileInfoResponse.
void AppendFileInfo(std::string* out, std::string_view name, const Attr& a) {
  out->append("{\"name\":");
  AppendJsonString(out, name);
  StrAppend(out, ",\"size\":", a.size(), ",\"mode\":", GoFileMode(a.mode()), ",\"modTime\":\"",
            Rfc3339Nano(a.mtime_ns()), "\",\"isDir\":", S_ISDIR(a.mode()),
            ",\"meta\":{\"name\":\"kelp\",\"type\":\"", TypeName(a.mode()), "\"}}");
}

// ?name= as an int64: absent -> dflt; junk -> nullopt.
std::optional<int64_t> IntParam(const http::Request& req, std::string_view name, int64_t dflt) {
  auto v = req.query(name);
  if (!v || v->empty()) return dflt;
  int64_t x = 0;
  if (!ParseInt(*v, &x)) return std::nullopt;
  return x;
}

absl::StatusOr<std::string> JsonBody(http::Request& req) { return req.ReadAll(kMaxAgfsJsonBody); }

}  // namespace

bool AgfsRoutes::RunInline(const http::Request& req) const {
  if (!opts_.inline_small) return false;
  std::string_view route = std::string_view(req.path()).substr(8);
  if (route == "files") {
    auto raw = req.query("path");
    auto p = CleanHttpPath(raw.value_or(""));
    if (!p.ok()) return true;  // a quick 400
    if (req.method() == "GET" || req.method() == "HEAD") {
      if (req.query("offset") || req.query("size")) return false;
      auto a = ops_->core()->ResolvePath(p->path);
      if (!a.ok()) return true;
      if (!S_ISREG(a->mode()) || a->size() > kMaxInlineSize) return false;
      auto g = ops_->core()->GetChunks(a->ino());
      if (!g.ok() || !InlineOnly(*g)) return false;
      StashProbe(req, std::move(*g));
      return true;
    }
    if (req.method() == "PUT") {
      return req.content_length() >= 0 && req.content_length() <= kMaxInlineSize &&
             !req.query("flags") && !req.query("offset");
    }
    if (req.method() == "DELETE") return req.query("recursive").value_or("") != "true";
    return req.method() == "POST";
  }
  // Metadata only: no volume server, no tree walk.
  return route == "health" || route == "ready" || route == "version" || route == "capabilities" ||
         route == "stat" || route == "readlink" || route == "rename" || route == "chmod" ||
         route == "touch" || route == "mkdir" || (route == "directories" && req.method() == "POST");
}

void AgfsRoutes::Handle(http::Request& req, http::ResponseWriter& w) {
  std::string_view route = std::string_view(req.path()).substr(8);
  auto only = [&](std::initializer_list<std::string_view> methods) {
    if (MethodIn(req, methods)) return true;
    w.SendError(405, "method not allowed");
    return false;
  };
  if (route == "health") return Health(w);
  if (route == "ready") return only({"GET", "HEAD"}) ? Health(w) : void();
  if (route == "version") {
    if (!only({"GET", "HEAD"})) return;
    return w.SendJson(200, StrCat("{\"version\":\"", kVersion,
                                  "\",\"gitCommit\":\"unknown\",\"buildTime\":\"unknown\"}\n"));
  }
  if (route == "capabilities") {
    if (!only({"GET", "HEAD"})) return;
    return w.SendJson(
        200, StrCat("{\"version\":\"", kVersion, "\",\"features\":[\"stream\",\"touch\"]}\n"));
  }
  if (Unsupported(route))
    return w.SendError(501, StrCat("/api/v1/", route, " is not supported by kelp"));

  const bool files = route == "files",
             dirs = route == "directories" || route == "list" || route == "mkdir";
  if (!files && !dirs && route != "stat" && route != "rename" && route != "chmod" &&
      route != "touch" && route != "truncate" && route != "symlink" && route != "readlink" &&
      route != "write") {
    return w.SendError(404, StrCat("no such API: ", req.path()));
  }
  std::string raw = req.query("path").value_or("");
  if (raw.empty()) {
    if (!((route == "directories" && req.method() == "GET") || route == "list")) {
      return w.SendError(400, "path parameter is required");
    }
    raw = "/";
  }
  auto cp = CleanHttpPath(raw);
  if (!cp.ok()) return w.SendStatus(cp.status());
  const CleanPath& p = *cp;

  if (files) {
    if (req.method() == "GET" || req.method() == "HEAD") return ReadFile(req, w, p);
    if (req.method() == "PUT") return WriteFile(req, w, p, false);
    if (req.method() == "POST") {
      auto r = ops_->CreateFile(p, true);
      return r.ok() ? SendMessage(w, 201, "file created") : w.SendStatus(r.status());
    }
    if (req.method() != "DELETE") return w.SendError(405, "method not allowed");
  }
  if (req.method() == "DELETE" && (files || route == "directories")) {
    absl::Status s = ops_->Remove(p, req.query("recursive").value_or("") == "true");
    return s.ok() ? SendMessage(w, 200, "deleted") : w.SendStatus(s);
  }
  if (route == "write") return only({"POST"}) ? WriteFile(req, w, p, true) : void();
  if (route == "list" || (route == "directories" && req.method() == "GET")) {
    return only({"GET", "HEAD"}) ? ListDir(req, w, p) : void();
  }
  if (route == "mkdir" || route == "directories") {
    if (!only({"POST"})) return;
    uint32_t mode = 0755;
    if (auto m = req.query("mode"); m && !m->empty()) {
      if (!ParseInt(*m, &mode, 8) || mode > 07777) return w.SendError(400, "invalid mode");
    }
    auto r = ops_->Mkdir(p, mode);
    return r.ok() ? SendMessage(w, 201, "directory created") : w.SendStatus(r.status());
  }
  if (route == "stat") return only({"GET", "HEAD"}) ? Stat(req, w, p) : void();
  if (route == "rename") return only({"POST"}) ? Rename(req, w, p) : void();
  if (route == "chmod") return only({"POST"}) ? Chmod(req, w, p) : void();
  if (route == "touch") {
    if (!only({"POST"})) return;
    auto r = ops_->Touch(p);
    return r.ok() ? SendMessage(w, 200, "touched") : w.SendStatus(r.status());
  }
  if (route == "truncate") {
    if (!only({"POST"})) return;
    auto size = IntParam(req, "size", -1);
    if (!req.query("size")) return w.SendError(400, "size parameter is required");
    if (!size) return w.SendError(400, "invalid size parameter");
    if (*size < 0) return w.SendError(400, "size must be non-negative");
    auto r = ops_->Truncate(p, static_cast<uint64_t>(*size));
    return r.ok() ? SendMessage(w, 200, "truncated") : w.SendStatus(r.status());
  }
  if (route == "symlink") return only({"POST"}) ? Symlink(req, w, p) : void();
  if (route == "readlink") {
    if (!only({"GET", "HEAD"})) return;
    auto a = ops_->Stat(p);
    if (!a.ok()) return w.SendStatus(a.status());
    if (!S_ISLNK(a->mode()))
      return w.SendStatus(PosixError(EINVAL, StrCat("not a symlink: ", p.path)));
    return w.SendJson(200, StrCat("{\"target\":", JsonString(a->symlink_target()), "}\n"));
  }
}

void AgfsRoutes::ReadFile(http::Request& req, http::ResponseWriter& w, const CleanPath& p) {
  auto offset = IntParam(req, "offset", 0);
  if (!offset || *offset < 0) return w.SendError(400, "invalid offset parameter");
  auto size = IntParam(req, "size", -1);
  if (!size || *size < -1) return w.SendError(400, "invalid size parameter");
  std::optional<GetChunksResponse> g = TakeProbe(req);
  if (!g) {
    auto a = ops_->Stat(p);
    if (!a.ok()) return w.SendStatus(a.status());
    if (S_ISDIR(a->mode()))
      return w.SendStatus(PosixError(EISDIR, StrCat("is a directory: ", p.path)));
    if (!S_ISREG(a->mode()))
      return w.SendStatus(PosixError(EINVAL, StrCat("not a regular file: ", p.path)));
    auto c = ops_->core()->GetChunks(a->ino());
    if (!c.ok()) return w.SendStatus(c.status());
    g = std::move(*c);
  }
  const uint64_t file_size = g->attr().size();
  const uint64_t from = std::min<uint64_t>(*offset, file_size);
  uint64_t length = file_size - from;
  if (*size >= 0) length = std::min<uint64_t>(length, *size);
  http::Headers h;
  h.Set("Content-Type", "application/octet-stream");
  ServeFileBytes(w, req.method() == "HEAD", 200, h, *g, from, length, *ops_->io());
}

void AgfsRoutes::WriteFile(http::Request& req, http::ResponseWriter& w, const CleanPath& p,
                           bool json_body) {
  FileWrite fw;
  fw.make_parents = false;
  fw.size_hint = req.content_length();
  auto offset = IntParam(req, "offset", -1);
  if (!offset || *offset < -1) return w.SendError(400, "invalid offset parameter");
  bool append = false, create = false, exclusive = false, truncate = false, sync = false;
  std::string flags = req.query("flags").value_or("");
  for (size_t pos = 0; pos < flags.size();) {
    size_t comma = flags.find(',', pos);
    if (comma == std::string::npos) comma = flags.size();
    std::string_view f = std::string_view(flags).substr(pos, comma - pos);
    pos = comma + 1;
    if (f == "append")
      append = true;
    else if (f == "create")
      create = true;
    else if (f == "exclusive")
      exclusive = true;
    else if (f == "truncate")
      truncate = true;
    else if (f == "sync")
      sync = true;
    else if (!f.empty() && f != "none")
      return w.SendError(400, StrCat("invalid flag: ", f));
  }
  if (flags.empty() && *offset < 0) {
    // AGFS's default: create if needed, replace the content.
    fw.mode = FileWrite::Mode::kReplace;
  } else {
    fw.create = create;
    fw.exclusive = create && exclusive;
    fw.sync = sync;
    fw.offset = *offset < 0 ? 0 : static_cast<uint64_t>(*offset);
    fw.mode = append     ? FileWrite::Mode::kAppend
              : truncate ? FileWrite::Mode::kReplace
                         : FileWrite::Mode::kAt;
  }
  absl::StatusOr<FileWriteResult> r;
  if (json_body && req.header("Content-Type").find("application/json") != std::string_view::npos) {
    auto raw = JsonBody(req);
    if (!raw.ok()) return w.SendStatus(raw.status());
    auto data = DecodeWriteBody(*raw);
    if (!data.ok()) return w.SendStatus(data.status());
    StringBody body(std::move(*data));
    fw.size_hint = -1;
    r = ops_->Write(p, body, fw);
  } else {
    RequestBody body(req);
    r = ops_->Write(p, body, fw);
  }
  if (!r.ok()) return w.SendStatus(r.status());
  w.SendJson(200, StrCat("{\"message\":\"Written ", r->written, " bytes\",\"written\":", r->written,
                         "}\n"));
}

void AgfsRoutes::ListDir(http::Request& req, http::ResponseWriter& w, const CleanPath& p) {
  auto dir = ops_->ResolveDir(p.path);
  if (!dir.ok()) return w.SendStatus(dir.status());
  JsonStream out(w);
  std::string& buf = out.buf();
  buf = "{\"files\":[";
  std::string after;
  bool first = true;
  std::vector<DirEntry> page;
  for (;;) {
    page.clear();
    absl::Status s =
        ops_->core()->ListByName(dir->ino(), after, kListPage, true, [&](DirEntry&& e) {
          page.push_back(std::move(e));
          return true;
        });
    if (!s.ok()) return out.Fail(s);
    for (const DirEntry& e : page) {
      if (!first) buf += ',';
      first = false;
      AppendFileInfo(&buf, e.name(), e.attr());
    }
    if (!page.empty()) after = page.back().name();
    if (absl::Status f = out.MaybeFlush(); !f.ok()) return out.Fail(f);
    if (page.size() < kListPage) break;
  }
  buf += "]}\n";
  if (absl::Status f = out.Finish(); !f.ok()) out.Fail(f);
}

void AgfsRoutes::Stat(http::Request& req, http::ResponseWriter& w, const CleanPath& p) {
  auto a = ops_->Stat(p);
  if (!a.ok()) return w.SendStatus(a.status());
  std::string out;
  AppendFileInfo(&out, p.is_root() ? std::string_view("/") : p.name(), *a);
  out += '\n';
  w.SendJson(200, out);
}

void AgfsRoutes::Rename(http::Request& req, http::ResponseWriter& w, const CleanPath& p) {
  auto raw = JsonBody(req);
  if (!raw.ok()) return w.SendStatus(raw.status());
  auto to = DecodeRenameBody(*raw);
  if (!to.ok()) return w.SendStatus(to.status());
  auto r = ops_->Rename(p, *to);
  if (!r.ok()) return w.SendStatus(r.status());
  SendMessage(w, 200, "renamed");
}

void AgfsRoutes::Chmod(http::Request& req, http::ResponseWriter& w, const CleanPath& p) {
  auto raw = JsonBody(req);
  if (!raw.ok()) return w.SendStatus(raw.status());
  auto mode = DecodeChmodBody(*raw);
  if (!mode.ok()) return w.SendStatus(mode.status());
  auto r = ops_->Chmod(p, *mode);
  if (!r.ok()) return w.SendStatus(r.status());
  SendMessage(w, 200, "permissions changed");
}

void AgfsRoutes::Symlink(http::Request& req, http::ResponseWriter& w, const CleanPath& p) {
  auto raw = JsonBody(req);
  if (!raw.ok()) return w.SendStatus(raw.status());
  auto target = DecodeSymlinkBody(*raw);
  if (!target.ok()) return w.SendStatus(target.status());
  auto r = ops_->Symlink(p, *target);
  if (!r.ok()) return w.SendStatus(r.status());
  SendMessage(w, 201, "symlink created");
}

void AgfsRoutes::Health(http::ResponseWriter& w) {
  w.SendJson(200, StrCat("{\"status\":\"healthy\",\"version\":\"", kVersion,
                         "\",\"gitCommit\":\"unknown\",\"buildTime\":\"unknown\",\"ready\":true,"
                         "\"degraded\":false,"
                         "\"mounts\":{\"total\":0,\"pending\":0,\"mounted\":0,\"failed\":0}}\n"));
}

}  // namespace kelp::filer
