// JSON string literals: the one escaper of the project (HTTP error bodies, the volume and
// filer HTTP APIs). Pure functions; thread-safe.
#pragma once

#include <string>
#include <string_view>

namespace kelp {

// Appends s as a JSON string literal, quotes included: '"', '\\' and control characters
// escaped, valid UTF-8 kept as is, bytes that are not valid UTF-8 replaced with U+FFFD (as
// Go's encoder does), so the output is always valid JSON.
void AppendJsonString(std::string* out, std::string_view s);
std::string JsonString(std::string_view s);

}  // namespace kelp
