// The web UI at /ui on the filer's HTTP port: serves the embedded page, script, style sheet and
// icon (ui_assets.h). Everything the page shows it fetches from the filer's existing APIs
// (/status, /metrics, the SeaweedFS-style listing, /api/v1/...). docs/web-ui.md.
//
// The UI owns the exact paths /ui, /ui/ and /ui/<asset>; a user file at one of them is reached
// with /api/v1/files?path= instead.
// Thread-safety: stateless, any thread (answered on the event loop: no I/O).
#pragma once

#include <string_view>

#include "shared/http/http_server.h"

namespace kelp::filer {

class UiRoutes {
 public:
  static bool Owns(std::string_view path);
  static void Serve(http::Request& req, http::ResponseWriter& w);
};

}  // namespace kelp::filer
