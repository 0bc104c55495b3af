#include "shared/grpc_status.h"


#include "absl/strings/cord.h"
#include "shared/strings.h"
#include "shared/status.h"

namespace kelp {

grpc::Status ToGrpcStatus(const absl::Status& status) {
  if (status.ok()) return grpc::Status::OK;
  return grpc::Status(static_cast<grpc::StatusCode>(status.code()), std::string(status.message()),
                      std::to_string(ErrnoOf(status)));
}

absl::Status FromGrpcStatus(const grpc::Status& status) {
  if (status.ok()) return absl::OkStatus();
  int err = 0;
  if (kelp::ParseInt(status.error_details(), &err) && err > 0) {
    absl::Status with_errno = PosixError(err, status.error_message());
    auto code = static_cast<absl::StatusCode>(status.error_code());
    if (with_errno.code() == code) return with_errno;
    // The errno was derived from the code (say UNAVAILABLE -> EIO): keep the code that
    // travelled, and the errno beside it.
    absl::Status out(code, status.error_message());
    with_errno.ForEachPayload(
        [&](absl::string_view key, const absl::Cord& value) { out.SetPayload(key, value); });
    return out;
  }
  return absl::Status(static_cast<absl::StatusCode>(status.error_code()), status.error_message());
}

std::string GrpcAddressOf(std::string_view http_host_port, int grpc_port_override) {
  size_t colon = http_host_port.rfind(':');
  std::string host(http_host_port.substr(0, colon));
  if (host.empty() || host == "localhost") host = "127.0.0.1";
  int port = 0;
  if (grpc_port_override > 0) {
    port = grpc_port_override;
  } else if (colon != std::string_view::npos && kelp::ParseInt(http_host_port.substr(colon + 1), &port)) {
    port += 10000;
  }
  return kelp::StrCat(host, ":", port);
}

}  // namespace kelp
