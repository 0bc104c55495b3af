// The one conversion between absl::Status and grpc::Status. The errno payload travels in the
// gRPC status details as its decimal text, so a FUSE client gets ENOTEMPTY, not just
// FAILED_PRECONDITION.
#pragma once

#include <string>
#include <string_view>

#include <grpcpp/grpcpp.h>

#include "absl/status/status.h"

namespace kelp {

grpc::Status ToGrpcStatus(const absl::Status& status);
absl::Status FromGrpcStatus(const grpc::Status& status);

// "host:port" (HTTP) -> "host:port+10000" (gRPC), as SeaweedFS derives it.
std::string GrpcAddressOf(std::string_view http_host_port, int grpc_port_override = 0);

// Runs fn and converts an escaping exception into INTERNAL, so no gRPC handler ever throws.
template <typename Fn>
grpc::Status GuardedCall(std::string_view what, Fn&& fn) {
  try {
    return ToGrpcStatus(fn());
  } catch (const std::exception& e) {
    return grpc::Status(grpc::StatusCode::INTERNAL, std::string(what) + ": " + e.what());
  }
}

}  // namespace kelp
