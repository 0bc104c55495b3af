#include "shared/status.h"

#include <cerrno>

#include <catch2/catch.hpp>

#include "shared/grpc_status.h"

TEST_CASE("posix errors keep their errno through gRPC") {
  for (int err : {ENOENT, ENOTEMPTY, EXDEV, ENOSPC, EISDIR, ENOTDIR, ENAMETOOLONG, EEXIST, EACCES, ELOOP}) {
    absl::Status s = kelp::PosixError(err, "x");
    CHECK(kelp::ErrnoOf(s) == err);
    absl::Status back = kelp::FromGrpcStatus(kelp::ToGrpcStatus(s));
    CHECK(kelp::ErrnoOf(back) == err);
    CHECK(back.code() == s.code());
  }
  CHECK(kelp::ErrnoOf(absl::OkStatus()) == 0);
  CHECK(kelp::ErrnoOf(absl::NotFoundError("x")) == ENOENT);
  CHECK(kelp::ErrnoOf(absl::UnavailableError("x")) == EIO);
}

TEST_CASE("plain statuses keep their code through gRPC") {
  for (absl::Status s : {absl::UnavailableError("x"), absl::CancelledError("x"),
                         absl::DeadlineExceededError("x"), absl::NotFoundError("x")}) {
    absl::Status back = kelp::FromGrpcStatus(kelp::ToGrpcStatus(s));
    CHECK(back.code() == s.code());
    CHECK(kelp::ErrnoOf(back) == kelp::ErrnoOf(s));
  }
}

TEST_CASE("http status of errors") {
  CHECK(kelp::HttpStatusOf(kelp::PosixError(ENOENT, "")) == 404);
  CHECK(kelp::HttpStatusOf(kelp::PosixError(ENOSPC, "")) == 507);
  CHECK(kelp::HttpStatusOf(kelp::PosixError(ENOTEMPTY, "")) == 409);
  CHECK(kelp::HttpStatusOf(absl::InvalidArgumentError("")) == 400);
  CHECK(kelp::HttpStatusOf(absl::InternalError("")) == 500);
}

namespace {
absl::StatusOr<int> Half(int x) {
  if (x % 2) return absl::InvalidArgumentError("odd");
  return x / 2;
}
absl::StatusOr<int> Quarter(int x) {
  ASSIGN_OR_RETURN(int h, Half(x));
  ASSIGN_OR_RETURN(int q, Half(h));
  return q;
}
}  // namespace

TEST_CASE("status macros propagate") {
  CHECK(*Quarter(8) == 2);
  CHECK(Quarter(6).status().code() == absl::StatusCode::kInvalidArgument);
}

TEST_CASE("grpc address derives port + 10000") {
  CHECK(kelp::GrpcAddressOf("localhost:8888") == "127.0.0.1:18888");
  CHECK(kelp::GrpcAddressOf("10.0.0.1:8080", 9999) == "10.0.0.1:9999");
}

TEST_CASE("HTTP status of tokens and of faults whose class the code does not tell") {
  CHECK(kelp::HttpStatusOf(absl::UnauthenticatedError("no token")) == 401);
  CHECK(kelp::HttpStatusOf(absl::DeadlineExceededError("")) == 504);
  CHECK(kelp::HttpStatusOf(kelp::WithHttpStatus(absl::DeadlineExceededError("client too slow"), 408)) == 408);
  absl::Status s = kelp::WithHttpStatus(kelp::PosixError(ECONNRESET, "reset"), 400);
  CHECK(kelp::HttpStatusOf(s) == 400);
  CHECK(kelp::ErrnoOf(s) == ECONNRESET);  // the errno is kept
  CHECK(kelp::HttpStatusOf(kelp::WithHttpStatus(absl::InternalError(""), 99)) == 500);  // not an error code
}
