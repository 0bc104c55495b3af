#include "shared/hash.h"

#define XXH_STATIC_LINKING_ONLY  // XXH3_state_t's definition
#if defined(__x86_64__) || defined(__i386__)
#include <xxh_x86dispatch.h>  // XXH3_64bits and the others become their _dispatch variants
#else
#include <xxhash.h>
#endif

namespace kelp {
namespace {

static_assert(sizeof(XXH3_state_t) == Hasher::kStateSize, "libxxhash's state changed size");
static_assert(alignof(XXH3_state_t) <= 64);

XXH3_state_t* State(unsigned char* bytes) { return reinterpret_cast<XXH3_state_t*>(bytes); }
const XXH3_state_t* State(const unsigned char* bytes) { return reinterpret_cast<const XXH3_state_t*>(bytes); }

}  // namespace

uint64_t Hash64(const void* data, size_t size) { return XXH3_64bits(data, size); }

uint64_t Hash64WithSeed(std::string_view s, uint64_t seed) {
  return XXH3_64bits_withSeed(s.data(), s.size(), seed);
}

Hasher::Hasher() { XXH3_64bits_reset(State(state_)); }

void Hasher::Update(const void* data, size_t size) {
  XXH3_64bits_update(State(state_), data, size);
}

uint64_t Hasher::Digest() const { return XXH3_64bits_digest(State(state_)); }

}  // namespace kelp
