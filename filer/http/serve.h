// Response plumbing both HTTP dialects share: streaming a file's bytes into a response,
// a JSON body that is sent with Content-Length when small and chunked when it grows (a
// listing of any size in constant memory), and the hand-off of what RunInline learned about
// a read to the Handle call that follows it on the same event-loop thread.
//
// Threads: JsonStream and ServeFileBytes belong to one request's thread. The probe stash is
// thread-local.
#pragma once

#include <cstdint>
#include <optional>
#include <string>
#include <string_view>

#include "absl/status/status.h"
#include "volume/client/blob_store.h"
#include "proto/filer.pb.h"
#include "shared/http/http_server.h"

namespace kelp::filer {

// Writes bytes [offset, offset + length) of g's file as the body of a response whose head
// (status, headers, Content-Length = length) this writes too; a HEAD request gets the head
// only. Content that is all inline is sent in one piece. An error before the head is
// answered with its HTTP status; after it, the connection is closed so the client sees a
// short body rather than a wrong one.
void ServeFileBytes(http::ResponseWriter& w, bool head_only, int status,
                    const http::Headers& headers, const GetChunksResponse& g, uint64_t offset,
                    uint64_t length, volume::BlobStore& io);

// A JSON response built piece by piece. Until flush_at bytes have gathered nothing is sent;
// a body that stays under it goes out with Content-Length, a bigger one chunked.
class JsonStream {
 public:
  explicit JsonStream(http::ResponseWriter& w, size_t flush_at = 64 << 10)
      : w_(w), flush_at_(flush_at) {}
  std::string& buf() { return buf_; }
  // Sends what has gathered if it is over the threshold.
  absl::Status MaybeFlush();
  // Sends the rest and finishes the response.
  absl::Status Finish();
  // An error: answered with its status if nothing was sent yet, else the connection closes.
  void Fail(const absl::Status& s);

 private:
  http::ResponseWriter& w_;
  const size_t flush_at_;
  std::string buf_;
};

// What RunInline found for a read: the file's content description, for Handle to use
// instead of reading the store again. Put and Take must run on the same thread, and Take
// only returns what Put stored for this very request (object and target).
void StashProbe(const http::Request& req, GetChunksResponse g);
std::optional<GetChunksResponse> TakeProbe(const http::Request& req);
void DropProbe();

// {"message": text} as AGFS answers a success.
std::string MessageJson(std::string_view text);

}  // namespace kelp::filer
