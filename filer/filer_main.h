#pragma once

#include <string>

#include "filer/server/filer_server.h"
#include "shared/flags.h"

namespace kelp {

// Registers the filer's flags with an optional prefix ("filer." for `kelp server`).
void AddFilerFlags(FlagSet& flags, filer::FilerServerOptions& options, const std::string& prefix);
// The HTTP file API's flags alone (part of AddFilerFlags).
void AddFilerHttpFlags(FlagSet& flags, filer::FilerServerOptions& options, const std::string& prefix);

}  // namespace kelp
