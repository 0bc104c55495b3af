#include "filer/http/body.h"

#include <catch2/catch.hpp>

#include "shared/status.h"

using namespace kelp;
using namespace kelp::filer;

namespace {

// Hands out its data in pieces of at most `step` bytes, as a slow socket would.
class DribbleBody : public BodySource {
 public:
  DribbleBody(std::string data, size_t step) : data_(std::move(data)), step_(step) {}
  absl::StatusOr<size_t> Read(char* buf, size_t n) override {
    size_t k = std::min({n, step_, data_.size() - pos_});
    memcpy(buf, data_.data() + pos_, k);
    pos_ += k;
    return k;
  }

 private:
  std::string data_;
  size_t step_;
  size_t pos_ = 0;
};

absl::StatusOr<std::string> ReadAllOf(BodySource& b) {
  std::string out;
  RETURN_IF_ERROR(ReadUpTo(b, 1 << 30, &out));
  return out;
}

std::string Form(const std::string& boundary, const std::string& content) {
  return "--" + boundary +
         "\r\nContent-Disposition: form-data; name=\"note\"\r\n\r\nnot the file\r\n--" + boundary +
         "\r\nContent-Disposition: form-data; name=\"file\"; filename=\"dir\\\\hello.txt\"\r\n"
         "Content-Type: text/plain\r\n\r\n" +
         content + "\r\n--" + boundary + "--\r\nepilogue";
}

}  // namespace

TEST_CASE("multipart boundary from the content type") {
  CHECK(MultipartBoundary("multipart/form-data; boundary=abc") == "abc");
  CHECK(MultipartBoundary("Multipart/Form-Data;boundary=\"a b;c\"") == "a b;c");
  CHECK(MultipartBoundary("multipart/form-data; charset=x; boundary=q") == "q");
  CHECK(MultipartBoundary("application/octet-stream").empty());
  CHECK(MultipartBoundary("multipart/form-data").empty());
  CHECK(MultipartBoundary("").empty());
}

TEST_CASE("multipart: the file part streams out byte exact, however the body is cut") {
  const std::string boundary = "----WebKitFormBoundary7MA4YWxkTrZu0gW";
  std::string content;
  for (int i = 0; i < 200000; ++i) content.push_back(static_cast<char>(i * 7 + i / 251));
  // Bytes that look like a delimiter but are not one.
  content += "\r\n--" + boundary.substr(0, 10) + "\r\n-\r\n--";
  for (size_t step : {1, 3, 7, 64, 4096, 1 << 20}) {
    DribbleBody in(Form(boundary, content), step);
    MultipartFileBody part(&in, boundary);
    REQUIRE(part.Open().ok());
    CHECK(part.filename() == "hello.txt");
    CHECK(part.content_type() == "text/plain");
    auto got = ReadAllOf(part);
    REQUIRE(got.ok());
    CHECK(*got == content);
  }
}

TEST_CASE("multipart: empty file, part named file without filename, no preamble CRLF") {
  {
    StringBody in(
        "--b\r\nContent-Disposition: form-data; name=\"file\"; "
        "filename=\"e\"\r\n\r\n\r\n--b--\r\n");
    MultipartFileBody part(&in, "b");
    REQUIRE(part.Open().ok());
    CHECK(part.filename() == "e");
    CHECK(ReadAllOf(part).value() == "");
  }
  {
    StringBody in(
        "preamble\r\n--b\r\nContent-Disposition: form-data; name=\"file\"\r\n\r\nxyz\r\n--b--");
    MultipartFileBody part(&in, "b");
    REQUIRE(part.Open().ok());
    CHECK(part.filename().empty());
    CHECK(ReadAllOf(part).value() == "xyz");
  }
}

TEST_CASE("multipart: malformed bodies are EINVAL") {
  auto open = [](std::string body) {
    StringBody in(std::move(body));
    MultipartFileBody part(&in, "b");
    return ErrnoOf(part.Open());
  };
  CHECK(open("") == EINVAL);
  CHECK(open("no delimiter at all") == EINVAL);
  CHECK(open("--b--\r\n") == EINVAL);  // no parts
  CHECK(open("--b\r\nContent-Disposition: form-data; name=\"x\"\r\n\r\nv\r\n--b--") ==
        EINVAL);  // no file
  CHECK(open("--b\r\nContent-Disposition: form-data; name=\"file\"") ==
        EINVAL);  // cut in the headers
  CHECK(open("--bXYZ") == EINVAL);
  // The body ends inside the file: reading fails rather than returning a short file.
  StringBody in(
      "--b\r\nContent-Disposition: form-data; name=\"file\"; filename=\"f\"\r\n\r\npartial data");
  MultipartFileBody part(&in, "b");
  REQUIRE(part.Open().ok());
  CHECK(ErrnoOf(ReadAllOf(part).status()) == EINVAL);
}
