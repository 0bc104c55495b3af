#pragma once

namespace kelp {
inline constexpr char kVersion[] = "0.1.0";
}  // namespace kelp
