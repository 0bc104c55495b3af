#include "filer/http/format.h"

#include <sys/stat.h>

#include <ctime>

#include <catch2/catch.hpp>

using namespace kelp::filer;

TEST_CASE("modes as Go's os.FileMode") {
  CHECK(GoFileMode(S_IFREG | 0644) == 420);
  CHECK(GoFileMode(S_IFDIR | 0755) == 2147484141u);
  CHECK(GoFileMode(S_IFLNK | 0777) == ((1u << 27) | 0777));
  CHECK(GoFileMode(S_IFREG | S_ISUID | 0755) == ((1u << 23) | 0755));
}

TEST_CASE("dates") {
  CHECK(Rfc3339Nano(0) == "1970-01-01T00:00:00Z");
  CHECK(Rfc3339Nano(1714979289123000000) == "2024-05-06T07:08:09.123Z");
  CHECK(Rfc3339Nano(1714979289000000001) == "2024-05-06T07:08:09.000000001Z");
  CHECK(Rfc3339Nano(951782400000000000) == "2000-02-29T00:00:00Z");
  CHECK(Rfc3339Nano(-500000000) == "1969-12-31T23:59:59.5Z");
  // Days from 1900 to 2261 (leap years, century rules) agree with gmtime_r.
  for (int64_t secs = -2208988800LL; secs < 9200000000LL; secs += 86400 + 3601) {
    time_t t = static_cast<time_t>(secs);
    tm tm;
    gmtime_r(&t, &tm);
    char want[32];
    strftime(want, sizeof want, "%Y-%m-%dT%H:%M:%SZ", &tm);
    INFO(secs);
    REQUIRE(Rfc3339Nano(secs * 1000000000) == want);
  }
  CHECK(HttpDate(1714979289123000000) == "Mon, 06 May 2024 07:08:09 GMT");
  CHECK(ParseHttpDate("Mon, 06 May 2024 07:08:09 GMT") == 1714979289);
  CHECK(ParseHttpDate("yesterday") == -1);
}

TEST_CASE("content types by extension") {
  CHECK(MimeByExtension("a.html") == "text/html; charset=utf-8");
  CHECK(MimeByExtension("A.PNG") == "image/png");
  CHECK(MimeByExtension("archive.tar.gz") == "application/gzip");
  CHECK(MimeByExtension("noext").empty());
  CHECK(MimeByExtension("trailing.").empty());
}
