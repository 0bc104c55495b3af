#include "filer/store/records.h"

#include <sys/stat.h>

#include <catch2/catch.hpp>

#include "filer/store/keys.h"

using namespace kelp::filer;

TEST_CASE("inode records round-trip") {
  InodeRecord r;
  r.mode = S_IFLNK | 0777;
  r.uid = 1000;
  r.gid = 4294967295u;
  r.size = 1ULL << 50;
  r.nlink = 3;
  r.atime_ns = -1;
  r.mtime_ns = 1'700'000'000'123'456'789;
  r.ctime_ns = 5;
  r.crtime_ns = 6;
  r.rdev = 0x0801;
  r.generation = 1;
  r.parent = 77;
  r.version = 99;
  r.symlink_target = std::string("a\0b", 3);
  r.chunk_count = 10;
  r.compacted_chunks = 4;
  r.inline_size = 12;
  r.next_cookie = 1234;
  auto d = DecodeInode(42, EncodeInode(r));
  REQUIRE(d.ok());
  CHECK(d->ino == 42);
  CHECK(EncodeInode(*d) == EncodeInode(r));
  CHECK(d->atime_ns == -1);
  CHECK(d->symlink_target == r.symlink_target);
  Attr a = d->ToAttr();
  CHECK(a.ino() == 42);
  CHECK(a.mtime_ns() == r.mtime_ns);
  CHECK_FALSE(DecodeInode(1, "").ok());
  CHECK_FALSE(DecodeInode(1, EncodeInode(r).substr(0, 10)).ok());
}

TEST_CASE("the xattr count is an optional trailing field, absent means unknown") {
  InodeRecord r;
  r.mode = S_IFREG | 0644;
  CHECK(r.ToAttr().no_xattrs());
  r.xattr_count = 2;
  auto d = DecodeInode(7, EncodeInode(r));
  REQUIRE(d.ok());
  CHECK(d->xattrs_counted);
  CHECK(d->xattr_count == 2);
  CHECK_FALSE(d->ToAttr().no_xattrs());
  // A record written before the count was kept: "may have xattrs".
  r.xattrs_counted = false;
  std::string old = EncodeInode(r);
  d = DecodeInode(7, old);
  REQUIRE(d.ok());
  CHECK_FALSE(d->xattrs_counted);
  CHECK_FALSE(d->ToAttr().no_xattrs());
  CHECK(EncodeInode(*d) == old);
}

TEST_CASE("the last chunk seq trails the xattr count") {
  InodeRecord r;
  r.mode = S_IFREG | 0644;
  r.xattr_count = 1;
  r.last_chunk_seq = 1ULL << 40;
  auto d = DecodeInode(7, EncodeInode(r));
  REQUIRE(d.ok());
  CHECK(d->xattr_count == 1);
  CHECK(d->last_chunk_seq == 1ULL << 40);
  // Absent (0) costs nothing; a record without it decodes as 0.
  r.last_chunk_seq = 0;
  CHECK(EncodeInode(r).size() < EncodeInode(*d).size());
  CHECK(DecodeInode(7, EncodeInode(r))->last_chunk_seq == 0);
}

TEST_CASE("dentry, index, chunk and gc values round-trip") {
  auto d = DecodeDentry(EncodeDentry({123456789, S_IFDIR, 55}));
  REQUIRE(d.ok());
  CHECK(d->ino == 123456789);
  CHECK(d->type == S_IFDIR);
  CHECK(d->cookie == 55);
  auto k = DecodeDirIndex(EncodeDirIndex(9, S_IFREG, "name with spaces"));
  CHECK(k->name == "name with spaces");
  Chunk c;
  c.set_fid("3,01637037d6");
  c.set_offset(1);
  c.set_size(2);
  c.set_blob_offset(3);
  c.set_blob_size(4);
  auto c2 = DecodeChunk(77, EncodeChunk(c));
  REQUIRE(c2.ok());
  CHECK(c2->seq() == 77);
  CHECK(c2->fid() == "3,01637037d6");
  CHECK(c2->blob_size() == 4);
  auto g = DecodeGc(EncodeGc({"1,02aa", 3, 9}));
  CHECK(g->fid == "1,02aa");
  CHECK(g->attempts == 3);
  CHECK_FALSE(DecodeChunk(1, "\x05").ok());
}

