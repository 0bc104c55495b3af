#include "filer/cluster/cluster_service.h"

#include <nlohmann/json.hpp>

#include "shared/file_id.h"
#include "shared/grpc_status.h"
#include "shared/security/jwt.h"
#include "shared/security/security.h"
#include "shared/status.h"
#include "shared/strings.h"

namespace kelp::filer {

grpc::Status ClusterGrpcService::Heartbeat(grpc::ServerContext*, const cluster::HeartbeatRequest* req,
                                           cluster::HeartbeatResponse* resp) {
  return GuardedCall("Heartbeat", [&]() -> absl::Status {
    if (req->ip().empty() || req->port() == 0 || req->port() > 65535) {
      return absl::InvalidArgumentError("heartbeat needs ip and port");
    }
    if (router_ && !router_->IsCoordinator()) {
      std::string leader = router_->RemoteCoordinator();
      if (leader.empty()) return absl::UnavailableError("this filer is not the coordinator and knows none yet");
      resp->set_leader(leader);
      return absl::OkStatus();
    }
    *resp = topology_->Heartbeat(*req);
    return absl::OkStatus();
  });
}

namespace {

// A request another filer forwarded is never forwarded again (two filers that each take the
// other for the coordinator must not bounce it between them).
bool Forwarded(grpc::ServerContext* ctx) {
  return ctx->client_metadata().count(std::string(ClusterRouter::kForwardedHeader)) > 0;
}

}  // namespace

grpc::Status ClusterGrpcService::Assign(grpc::ServerContext* ctx, const cluster::AssignRequest* req,
                                        cluster::AssignResponse* resp) {
  return GuardedCall("Assign", [&]() -> absl::Status {
    if (router_ && Forwarded(ctx) && !router_->IsCoordinator()) {
      return absl::UnavailableError("this filer is not the coordinator (any more)");
    }
    ASSIGN_OR_RETURN(*resp, router_ && !Forwarded(ctx) ? router_->Assign(*req) : topology_->Assign(*req));
    return absl::OkStatus();
  });
}

grpc::Status ClusterGrpcService::LookupVolume(grpc::ServerContext* ctx, const cluster::LookupVolumeRequest* req,
                                              cluster::LookupVolumeResponse* resp) {
  return GuardedCall("LookupVolume", [&]() -> absl::Status {
    if (router_ && Forwarded(ctx) && !router_->IsCoordinator()) {
      return absl::UnavailableError("this filer is not the coordinator (any more)");
    }
    ASSIGN_OR_RETURN(*resp, router_ && !Forwarded(ctx) ? router_->LookupVolume(*req)
                                                       : topology_->LookupVolume(*req));
    return absl::OkStatus();
  });
}

bool ClusterHttpRoutes::Owns(const http::Request& req) {
  const std::string& p = req.path();
  return p == "/dir/assign" || p == "/dir/lookup" || p == "/dir/status" || p == "/cluster/status";
}

bool ClusterHttpRoutes::RunInline(const http::Request& req) const {
  // A filer that is not the coordinator forwards: not on the event loop.
  if (!api_->IsCoordinator()) return false;
  if (req.path() == "/dir/lookup") return true;
  if (req.path() != "/dir/assign") return false;
  return topology_->HasWritable(req.query("collection").value_or(""), req.query("replication").value_or(""));
}

void ClusterHttpRoutes::Serve(http::Request& req, http::ResponseWriter& w) {
  if (req.method() != "GET" && req.method() != "POST" && req.method() != "HEAD") {
    w.SendError(405, "use GET or POST");
    return;
  }
  if (req.path() == "/dir/assign") return Assign(req, w);
  if (req.path() == "/dir/lookup") return Lookup(req, w);
  w.SendJson(200, topology_->StatusJson().dump(2) + "\n");
}

void ClusterHttpRoutes::Assign(http::Request& req, http::ResponseWriter& w) {
  cluster::AssignRequest ar;
  if (auto c = req.query("count")) {
    uint32_t n = 0;
    if (!ParseInt(*c, &n) || n == 0 || n > 1000000) {
      w.SendError(400, "count must be an integer in [1, 1000000]");
      return;
    }
    ar.set_count(n);
  }
  ar.set_replication(req.query("replication").value_or(""));
  ar.set_collection(req.query("collection").value_or(""));
  auto r = api_->Assign(ar);
  if (!r.ok()) {
    w.SendStatus(r.status());
    return;
  }
  const auto& loc = r->locations(0);
  // Hand-built: this is the hot path of `kelp benchmark`.
  std::string body = StrCat("{\"fid\":\"", r->fid(), "\",\"url\":\"", loc.url(), "\",\"publicUrl\":\"",
                            loc.public_url(), "\",\"count\":", r->count());
  if (!r->auth().empty()) StrAppend(&body, ",\"auth\":\"", r->auth(), "\"");  // base64url: no escaping
  body += "}\n";
  w.SendJson(200, body);
}

void ClusterHttpRoutes::Lookup(http::Request& req, http::ResponseWriter& w) {
  std::string v = req.query("volumeId").value_or(req.query("fileId").value_or(""));
  uint32_t vid = 0;
  if (auto comma = v.find(','); comma != std::string::npos) v.resize(comma);
  if (!ParseInt(v, &vid) || vid == 0) {
    w.SendError(400, "volumeId must be a volume id or a file id");
    return;
  }
  cluster::LookupVolumeRequest lr;
  lr.add_volume_ids(vid);
  auto r = api_->LookupVolume(lr);
  if (!r.ok()) {
    w.SendStatus(r.status());
    return;
  }
  const auto& vl = r->volumes(0);
  if (vl.locations_size() == 0) {
    w.SendError(404, vl.error());
    return;
  }
  nlohmann::json locs = nlohmann::json::array();
  for (const auto& l : vl.locations()) locs.push_back({{"url", l.url()}, {"publicUrl", l.public_url()}});
  nlohmann::json out{{"volumeOrFileId", v}, {"locations", locs}};
  // As SeaweedFS's master: a lookup of a file id gets a read token for it when reads are signed.
  if (auto fid = FileId::Parse(req.query("fileId").value_or("")); fid.ok()) {
    if (auto sec = security::Current(); sec->volume_read.enabled()) {
      out["auth"] = security::SignFileIdToken(sec->volume_read, *fid, 1);
    }
  }
  w.SendJson(200, out.dump() + "\n");
}

}  // namespace kelp::filer
