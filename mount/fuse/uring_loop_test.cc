#include "mount/fuse/uring_loop.h"

#include <linux/fuse.h>

#include <catch2/catch.hpp>

#include <cstring>
#include <string>
#include <vector>

namespace kelp::mount::fuse {
namespace {

using uring_abi::ReqHeader;

std::vector<bool> Cpus(std::initializer_list<int> on, size_t n) {
  std::vector<bool> v(n, false);
  for (int c : on) v[static_cast<size_t>(c)] = true;
  return v;
}

// An entry as the kernel fills it: the in header, the operation's struct in op_in, the rest of
// the arguments at the payload.
ReqHeader Entry(uint32_t opcode, uint64_t unique, std::string_view op, std::string_view payload,
                char* at) {
  ReqHeader h;
  std::memset(&h, 0, sizeof h);
  fuse_in_header in;
  std::memset(&in, 0, sizeof in);
  in.opcode = opcode;
  in.unique = unique;
  in.nodeid = 7;
  in.len = static_cast<uint32_t>(sizeof in + op.size() + payload.size());
  std::memcpy(h.in_out, &in, sizeof in);
  std::memcpy(h.op_in, op.data(), op.size());
  h.ent.commit_id = unique;
  h.ent.payload_sz = static_cast<uint32_t>(payload.size());
  std::memcpy(at, payload.data(), payload.size());
  return h;
}

TEST_CASE("kernel CPU lists parse as the kernel writes them", "[uring]") {
  CHECK(ParseCpuList("0-1\n") == Cpus({0, 1}, 2));
  CHECK(ParseCpuList("0") == Cpus({0}, 1));
  CHECK(ParseCpuList("0-2,5,7-8\n") == Cpus({0, 1, 2, 5, 7, 8}, 9));
  CHECK(ParseCpuList("").empty());
  CHECK(ParseCpuList("x").empty());
  CHECK(ParseCpuList("3-1").empty());
  CHECK(ParseCpuList("0-").empty());
}

TEST_CASE("a ring request is rebuilt as /dev/fuse delivers it, in front of its payload",
          "[uring]") {
  std::vector<char> buf(4096 + 65536);
  char* payload = buf.data() + 4096;
  fuse_write_in w;
  std::memset(&w, 0, sizeof w);
  w.offset = 12345;
  w.size = 5;
  std::string op(reinterpret_cast<const char*>(&w), sizeof w);
  ReqHeader h = Entry(FUSE_WRITE, 42, op, "hello", payload);
  size_t len = 0;
  char* msg = RebuildRequest(h, payload, 4096, 65536, &len);
  REQUIRE(msg != nullptr);
  CHECK(len == sizeof(fuse_in_header) + sizeof w + 5);
  CHECK(msg + sizeof(fuse_in_header) + sizeof w == payload);  // the payload stays where it is
  fuse_in_header in;
  std::memcpy(&in, msg, sizeof in);
  CHECK(in.opcode == FUSE_WRITE);
  CHECK(in.unique == 42);
  CHECK(in.nodeid == 7);
  fuse_write_in got;
  std::memcpy(&got, msg + sizeof in, sizeof got);
  CHECK(got.offset == 12345);
  CHECK(std::string(msg + sizeof in + sizeof got, 5) == "hello");

  // An operation whose struct the kernel leaves empty (a LOOKUP: the name is the payload).
  h = Entry(FUSE_LOOKUP, 43, "", std::string("name\0", 5), payload);
  msg = RebuildRequest(h, payload, 4096, 65536, &len);
  REQUIRE(msg != nullptr);
  CHECK(msg + sizeof(fuse_in_header) == payload);
  CHECK(len == sizeof(fuse_in_header) + 5);
  CHECK(std::string(msg + sizeof(fuse_in_header)) == "name");
}

TEST_CASE("a ring request whose sizes do not add up is refused", "[uring]") {
  std::vector<char> buf(4096 + 4096);
  char* payload = buf.data() + 4096;
  size_t len = 0;
  ReqHeader h = Entry(FUSE_WRITE, 1, std::string(40, 'o'), "data", payload);
  fuse_in_header in;
  std::memcpy(&in, h.in_out, sizeof in);

  ReqHeader shorter = h;  // a length below header and payload
  in.len = sizeof in + 3;
  std::memcpy(shorter.in_out, &in, sizeof in);
  CHECK(RebuildRequest(shorter, payload, 4096, 4096, &len) == nullptr);

  ReqHeader big_op = h;  // an operation struct larger than op_in holds
  in.len = static_cast<uint32_t>(sizeof in + uring_abi::kOpInSize + 1 + 4);
  std::memcpy(big_op.in_out, &in, sizeof in);
  CHECK(RebuildRequest(big_op, payload, 4096, 4096, &len) == nullptr);

  ReqHeader big_payload = h;  // a payload past the buffer
  big_payload.ent.payload_sz = 4097;
  in.len = sizeof in + 4097;
  std::memcpy(big_payload.in_out, &in, sizeof in);
  CHECK(RebuildRequest(big_payload, payload, 4096, 4096, &len) == nullptr);

  CHECK(RebuildRequest(h, payload, 4096, 4096, &len) != nullptr);
  CHECK(RebuildRequest(h, payload, 50, 4096, &len) == nullptr);  // no room in front
}

TEST_CASE("a reply's arguments are laid one after another in the entry's payload", "[uring]") {
  fuse_out_header oh;
  std::memset(&oh, 0, sizeof oh);
  std::string a = "first-", b = "second";
  iovec iov[3] = {{&oh, sizeof oh}, {a.data(), a.size()}, {b.data(), b.size()}};
  std::vector<char> payload(64, 'x');
  auto n = CopyReplyArgs(iov, 3, payload.data(), payload.size());
  REQUIRE(n.has_value());
  CHECK(*n == 12);
  CHECK(std::string(payload.data(), 12) == "first-second");
  CHECK(payload[12] == 'x');

  // Built in place (a read into the entry's buffer): nothing moves.
  std::memcpy(payload.data(), "in-place", 8);
  iovec in_place[2] = {{&oh, sizeof oh}, {payload.data(), 8}};
  n = CopyReplyArgs(in_place, 2, payload.data(), payload.size());
  REQUIRE(n.has_value());
  CHECK(*n == 8);
  CHECK(std::string(payload.data(), 8) == "in-place");

  // Too large for the entry: refused, nothing copied.
  std::string big(65, 'b');
  iovec too_big[2] = {{&oh, sizeof oh}, {big.data(), big.size()}};
  std::vector<char> small(64, 'x');
  CHECK_FALSE(CopyReplyArgs(too_big, 2, small.data(), small.size()).has_value());
  CHECK(small[0] == 'x');

  // No arguments (an error, or a reply without a body).
  n = CopyReplyArgs(iov, 1, payload.data(), payload.size());
  REQUIRE(n.has_value());
  CHECK(*n == 0);
}

}  // namespace
}  // namespace kelp::mount::fuse
