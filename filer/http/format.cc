#include "filer/http/format.h"

#include <sys/stat.h>

#include <cctype>
#include <cstdio>
#include <ctime>

namespace kelp::filer {

uint32_t GoFileMode(uint32_t m) {
  // Bits of Go's io/fs.FileMode.
  constexpr uint32_t kDir = 1u << 31, kSymlink = 1u << 27, kDevice = 1u << 26,
                     kNamedPipe = 1u << 25, kSocket = 1u << 24, kSetuid = 1u << 23,
                     kSetgid = 1u << 22, kCharDevice = 1u << 21, kSticky = 1u << 20;
  uint32_t out = m & 0777;
  switch (m & S_IFMT) {
    case S_IFDIR:
      out |= kDir;
      break;
    case S_IFLNK:
      out |= kSymlink;
      break;
    case S_IFIFO:
      out |= kNamedPipe;
      break;
    case S_IFSOCK:
      out |= kSocket;
      break;
    case S_IFCHR:
      out |= kDevice | kCharDevice;
      break;
    case S_IFBLK:
      out |= kDevice;
      break;
    default:
      break;
  }
  if (m & S_ISUID) out |= kSetuid;
  if (m & S_ISGID) out |= kSetgid;
  if (m & S_ISVTX) out |= kSticky;
  return out;
}

std::string Rfc3339Nano(int64_t unix_ns) {
  // By hand, not strftime: listings format two of these per entry, and gmtime_r takes
  // glibc's time zone lock.
  int64_t secs = unix_ns / 1000000000, frac = unix_ns % 1000000000;
  if (frac < 0) {
    frac += 1000000000;
    --secs;
  }
  int64_t days = secs / 86400, rem = secs % 86400;
  if (rem < 0) {
    rem += 86400;
    --days;
  }
  // Civil date from days since 1970-01-01 (H. Hinnant's days_from_civil, inverted).
  int64_t z = days + 719468;
  int64_t era = (z >= 0 ? z : z - 146096) / 146097;
  int64_t doe = z - era * 146097;
  int64_t yoe = (doe - doe / 1460 + doe / 36524 - doe / 146096) / 365;
  int64_t doy = doe - (365 * yoe + yoe / 4 - yoe / 100);
  int64_t mp = (5 * doy + 2) / 153;
  int64_t day = doy - (153 * mp + 2) / 5 + 1;
  int64_t month = mp < 10 ? mp + 3 : mp - 9;
  int64_t year = yoe + era * 400 + (month <= 2 ? 1 : 0);
  char buf[40];
  int n = snprintf(buf, sizeof buf, "%04lld-%02lld-%02lldT%02lld:%02lld:%02lld",
                   static_cast<long long>(year), static_cast<long long>(month),
                   static_cast<long long>(day), static_cast<long long>(rem / 3600),
                   static_cast<long long>(rem / 60 % 60), static_cast<long long>(rem % 60));
  std::string out(buf, n);
  if (frac != 0) {
    char f[10];
    for (int k = 8; k >= 0; --k) {
      f[k] = static_cast<char>('0' + frac % 10);
      frac /= 10;
    }
    int len = 9;
    while (f[len - 1] == '0') --len;
    out += '.';
    out.append(f, len);
  }
  out += 'Z';
  return out;
}

std::string HttpDate(int64_t unix_ns) {
  time_t t = static_cast<time_t>(unix_ns / 1000000000);
  tm tm;
  gmtime_r(&t, &tm);
  char buf[64];
  size_t n = strftime(buf, sizeof buf, "%a, %d %b %Y %H:%M:%S GMT", &tm);
  return std::string(buf, n);
}

int64_t ParseHttpDate(std::string_view s) {
  tm tm{};
  std::string str(s);
  const char* end = strptime(str.c_str(), "%a, %d %b %Y %H:%M:%S GMT", &tm);
  if (end == nullptr || *end != '\0') return -1;
  return static_cast<int64_t>(timegm(&tm));
}

std::string_view MimeByExtension(std::string_view name) {
  size_t dot = name.rfind('.');
  if (dot == std::string_view::npos || dot + 1 >= name.size()) return "";
  std::string ext(name.substr(dot + 1));
  for (char& c : ext) c = static_cast<char>(std::tolower(static_cast<unsigned char>(c)));
  static const struct {
    const char* ext;
    const char* mime;
  } kTypes[] = {
      {"html", "text/html; charset=utf-8"},
      {"htm", "text/html; charset=utf-8"},
      {"txt", "text/plain; charset=utf-8"},
      {"log", "text/plain; charset=utf-8"},
      {"md", "text/markdown; charset=utf-8"},
      {"css", "text/css; charset=utf-8"},
      {"csv", "text/csv; charset=utf-8"},
      {"js", "text/javascript; charset=utf-8"},
      {"mjs", "text/javascript; charset=utf-8"},
      {"json", "application/json"},
      {"xml", "text/xml; charset=utf-8"},
      {"pdf", "application/pdf"},
      {"zip", "application/zip"},
      {"gz", "application/gzip"},
      {"tgz", "application/gzip"},
      {"tar", "application/x-tar"},
      {"bz2", "application/x-bzip2"},
      {"xz", "application/x-xz"},
      {"zst", "application/zstd"},
      {"wasm", "application/wasm"},
      {"png", "image/png"},
      {"jpg", "image/jpeg"},
      {"jpeg", "image/jpeg"},
      {"gif", "image/gif"},
      {"webp", "image/webp"},
      {"svg", "image/svg+xml"},
      {"ico", "image/x-icon"},
      {"avif", "image/avif"},
      {"mp4", "video/mp4"},
      {"webm", "video/webm"},
      {"mp3", "audio/mpeg"},
      {"ogg", "audio/ogg"},
      {"wav", "audio/wav"},
      {"woff", "font/woff"},
      {"woff2", "font/woff2"},
      {"ttf", "font/ttf"},
  };
  for (const auto& t : kTypes) {
    if (ext == t.ext) return t.mime;
  }
  return "";
}

}  // namespace kelp::filer
