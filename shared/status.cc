#include "shared/status.h"

#include <cerrno>
#include <cstring>
#include <string>

#include "absl/strings/cord.h"
#include "shared/strings.h"


namespace kelp {
namespace {

constexpr char kErrnoPayload[] = "kelp.errno";
constexpr char kHttpPayload[] = "kelp.http";

absl::StatusCode CodeOfErrno(int err) {
  switch (err) {
    case ENOENT: return absl::StatusCode::kNotFound;
    case EEXIST: return absl::StatusCode::kAlreadyExists;
    case EACCES:
    case EPERM: return absl::StatusCode::kPermissionDenied;
    case EINVAL:
    case ENAMETOOLONG:
    case ENOTDIR:
    case EISDIR:
    case ELOOP:
    case E2BIG:
    case ERANGE: return absl::StatusCode::kInvalidArgument;
    case ENOTEMPTY:
    case EXDEV:
    case EBUSY:
    case ETXTBSY:
    case EMLINK:
    case EROFS: return absl::StatusCode::kFailedPrecondition;
    case ENOSPC:
    case EDQUOT:
    case EFBIG: return absl::StatusCode::kResourceExhausted;
    case ENODATA: return absl::StatusCode::kNotFound;
    case ENOSYS:
    case EOPNOTSUPP: return absl::StatusCode::kUnimplemented;
    case ETIMEDOUT: return absl::StatusCode::kDeadlineExceeded;
    case EAGAIN:
    case ECONNREFUSED:
    case ECONNRESET:
    case EHOSTUNREACH:
    case ENOTCONN: return absl::StatusCode::kUnavailable;
    case ECANCELED: return absl::StatusCode::kCancelled;
    default: return absl::StatusCode::kInternal;
  }
}

int ErrnoOfCode(absl::StatusCode code) {
  switch (code) {
    case absl::StatusCode::kOk: return 0;
    case absl::StatusCode::kNotFound: return ENOENT;
    case absl::StatusCode::kAlreadyExists: return EEXIST;
    case absl::StatusCode::kPermissionDenied:
    case absl::StatusCode::kUnauthenticated: return EACCES;
    case absl::StatusCode::kInvalidArgument:
    case absl::StatusCode::kOutOfRange: return EINVAL;
    case absl::StatusCode::kFailedPrecondition: return EPERM;
    case absl::StatusCode::kResourceExhausted: return ENOSPC;
    case absl::StatusCode::kUnimplemented: return ENOSYS;
    case absl::StatusCode::kDeadlineExceeded: return ETIMEDOUT;
    case absl::StatusCode::kCancelled: return EINTR;
    default: return EIO;
  }
}

}  // namespace

absl::Status PosixError(int err, std::string_view message) {
  absl::Status s(CodeOfErrno(err), std::string(message));
  s.SetPayload(kErrnoPayload, absl::Cord(std::to_string(err)));
  return s;
}

absl::Status StatusWithErrno(absl::StatusCode code, int err, std::string_view message) {
  absl::Status s(code, std::string(message));
  if (err > 0 && !s.ok()) s.SetPayload(kErrnoPayload, absl::Cord(std::to_string(err)));
  return s;
}

int CarriedErrno(const absl::Status& status) {
  if (auto p = status.GetPayload(kErrnoPayload)) {
    int err = 0;
    if (kelp::ParseInt(std::string(*p), &err) && err > 0) return err;
  }
  return 0;
}

int ErrnoOf(const absl::Status& status) {
  if (status.ok()) return 0;
  if (auto p = status.GetPayload(kErrnoPayload)) {
    int err = 0;
    if (kelp::ParseInt(std::string(*p), &err) && err > 0) return err;
  }
  return ErrnoOfCode(status.code());
}

absl::Status WithHttpStatus(absl::Status status, int http_status) {
  status.SetPayload(kHttpPayload, absl::Cord(std::to_string(http_status)));
  return status;
}

int HttpStatusOf(const absl::Status& status) {
  if (status.ok()) return 200;
  if (auto p = status.GetPayload(kHttpPayload)) {
    int code = 0;
    if (kelp::ParseInt(std::string(*p), &code) && code >= 400 && code < 600) return code;
  }
  if (status.code() == absl::StatusCode::kUnauthenticated) return 401;
  switch (ErrnoOf(status)) {
    case 0: return 200;
    case ENOSPC:
    case EDQUOT: return 507;
    case EFBIG:
    case E2BIG: return 413;
    case ENOTEMPTY:
    case EEXIST:
    case EBUSY: return 409;
    case ENOENT:
    case ENODATA: return 404;
    case EACCES:
    case EPERM: return 403;
    case EROFS: return 403;
    case ENOSYS:
    case EOPNOTSUPP: return 501;
    default: break;
  }
  switch (status.code()) {
    case absl::StatusCode::kInvalidArgument:
    case absl::StatusCode::kOutOfRange: return 400;
    case absl::StatusCode::kFailedPrecondition: return 409;
    case absl::StatusCode::kUnavailable: return 503;
    case absl::StatusCode::kDeadlineExceeded: return 504;
    case absl::StatusCode::kResourceExhausted: return 507;
    default: return 500;
  }
}

absl::Status ErrnoStatus(std::string_view context) {
  int err = errno;
  return PosixError(err, kelp::StrCat(context, ": ", std::strerror(err)));
}

}  // namespace kelp
