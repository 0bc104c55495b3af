// libFuzzer target: the Go-style flag parser. The input is argv, NUL-separated. Properties:
// no crash; a parse error is one line; the usage text renders.
#include <cstdint>
#include <string>
#include <vector>

#include "shared/flags.h"
#include "shared/testing/fuzz_util.h"

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  std::vector<std::string> args;
  std::string cur;
  for (size_t i = 0; i < size; ++i) {
    if (data[i] == 0) {
      args.push_back(cur);
      cur.clear();
    } else {
      cur.push_back(static_cast<char>(data[i]));
    }
  }
  if (!cur.empty()) args.push_back(cur);

  std::string s = "x", security;
  bool b = false;
  int i = 1;
  int64_t i64 = -1;
  uint32_t u32 = 2;
  uint64_t u64 = 3;
  double d = 0.5;
  kelp::FlagSet flags("fuzz", "kelp fuzz [flags]", "A flag set with one flag of each type.");
  flags.Add("dir", &s, "a string");
  flags.Add("security", &security, "a string");
  flags.Add("readOnly", &b, "a bool");
  flags.Add("port", &i, "an int");
  flags.Add("offset", &i64, "an int64");
  flags.Add("max", &u32, "a uint32");
  flags.Add("sizeMB", &u64, "a uint64");
  flags.Add("ratio", &d, "a double");
  flags.Alias("master", "dir");
  absl::Status st = flags.Parse(args);
  if (!st.ok()) FUZZ_CHECK(!st.message().empty());
  FUZZ_CHECK(!flags.Usage().empty());
  return 0;
}
