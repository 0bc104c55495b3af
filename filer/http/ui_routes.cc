#include "filer/http/ui_routes.h"

#include <cstdio>

#include "filer/http/ui_assets.h"
#include "shared/hash.h"
#include "shared/http/range.h"

namespace kelp::filer {
namespace {

const UiAsset* Find(std::string_view path) {
  if (path == "/ui/" || path == "/ui/index.html") path = "/ui";
  for (const UiAsset& a : UiAssets()) {
    if (a.path == path) return &a;
  }
  return nullptr;
}

}  // namespace

bool UiRoutes::Owns(std::string_view path) { return Find(path) != nullptr; }

void UiRoutes::Serve(http::Request& req, http::ResponseWriter& w) {
  const UiAsset* a = Find(req.path());
  if (a == nullptr) return w.SendError(404, "not found");
  if (req.method() != "GET" && req.method() != "HEAD") return w.SendError(405, "use GET");
  char etag[24];
  std::snprintf(etag, sizeof(etag), "\"%016llx\"",
                static_cast<unsigned long long>(Hash64(a->body)));
  http::Headers h;
  h.Set("ETag", etag);
  // Revalidated on every load, so a new binary's UI is picked up at once.
  h.Set("Cache-Control", "no-cache");
  h.Set("X-Content-Type-Options", "nosniff");
  // The page loads nothing from outside the filer.
  h.Set("Content-Security-Policy",
        "default-src 'self'; img-src 'self' data:; style-src 'self'; script-src 'self'; "
        "connect-src 'self'; frame-ancestors 'none'");
  std::string_view inm = req.header("If-None-Match");
  if (!inm.empty() && http::EtagMatches(inm, etag)) return w.Send(304, "", "", h);
  w.Send(200, a->body, a->content_type, h);  // the writer leaves the body out for HEAD
}

}  // namespace kelp::filer
