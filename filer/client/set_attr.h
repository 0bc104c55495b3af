// What a SetAttrRequest's bits other than SIZE do to attributes: the one rule the filer applies
// (SetAttr, and attributes carried by a commit) and a mount applies locally to a file it holds
// open before the commit carries the change to the filer. Pure; thread-safe.
#pragma once

#include <cstdint>

#include "proto/filer.pb.h"

namespace kelp::filer {

// Applies MODE (permission bits; the type bits stay), UID, GID, ATIME[_NOW], MTIME[_NOW] and
// CTIME (else ctime becomes now_ns) of req to *a. SIZE is the caller's.
inline void ApplySetAttr(const SetAttrRequest& req, int64_t now_ns, Attr* a) {
  const uint32_t v = req.valid();
  if (v & SET_ATTR_MODE) a->set_mode((a->mode() & 0170000) | (req.mode() & 07777));
  if (v & SET_ATTR_UID) a->set_uid(req.uid());
  if (v & SET_ATTR_GID) a->set_gid(req.gid());
  if (v & SET_ATTR_ATIME_NOW) {
    a->set_atime_ns(now_ns);
  } else if (v & SET_ATTR_ATIME) {
    a->set_atime_ns(req.atime_ns());
  }
  if (v & SET_ATTR_MTIME_NOW) {
    a->set_mtime_ns(now_ns);
  } else if (v & SET_ATTR_MTIME) {
    a->set_mtime_ns(req.mtime_ns());
  }
  a->set_ctime_ns((v & SET_ATTR_CTIME) ? req.ctime_ns() : now_ns);
}

}  // namespace kelp::filer
