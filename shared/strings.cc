#include "shared/strings.h"

#include <cstdlib>

namespace kelp {

bool ParseDouble(std::string_view s, double* out) {
  if (s.empty()) return false;
  std::string tmp(s);
  char* end = nullptr;
  double v = std::strtod(tmp.c_str(), &end);
  if (end != tmp.c_str() + tmp.size()) return false;
  *out = v;
  return true;
}

}  // namespace kelp
