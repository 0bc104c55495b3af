// The AGFS-compatible dialect of the filer's HTTP API under /api/v1/, with AGFS's query
// parameters, JSON shapes ({"message": ...} on success, {"error": ...} on failure) and
// status codes (201 for creates, 200 otherwise), so AGFS clients and benchmark scripts run
// unchanged (docs/filer-http.md lists every route). Paths come in ?path= and are absolute
// in the filer's tree. Routes AGFS has that a filesystem without plugins or handles cannot
// serve (grep, digest, handles, mounts, plugins) answer 501.
// Threads: thread-safe; RunInline is called on event-loop threads, Handle anywhere.
#pragma once

#include "filer/http/file_ops.h"
#include "shared/http/http_server.h"

namespace kelp::filer {

class AgfsRoutes {
 public:
  struct Options {
    // Answer metadata calls, reads of files whose content is all inline and small
    // whole-file writes on the event loop. Default: true.
    bool inline_small = true;
  };
  AgfsRoutes(FileOps* ops, Options options) : ops_(ops), opts_(options) {}

  static bool Owns(const http::Request& req) { return req.path().rfind("/api/v1/", 0) == 0; }
  bool RunInline(const http::Request& req) const;
  void Handle(http::Request& req, http::ResponseWriter& w);

 private:
  void ReadFile(http::Request& req, http::ResponseWriter& w, const CleanPath& p);
  void WriteFile(http::Request& req, http::ResponseWriter& w, const CleanPath& p, bool json_body);
  void ListDir(http::Request& req, http::ResponseWriter& w, const CleanPath& p);
  void Stat(http::Request& req, http::ResponseWriter& w, const CleanPath& p);
  void Rename(http::Request& req, http::ResponseWriter& w, const CleanPath& p);
  void Chmod(http::Request& req, http::ResponseWriter& w, const CleanPath& p);
  void Symlink(http::Request& req, http::ResponseWriter& w, const CleanPath& p);
  void Health(http::ResponseWriter& w);

  FileOps* const ops_;
  const Options opts_;
};

}  // namespace kelp::filer
