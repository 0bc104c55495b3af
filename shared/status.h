// Errors are absl::Status values. A status may carry the precise POSIX errno (ENOTEMPTY,
// EXDEV, ENOSPC...) as a payload so the FUSE edge can return exactly that errno and the HTTP
// edge can pick the right status code. Thread-safe: everything here is a pure function.
#pragma once

#include <string_view>

#include "absl/status/status.h"
#include "absl/status/statusor.h"

namespace kelp {

// A status whose code is derived from err (ENOENT -> NOT_FOUND, EEXIST -> ALREADY_EXISTS, ...)
// and which remembers err itself.
absl::Status PosixError(int err, std::string_view message);

// A status with this code that carries err (0 = none) whatever the code: how a status that
// crossed a wire (gRPC, shared/rpc) is rebuilt exactly.
absl::Status StatusWithErrno(absl::StatusCode code, int err, std::string_view message);

// The errno a status carries explicitly (PosixError, StatusWithErrno); 0 when it has none.
int CarriedErrno(const absl::Status& status);

// The errno a status stands for: its payload if it has one, else one derived from its code.
// OK -> 0.
int ErrnoOf(const absl::Status& status);

// The HTTP status code for a non-OK status (404, 409, 400, 401, 507...). OK -> 200.
int HttpStatusOf(const absl::Status& status);

// status, answered over HTTP with http_status whatever its code says: for faults whose
// class (the client's 4xx or the server's 5xx) the code alone does not tell, e.g. a timeout
// waiting for a client's request body (408, where DEADLINE_EXCEEDED alone would be 504).
absl::Status WithHttpStatus(absl::Status status, int http_status);

// A status for the current errno with a context prefix: ErrnoStatus("open " + path).
absl::Status ErrnoStatus(std::string_view context);

}  // namespace kelp

#define KELP_CONCAT_INNER_(a, b) a##b
#define KELP_CONCAT_(a, b) KELP_CONCAT_INNER_(a, b)

// RETURN_IF_ERROR(expr): returns the status of expr from the current function unless OK.
#define RETURN_IF_ERROR(expr)                          \
  do {                                                 \
    ::absl::Status kelp_status_ = (expr);              \
    if (!kelp_status_.ok()) return kelp_status_;       \
  } while (0)

// ASSIGN_OR_RETURN(lhs, expr): evaluates a StatusOr, returns its status if not OK, else
// assigns the value to lhs (which may be a declaration: `ASSIGN_OR_RETURN(auto x, F())`).
#define ASSIGN_OR_RETURN(lhs, expr) \
  KELP_ASSIGN_OR_RETURN_IMPL_(KELP_CONCAT_(kelp_statusor_, __LINE__), lhs, expr)
#define KELP_ASSIGN_OR_RETURN_IMPL_(tmp, lhs, expr) \
  auto tmp = (expr);                                \
  if (!tmp.ok()) return tmp.status();               \
  lhs = std::move(tmp).value()
