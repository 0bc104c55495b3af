// Path checks of the filer's HTTP dialects. Every path a client names, in the URL
// (SeaweedFS style) or in a query parameter (AGFS style, `?path=`), passes through
// CleanHttpPath before anything looks it up, so no request can name something outside the
// tree or smuggle a separator into a name. The HTTP server has already percent-decoded it.
// Pure functions; thread-safe.
#pragma once

#include <string>
#include <string_view>

#include "absl/status/statusor.h"

namespace kelp::filer {

// Longest path accepted, in bytes (PATH_MAX - 1).
inline constexpr size_t kMaxHttpPathLen = 4095;

// An absolute path with no empty, "." or ".." component: "/" or "/a/b".
struct CleanPath {
  std::string path;
  // The request spelled it with a trailing slash ("/a/b/"): it names a directory.
  bool trailing_slash = false;

  bool is_root() const { return path == "/"; }
  // "/a" for "/a/b", "/" for "/a" and for the root.
  std::string_view dir() const;
  // "b" for "/a/b", "" for the root.
  std::string_view name() const;
  // This path with one more component (which must be a valid name).
  CleanPath Child(std::string_view child) const;
};

// EINVAL (HTTP 400) for an empty or relative path, a NUL byte, an empty component ("//"),
// "." or ".."; ENAMETOOLONG (400) for a component over 255 bytes or a path over
// kMaxHttpPathLen. One trailing slash is allowed and remembered.
absl::StatusOr<CleanPath> CleanHttpPath(std::string_view raw);

}  // namespace kelp::filer
