// The mount's view of the servers: the project's one filer client (filer/client/filer_client.h)
// and its one blob store (volume/client/blob_store.h), and the protobuf types the core works in.
#pragma once

#include "filer/client/filer_client.h"
#include "volume/client/blob_store.h"

namespace kelp::mount {

using filer::Attr;
using filer::Chunk;
using filer::FilerClient;
using filer::FilerMethod;
using volume::BlobStore;

}  // namespace kelp::mount
