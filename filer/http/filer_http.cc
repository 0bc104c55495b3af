#include "filer/http/filer_http.h"

#include "filer/http/serve.h"
#include "filer/http/ui_routes.h"
#include "shared/log.h"

namespace kelp::filer {

bool IsFilerOwnPath(std::string_view path) {
  return path == "/status" || path == "/metrics" || path == "/dir/assign" ||
         path == "/dir/lookup" || path == "/dir/status" || path == "/cluster/status";
}

namespace {

volume::BlobClient::Options BlobOptions(const FilerHttpOptions& o) {
  volume::BlobClient::Options b;
  b.replication = o.replication;
  b.collection = o.collection;
  b.assign_batch = 1;  // one HTTP write rarely makes more than one blob
  b.metric_prefix = "kelp_filer_http_blob";
  return b;
}

}  // namespace

FilerHttpApi::FilerHttpApi(FilerService* core, ClusterApi* cluster, FilerHttpOptions options)
    : io_(volume::Coordinator{[cluster](const cluster::AssignRequest& r) { return cluster->Assign(r); },
                              [cluster](const cluster::LookupVolumeRequest& r) { return cluster->LookupVolume(r); },
                              [cluster](const std::vector<std::string>& fids) { return cluster->DeleteBlobs(fids); }},
          &volume_client_, BlobOptions(options)),
      ops_(core, &io_, FileOps::Options{std::max<size_t>(1, options.max_mb) << 20, 0644, 0755}),
      seaweed_(&ops_, SeaweedRoutes::Options{options.list_limit, options.inline_small}),
      agfs_(&ops_, AgfsRoutes::Options{options.inline_small}) {}

FilerHttpApi::~FilerHttpApi() = default;

bool FilerHttpApi::RunInline(const http::Request& req) const {
  DropProbe();
  if (UiRoutes::Owns(req.path())) return true;
  return AgfsRoutes::Owns(req) ? agfs_.RunInline(req) : seaweed_.RunInline(req);
}

void FilerHttpApi::Handle(http::Request& req, http::ResponseWriter& w) {
  if (UiRoutes::Owns(req.path())) return UiRoutes::Serve(req, w);
  if (AgfsRoutes::Owns(req)) return agfs_.Handle(req, w);
  seaweed_.Handle(req, w);
}

}  // namespace kelp::filer
