// The mount's view of the filer: the project's one filer client (filer/client/filer_client.h)
// and the protobuf types the core works in.
#pragma once

#include "filer/client/filer_client.h"

namespace kelp::mount {

using filer::Attr;
using filer::Chunk;
using filer::FilerClient;
using filer::FilerMethod;

}  // namespace kelp::mount
