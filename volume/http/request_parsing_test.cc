#include "volume/http/request_parsing.h"

#include <catch2/catch.hpp>

using namespace kelp::volume;

TEST_CASE("fid paths in all their spellings") {
  for (std::string p : {"/3,01637037d6", "/3,01637037d6.jpg", "/3/01637037d6", "/3/01637037d6.png",
                        "/3/01637037d6/some-file.txt"}) {
    INFO(p);
    auto f = ParseFidPath(p);
    REQUIRE(f.ok());
    CHECK(f->volume_id == 3);
    CHECK(f->key == 1);
    CHECK(f->cookie == 0x637037d6);
  }
  auto sib = ParseFidPath("/3,01637037d6_2");
  REQUIRE(sib.ok());
  CHECK(sib->key == 3);
  for (std::string p :
       {"", "/", "/3", "/3,", "/,01637037d6", "/x,01637037d6", "/3,0163703", "/3,zz637037d6",
        "/3/01637037d6/a/b", "/3,01637037d6/name", "3,01637037d6", "/3/", "/3/01637037d6/"}) {
    INFO(p);
    CHECK(ParseFidPath(p).status().code() == absl::StatusCode::kInvalidArgument);
  }
}

TEST_CASE("multipart/form-data file parts") {
  std::string body =
      "preamble\r\n--b0und\r\nContent-Disposition: form-data; name=\"comment\"\r\n\r\nhi\r\n"
      "--b0und\r\nContent-Disposition: form-data; name=\"file\"; "
      "filename=\"a.txt\"\r\nContent-Type: text/plain\r\n\r\n"
      "line1\r\nline2\r\n--b0und--\r\n";
  auto f = ParseMultipartFile("multipart/form-data; boundary=b0und", body);
  REQUIRE(f.ok());
  CHECK(f->filename == "a.txt");
  CHECK(f->data == "line1\r\nline2");
  f = ParseMultipartFile("multipart/form-data; boundary=\"b0und\"", body);
  REQUIRE(f.ok());
  CHECK(f->data == "line1\r\nline2");
  // Without a filename the first part is the file.
  std::string nameless =
      "--q\r\nContent-Disposition: form-data; name=\"file\"\r\n\r\n\r\n--q--\r\n";
  f = ParseMultipartFile("multipart/form-data; boundary=q", nameless);
  REQUIRE(f.ok());
  CHECK(f->data.empty());
  CHECK(IsMultipart("Multipart/Form-Data; boundary=x"));
  CHECK_FALSE(IsMultipart("application/octet-stream"));
  CHECK_FALSE(ParseMultipartFile("multipart/form-data", body).ok());
  CHECK_FALSE(ParseMultipartFile("multipart/form-data; boundary=zzz", body).ok());
  CHECK_FALSE(
      ParseMultipartFile("multipart/form-data; boundary=b0und", "--b0und\r\nno end of headers")
          .ok());
  CHECK_FALSE(ParseMultipartFile("multipart/form-data; boundary=b0und",
                                 "--b0und\r\nX: y\r\n\r\nunterminated")
                  .ok());
}
