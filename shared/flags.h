// Go-style command-line flags, as `weed` users type them: -name=value, --name=value,
// -name value, and bare -name for booleans. -h / -help / --help prints every flag with its
// default. Not thread-safe: build and parse on one thread before starting services.
//
//   VolumeOptions opts;                      // defaults live in the struct
//   kelp::FlagSet flags("volume", "kelp volume [flags]", "Runs a volume server.");
//   flags.Add("port", &opts.port, "HTTP port");
//   flags.ParseOrExit(argc, argv);           // exits 2 with one line on a bad flag
#pragma once

#include <cstdint>
#include <string>
#include <string_view>
#include <variant>
#include <vector>

#include "absl/status/status.h"

namespace kelp {

class FlagSet {
 public:
  FlagSet(std::string name, std::string synopsis, std::string description);

  // Registers a flag bound to *target; the current value of *target is the default.
  // help should name the unit where there is one ("in MiB", "in ms").
  void Add(std::string_view name, std::string* target, std::string_view help);
  void Add(std::string_view name, bool* target, std::string_view help);
  void Add(std::string_view name, int* target, std::string_view help);
  void Add(std::string_view name, int64_t* target, std::string_view help);
  void Add(std::string_view name, uint32_t* target, std::string_view help);
  void Add(std::string_view name, uint64_t* target, std::string_view help);
  void Add(std::string_view name, double* target, std::string_view help);
  // A second name for an existing flag (e.g. -master for -filer).
  void Alias(std::string_view alias, std::string_view name);

  // Parses argv[0..argc) (argv[0] is NOT the program name). Returns InvalidArgument with a
  // one-line message for unknown flags and bad values. Sets help_requested() on -h.
  absl::Status Parse(int argc, char** argv);
  absl::Status Parse(const std::vector<std::string>& args);

  // Parse, then: on -h print Usage() to stdout and exit 0; on error print
  // "kelp <name>: <message>" plus a hint to stderr and exit 2.
  void ParseOrExit(int argc, char** argv);

  std::string Usage() const;
  bool help_requested() const { return help_requested_; }
  bool IsSet(std::string_view name) const;
  const std::vector<std::string>& args() const { return args_; }  // positional arguments

 private:
  using Target = std::variant<std::string*, bool*, int*, int64_t*, uint32_t*, uint64_t*, double*>;
  struct Flag {
    std::string name;
    Target target;
    std::string help;
    std::string default_text;
    bool set = false;
  };
  void AddFlag(std::string_view name, Target target, std::string_view help);
  Flag* Find(std::string_view name);
  absl::Status Set(Flag& flag, std::string_view value);

  std::string name_, synopsis_, description_;
  std::vector<Flag> flags_;
  std::vector<std::pair<std::string, std::string>> aliases_;
  std::vector<std::string> args_;
  bool help_requested_ = false;
};

}  // namespace kelp
