#include "shared/http/http_request.h"

#include <cerrno>
#include <cstring>
#include <ctime>

#include "shared/http/http_conn.h"
#include "shared/json.h"
#include "shared/status.h"
#include "shared/strings.h"

namespace kelp::http {
namespace {

const std::string& DateHeader() {
  thread_local time_t last = 0;
  thread_local std::string value;
  time_t now = time(nullptr);
  if (now != last) {
    last = now;
    tm t;
    gmtime_r(&now, &t);
    char buf[64];
    strftime(buf, sizeof buf, "Date: %a, %d %b %Y %H:%M:%S GMT\r\n", &t);
    value = buf;
  }
  return value;
}

// Body reads at least this large go from the socket to the caller's buffer directly.
constexpr size_t kDirectRead = 16 << 10;

}  // namespace

std::string ErrorJson(std::string_view message) { return kelp::StrCat("{\"error\":", kelp::JsonString(message), "}\n"); }

// ---- Request ---------------------------------------------------------------------------

void Request::Begin(Conn* conn) {
  conn_ = conn;
  chunked_ = ChunkedDecoder();
  body_left_ = head_.framing.chunked ? 0 : head_.framing.content_length;
  body_done_ = !head_.framing.chunked && body_left_ == 0;
}

absl::StatusOr<size_t> Request::Read(char* buf, size_t n) {
  if (body_done_ || n == 0) return 0;
  if (!head_.framing.chunked) {
    if (body_left_ == 0) {
      body_done_ = true;
      return 0;
    }
    if (conn_->buffered() == 0) {
      if (n >= kDirectRead) {
        ASSIGN_OR_RETURN(size_t got, conn_->FillDirect(buf, std::min<uint64_t>(n, body_left_)));
        body_left_ -= got;
        if (body_left_ == 0) body_done_ = true;
        return got;
      }
      RETURN_IF_ERROR(conn_->Fill());
    }
    size_t take = std::min<uint64_t>({n, conn_->buffered(), body_left_});
    memcpy(buf, conn_->pending_input().data(), take);
    conn_->Consume(take);
    body_left_ -= take;
    if (body_left_ == 0) body_done_ = true;
    return take;
  }
  std::string out;
  for (;;) {
    if (conn_->buffered() > 0) {
      int64_t used = chunked_.Decode(conn_->pending_input(), &out, n);
      if (used < 0) return WithHttpStatus(absl::InvalidArgumentError("malformed chunked request body"), 400);
      conn_->Consume(used);
      if (chunked_.done()) body_done_ = true;
      if (!out.empty() || body_done_) break;
    }
    RETURN_IF_ERROR(conn_->Fill());
  }
  memcpy(buf, out.data(), out.size());
  return out.size();
}

absl::StatusOr<std::string> Request::ReadAll(size_t limit) {
  int64_t cl = content_length();
  if (cl > static_cast<int64_t>(limit)) {
    return PosixError(EFBIG, kelp::StrCat("request body of ", cl, " bytes exceeds the limit of ", limit));
  }
  std::string body;
  if (cl > 0 && !head_.framing.chunked) {
    // Straight from the socket into the body (a 4 MiB upload was copied twice more on its
    // way through the input buffer and a bounce buffer).
    body.resize(static_cast<size_t>(cl));
    ASSIGN_OR_RETURN(size_t got, ReadFull(body.data(), body.size()));
    body.resize(got);
    return body;
  }
  char buf[64 << 10];
  for (;;) {
    ASSIGN_OR_RETURN(size_t n, Read(buf, sizeof buf));
    if (n == 0) break;
    if (body.size() + n > limit) {
      return PosixError(EFBIG, kelp::StrCat("request body exceeds the limit of ", limit, " bytes"));
    }
    body.append(buf, n);
  }
  return body;
}

absl::StatusOr<size_t> Request::ReadFull(char* buf, size_t n) {
  size_t got = 0;
  while (got < n) {
    ASSIGN_OR_RETURN(size_t k, Read(buf + got, n - got));
    if (k == 0) break;
    got += k;
  }
  return got;
}

// ---- ResponseWriter --------------------------------------------------------------------

absl::Status ResponseWriter::WriteHead(int status, const Headers& headers, int64_t content_length) {
  if (head_written_) return absl::FailedPreconditionError("response head already written");
  head_written_ = true;
  status_ = status;
  chunked_ = content_length < 0;
  body_left_ = content_length;
  std::string head = kelp::StrCat("HTTP/1.1 ", status, " ", StatusText(status), "\r\nServer: kelp\r\n");
  head += DateHeader();
  for (const auto& [k, v] : headers.items()) kelp::StrAppend(&head, k, ": ", v, "\r\n");
  if (chunked_) {
    if (!head_request_) head += "Transfer-Encoding: chunked\r\n";
  } else if (status != 204 && status != 304) {
    kelp::StrAppend(&head, "Content-Length: ", content_length, "\r\n");
  }
  if (status == 401) head += "WWW-Authenticate: Bearer\r\n";
  const Request& req = conn_->req_;
  if (close_after_ || !req.head_.keep_alive) {
    head += "Connection: close\r\n";
    close_after_ = true;
  } else if (req.head_.version_minor == 0) {
    head += "Connection: keep-alive\r\n";
  }
  head += "\r\n";
  if (head_request_) {
    finished_ = true;
    body_left_ = 0;
  }
  return conn_->Emit(head);
}

absl::Status ResponseWriter::Write(std::string_view data) {
  if (!head_written_) return absl::FailedPreconditionError("response head not written");
  if (head_request_ || data.empty()) return absl::OkStatus();
  if (finished_) return absl::FailedPreconditionError("response already finished");
  body_bytes_ += data.size();
  if (chunked_) {
    char size_line[32];
    int n = snprintf(size_line, sizeof size_line, "%zx\r\n", data.size());
    RETURN_IF_ERROR(conn_->Emit(std::string_view(size_line, n)));
    RETURN_IF_ERROR(conn_->Emit(data));
    return conn_->Emit("\r\n");
  }
  if (static_cast<int64_t>(data.size()) > body_left_) {
    return absl::InternalError("response body longer than its Content-Length");
  }
  body_left_ -= data.size();
  return conn_->Emit(data);
}

absl::Status ResponseWriter::Finish() {
  if (finished_) return absl::OkStatus();
  finished_ = true;
  if (chunked_ && !head_request_) RETURN_IF_ERROR(conn_->Emit("0\r\n\r\n"));
  if (!chunked_ && body_left_ > 0) {
    close_after_ = true;  // the client would wait for bytes that never come
    return absl::InternalError("response body shorter than its Content-Length");
  }
  return absl::OkStatus();
}

void ResponseWriter::Send(int status, std::string_view body, std::string_view content_type, const Headers& extra) {
  Headers h = extra;
  if (!content_type.empty()) h.Set("Content-Type", content_type);
  if (!WriteHead(status, h, body.size()).ok()) return;
  (void)Write(body);
  (void)Finish();
}

void ResponseWriter::SendJson(int status, std::string_view json, const Headers& extra) {
  Send(status, json, "application/json", extra);
}

void ResponseWriter::SendError(int status, std::string_view message) {
  if (head_written_) {
    close_after_ = true;
    return;
  }
  SendJson(status, ErrorJson(message));
}

void ResponseWriter::SendStatus(const absl::Status& status) {
  SendError(HttpStatusOf(status), ToStd(status.message()));
}

}  // namespace kelp::http
