// The SeaweedFS-style dialect of the filer's HTTP API, as `weed filer` speaks it
// (docs/filer-http.md): the URL path is the file path.
//   PUT|POST /path          body (raw, or one multipart file part) becomes the file; parents
//                           are created; ?op=append appends; ?fsync=true syncs; 201 {"name","size"}
//   POST /dir/ (multipart)  the part's filename names the file in /dir/
//   POST|PUT /dir/ (empty)  mkdir -p
//   POST /to?mv.from=/from  rename
//   GET|HEAD /path          the file, with Range, ETag/If-None-Match, Last-Modified/
//                           If-Modified-Since, Content-Type; streamed
//   GET /dir or /dir/       JSON listing, ?limit= & ?lastFileName= paging by name
//   DELETE /path            file or empty directory; ?recursive=true for a tree; 204
// Threads: thread-safe; RunInline is called on event-loop threads, Handle anywhere.
#pragma once

#include "filer/http/file_ops.h"
#include "shared/http/http_server.h"

namespace kelp::filer {

class SeaweedRoutes {
 public:
  struct Options {
    // Entries a listing returns when ?limit= is absent (SeaweedFS's -dirListLimit).
    // Default: 100,000.
    size_t default_list_limit = 100000;
    // Answer reads of files whose content is all inline, and small whole-file writes, on
    // the event loop. Default: true.
    bool inline_small = true;
  };
  SeaweedRoutes(FileOps* ops, Options options) : ops_(ops), opts_(options) {}

  bool RunInline(const http::Request& req) const;
  void Handle(http::Request& req, http::ResponseWriter& w);

 private:
  void Get(http::Request& req, http::ResponseWriter& w, const CleanPath& p);
  void List(http::Request& req, http::ResponseWriter& w, const CleanPath& p, const Attr& dir);
  void Write(http::Request& req, http::ResponseWriter& w, CleanPath p);
  void Move(http::Request& req, http::ResponseWriter& w, const CleanPath& to,
            const std::string& from);
  void Delete(http::Request& req, http::ResponseWriter& w, const CleanPath& p);

  FileOps* const ops_;
  const Options opts_;
};

}  // namespace kelp::filer