TEST_CASE("keys sort numerically and prefix ends bound their family") {
  CHECK(keys::DentryKey(255, "z") < keys::DentryKey(256, "a"));
  CHECK(keys::ChunkKey(1, 9) < keys::ChunkKey(1, 10));
  CHECK(keys::ChunkKey(1, UINT64_MAX) < keys::PrefixEnd(keys::ChunkPrefix(1)));
  CHECK(keys::PrefixEnd(keys::ChunkPrefix(1)) <= keys::ChunkKey(2, 0));
  CHECK(keys::PrefixEnd("a\xff\xff") == "b");
  CHECK(keys::PrefixEnd("\xff").empty());
  CHECK(keys::FirstU64(keys::GcKey(5, 6)) == 5);
  CHECK(keys::SecondU64(keys::GcKey(5, 6)) == 6);
  CHECK(keys::NameOf(keys::XattrKey(3, "user.x")) == "user.x");
}

// Regression (filer_records_fuzz): a key shorter than its fields threw std::out_of_range.
TEST_CASE("key field accessors read short keys as 0 and empty names") {
  std::string seven("D\0\0\0\0\0\x01", 7);
  CHECK(keys::FirstU64(seven) == 0);
  CHECK(keys::SecondU64(seven) == 0);
  CHECK(keys::NameOf(seven).empty());
  CHECK(keys::FirstU64("") == 0);
  CHECK(keys::SecondU64(keys::InodeKey(3)) == 0);
  CHECK(keys::FirstU64(keys::InodeKey(3)) == 3);
  CHECK(keys::NameOf(keys::DentryPrefix(3)).empty());
}

TEST_CASE(
    "insert hint prefixes: a directory's names and cookies, a counter stripe, one run per other "
    "family") {
  const std::string d = keys::DentryKey(7, "name");
  CHECK(keys::InsertHintPrefix(d) == 9);
  CHECK(d.substr(0, keys::InsertHintPrefix(d)) == keys::DentryPrefix(7));
  CHECK(keys::InsertHintPrefix(keys::DirIndexKey(7, 3)) == 9);
  CHECK(keys::DirIndexKey(7, 3).substr(0, 9) == keys::DirIndexPrefix(7));
  CHECK(keys::InsertHintPrefix(keys::CounterKey(2)) == keys::CounterKey(2).size());
  CHECK(keys::InsertHintPrefix(keys::EventKey(9)) == 1);
  CHECK(keys::InsertHintPrefix(keys::ChunkKey(7, 1)) == 1);
  CHECK(keys::InsertHintPrefix(keys::JournalKey(7, 1)) == 1);
  CHECK(keys::InsertHintPrefix(keys::HolderKey(7, "s")) == 1);
  CHECK(keys::InsertHintPrefix(keys::SessionOpenKey("s", 7)) == 1);
  CHECK(keys::InsertHintPrefix(keys::InodeKey(7)) == 0);
  CHECK(keys::InsertHintPrefix(keys::SessionKey("s")) == 0);
  // The starts of prefix scans and range deletes have none (a range tombstone must not start
  // at a hinted key), nor do short, empty or unknown keys.
  CHECK(keys::InsertHintPrefix(keys::DentryPrefix(7)) == 0);
  CHECK(keys::InsertHintPrefix(keys::DirIndexPrefix(7)) == 0);
  CHECK(keys::InsertHintPrefix(keys::ChunkPrefix(7)) == 0);
  CHECK(keys::InsertHintPrefix(keys::JournalPrefix(7)) == 0);
  CHECK(keys::InsertHintPrefix(keys::Family(keys::kEvent)) == 0);
  CHECK(keys::InsertHintPrefix("") == 0);
  CHECK(keys::InsertHintPrefix("x") == 0);
}
