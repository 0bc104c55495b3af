// The web UI's static files (filer/ui/), compiled into the binary by cmake/embed_files.cmake
// so the filer serves them with no file on disk and no external resource (docs/web-ui.md).
// Thread-safety: immutable data.
#pragma once

#include <span>
#include <string_view>

namespace kelp::filer {

struct UiAsset {
  std::string_view path;          // URL path, e.g. "/ui/app.js"
  std::string_view content_type;  // e.g. "text/javascript; charset=utf-8"
  std::string_view body;
};

// Every asset; the page itself is the one at "/ui".
std::span<const UiAsset> UiAssets();

}  // namespace kelp::filer
