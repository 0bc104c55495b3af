#include "shared/flags.h"

#include <cstdio>
#include <cstdlib>
#include <limits>


#include "shared/strings.h"

namespace kelp {
namespace {

std::string DefaultText(const std::variant<std::string*, bool*, int*, int64_t*, uint32_t*,
                                           uint64_t*, double*>& t) {
  return std::visit(
      [](auto* p) -> std::string {
        using T = std::remove_pointer_t<decltype(p)>;
        if constexpr (std::is_same_v<T, std::string>) {
          return kelp::StrCat("\"", *p, "\"");
        } else if constexpr (std::is_same_v<T, bool>) {
          return *p ? "true" : "false";
        } else {
          return kelp::StrCat(*p);
        }
      },
      t);
}

const char* TypeName(const std::variant<std::string*, bool*, int*, int64_t*, uint32_t*, uint64_t*,
                                        double*>& t) {
  switch (t.index()) {
    case 0: return "string";
    case 1: return "";
    case 6: return "float";
    default: return "int";
  }
}

}  // namespace

FlagSet::FlagSet(std::string name, std::string synopsis, std::string description)
    : name_(std::move(name)), synopsis_(std::move(synopsis)), description_(std::move(description)) {}

void FlagSet::AddFlag(std::string_view name, Target target, std::string_view help) {
  flags_.push_back(Flag{std::string(name), target, std::string(help), DefaultText(target)});
}
void FlagSet::Add(std::string_view n, std::string* t, std::string_view h) { AddFlag(n, t, h); }
void FlagSet::Add(std::string_view n, bool* t, std::string_view h) { AddFlag(n, t, h); }
void FlagSet::Add(std::string_view n, int* t, std::string_view h) { AddFlag(n, t, h); }
void FlagSet::Add(std::string_view n, int64_t* t, std::string_view h) { AddFlag(n, t, h); }
void FlagSet::Add(std::string_view n, uint32_t* t, std::string_view h) { AddFlag(n, t, h); }
void FlagSet::Add(std::string_view n, uint64_t* t, std::string_view h) { AddFlag(n, t, h); }
void FlagSet::Add(std::string_view n, double* t, std::string_view h) { AddFlag(n, t, h); }

void FlagSet::Alias(std::string_view alias, std::string_view name) {
  aliases_.emplace_back(std::string(alias), std::string(name));
}

FlagSet::Flag* FlagSet::Find(std::string_view name) {
  for (auto& [alias, target] : aliases_) {
    if (alias == name) name = target;
  }
  for (auto& f : flags_) {
    if (f.name == name) return &f;
  }
  return nullptr;
}

bool FlagSet::IsSet(std::string_view name) const {
  for (const auto& f : flags_) {
    if (f.name == name) return f.set;
  }
  return false;
}

absl::Status FlagSet::Set(Flag& flag, std::string_view value) {
  auto bad = [&](std::string_view what) {
    return absl::InvalidArgumentError(
        kelp::StrCat("invalid value \"", value, "\" for flag -", flag.name, ": ", what));
  };
  flag.set = true;
  return std::visit(
      [&](auto* p) -> absl::Status {
        using T = std::remove_pointer_t<decltype(p)>;
        if constexpr (std::is_same_v<T, std::string>) {
          *p = std::string(value);
        } else if constexpr (std::is_same_v<T, bool>) {
          if (value == "true" || value == "1" || value == "t" || value == "T" || value == "TRUE" ||
              value == "True") {
            *p = true;
          } else if (value == "false" || value == "0" || value == "f" || value == "F" ||
                     value == "FALSE" || value == "False") {
            *p = false;
          } else {
            return bad("want true or false");
          }
        } else if constexpr (std::is_same_v<T, double>) {
          if (!kelp::ParseDouble(value, p)) return bad("want a number");
        } else {
          int64_t v = 0;
          if (!kelp::ParseInt(value, &v)) return bad("want an integer");
          if (v < static_cast<int64_t>(std::numeric_limits<T>::min()) ||
              (v > 0 && static_cast<uint64_t>(v) > std::numeric_limits<T>::max())) {
            return bad("out of range");
          }
          *p = static_cast<T>(v);
        }
        return absl::OkStatus();
      },
      flag.target);
}

absl::Status FlagSet::Parse(int argc, char** argv) {
  std::vector<std::string> args(argv, argv + argc);
  return Parse(args);
}

absl::Status FlagSet::Parse(const std::vector<std::string>& args) {
  for (size_t i = 0; i < args.size(); ++i) {
    std::string_view a = args[i];
    if (a == "--") {
      args_.insert(args_.end(), args.begin() + i + 1, args.end());
      break;
    }
    if (a.size() < 2 || a[0] != '-') {
      args_.emplace_back(a);
      continue;
    }
    a.remove_prefix(a[1] == '-' ? 2 : 1);
    std::string_view name = a, value;
    bool has_value = false;
    if (auto eq = a.find('='); eq != std::string_view::npos) {
      name = a.substr(0, eq);
      value = a.substr(eq + 1);
      has_value = true;
    }
    if (name == "h" || name == "help") {
      help_requested_ = true;
      continue;
    }
    Flag* f = Find(name);
    if (f == nullptr) {
      return absl::InvalidArgumentError(kelp::StrCat("flag provided but not defined: -", name));
    }
    if (!has_value) {
      if (std::holds_alternative<bool*>(f->target)) {
        value = "true";
      } else if (i + 1 < args.size()) {
        value = args[++i];
      } else {
        return absl::InvalidArgumentError(kelp::StrCat("flag needs an argument: -", name));
      }
    }
    if (absl::Status s = Set(*f, value); !s.ok()) return s;
  }
  return absl::OkStatus();
}

void FlagSet::ParseOrExit(int argc, char** argv) {
  absl::Status s = Parse(argc, argv);
  if (help_requested_) {
    std::fputs(Usage().c_str(), stdout);
    std::exit(0);
  }
  if (!s.ok()) {
    std::fprintf(stderr, "kelp %s: %s (see 'kelp %s -h')\n", name_.c_str(),
                 std::string(s.message()).c_str(), name_.c_str());
    std::exit(2);
  }
}

std::string FlagSet::Usage() const {
  std::string out = kelp::StrCat("Usage: ", synopsis_, "\n\n", description_, "\n\nFlags:\n");
  for (const auto& f : flags_) {
    const char* type = TypeName(f.target);
    kelp::StrAppend(&out, "  -", f.name, *type ? " " : "", type, "\n    \t", f.help);
    bool zero = f.default_text == "\"\"" || f.default_text == "false" || f.default_text == "0";
    if (!zero) kelp::StrAppend(&out, " (default ", f.default_text, ")");
    kelp::StrAppend(&out, "\n");
  }
  for (const auto& [alias, name] : aliases_) {
    kelp::StrAppend(&out, "  -", alias, "\n    \talias of -", name, "\n");
  }
  return out;
}

}  // namespace kelp
