// The checker finds each kind of damage and RepairNamespace repairs it without losing data:
// a namespace is built through FilerService, damaged by hand in the store, repaired, and then
// used again through a restarted FilerService.
#include "filer/fsck/repair.h"

#include <sys/stat.h>

#include <set>

#include "filer/core/test_util.h"
#include "filer/store/keys.h"
#include "filer/store/records.h"
#include "shared/coding.h"
#include "shared/strings.h"

using namespace kelp::filer;
using namespace kelp::filer::testing;

namespace {

std::multiset<ProblemKind> Kinds(KvStore& kv) {
  auto r = CheckNamespace(kv);
  REQUIRE(r.ok());
  std::multiset<ProblemKind> out;
  for (const auto& p : r->problems) out.insert(p.kind);
  return out;
}

bool Has(const std::multiset<ProblemKind>& kinds, ProblemKind k) { return kinds.count(k) > 0; }

// Repairs, requires a clean store afterwards, restarts the filer on it; returns the log.
std::vector<std::string> RepairAndRestart(Harness& h) {
  std::vector<std::string> log;
  auto r = RepairNamespace(*h.kv, [&](std::string_view l) { log.emplace_back(l); });
  REQUIRE(r.ok());
  for (const auto& l : log) UNSCOPED_INFO(l);
  h.RequireConsistent();
  h.Restart();
  h.RequireConsistent();
  return log;
}

InodeRecord Rec(Harness& h, uint64_t ino) {
  auto v = h.kv->Get(keys::InodeKey(ino));
  REQUIRE(v.ok());
  auto r = DecodeInode(ino, *v);
  REQUIRE(r.ok());
  return *r;
}
void PutRec(Harness& h, const InodeRecord& r) { REQUIRE(h.kv->Put(keys::InodeKey(r.ino), EncodeInode(r)).ok()); }

// Removes parent/name (dentry and readdir slot) behind the filer's back.
void DropName(Harness& h, uint64_t parent, const std::string& name) {
  auto v = h.kv->Get(keys::DentryKey(parent, name));
  REQUIRE(v.ok());
  auto d = DecodeDentry(*v);
  REQUIRE(d.ok());
  REQUIRE(h.kv->Delete(keys::DentryKey(parent, name)).ok());
  REQUIRE(h.kv->Delete(keys::DirIndexKey(parent, d->cookie)).ok());
}

uint64_t FileWithChunks(Harness& h, uint64_t parent, const std::string& name, uint64_t first_key) {
  uint64_t f = h.Mkfile(parent, name);
  CommitChunksRequest c;
  c.set_ino(f);
  *c.add_chunks() = MakeChunk(Fid(first_key), 0, 100);
  *c.add_chunks() = MakeChunk(Fid(first_key + 1), 100, 50);
  REQUIRE(h.fs->CommitChunks(c).ok());
  REQUIRE(h.fs->SetXattr(f, "user.k", "v", 0).ok());
  return f;
}

uint64_t LostFoundIno(Harness& h) {
  auto lf = h.fs->Lookup(1, std::string(kLostFound));
  REQUIRE(lf.ok());
  CHECK(S_ISDIR(lf->mode()));
  return lf->ino();
}

}  // namespace

TEST_CASE("a clean namespace needs no repair") {
  Harness h(KELP_BACKENDS);
  uint64_t d = h.Mkdir(1, "d");
  FileWithChunks(h, d, "f", 10);
  REQUIRE(h.fs->Link(h.fs->Lookup(d, "f")->ino(), 1, "hard").ok());
  std::vector<std::string> log;
  auto r = RepairNamespace(*h.kv, [&](std::string_view l) { log.emplace_back(l); });
  REQUIRE(r.ok());
  CHECK(r->fixes == 0);
  CHECK(log.empty());
  CHECK_FALSE(h.fs->Lookup(1, std::string(kLostFound)).ok());
}

TEST_CASE("a dangling entry is dropped") {
  Harness h(KELP_BACKENDS);
  uint64_t d = h.Mkdir(1, "d");
  uint64_t f = h.Mkfile(d, "gone");
  h.Mkfile(d, "kept");
  REQUIRE(h.kv->Delete(keys::InodeKey(f)).ok());
  auto kinds = Kinds(*h.kv);
  CHECK(Has(kinds, ProblemKind::kDentryChildMissing));
  CHECK(Has(kinds, ProblemKind::kCounters));
  RepairAndRestart(h);
  CHECK(kelp::ErrnoOf(h.fs->Lookup(d, "gone").status()) == ENOENT);
  CHECK(h.Names(d) == std::vector<std::string>{"kept"});
}

TEST_CASE("an inode lost under its entry comes back with its chunks and xattrs") {
  Harness h(KELP_BACKENDS);
  uint64_t f = FileWithChunks(h, 1, "data", 20);
  REQUIRE(h.kv->Delete(keys::InodeKey(f)).ok());
  auto kinds = Kinds(*h.kv);
  CHECK(Has(kinds, ProblemKind::kRecordsWithoutInode));
  CHECK(Has(kinds, ProblemKind::kDentryChildMissing));
  RepairAndRestart(h);
  auto a = h.fs->Lookup(1, "data");
  REQUIRE(a.ok());
  CHECK(a->ino() == f);
  CHECK(S_ISREG(a->mode()));
  CHECK(a->size() == 150);
  CHECK(a->nlink() == 1);
  auto chunks = h.fs->GetChunks(f);
  REQUIRE(chunks.ok());
  REQUIRE(chunks->chunks_size() == 2);
  CHECK(chunks->chunks(1).fid() == Fid(21));
  CHECK(*h.fs->GetXattr(f, "user.k") == "v");
}

TEST_CASE("a lost directory comes back with its entries, a lost root too") {
  Harness h(KELP_BACKENDS);
  uint64_t d = h.Mkdir(1, "d");
  uint64_t sub = h.Mkdir(d, "sub");
  h.Mkfile(d, "f");
  h.Mkfile(1, "top");
  REQUIRE(h.kv->Delete(keys::InodeKey(d)).ok());
  REQUIRE(h.kv->Delete(keys::InodeKey(1)).ok());
  auto kinds = Kinds(*h.kv);
  CHECK(Has(kinds, ProblemKind::kRootMissing));
  CHECK(Has(kinds, ProblemKind::kDentryParentMissing));
  RepairAndRestart(h);
  auto a = h.fs->Lookup(1, "d");
  REQUIRE(a.ok());
  CHECK(a->ino() == d);
  CHECK(S_ISDIR(a->mode()));
  CHECK(a->nlink() == 3);
  CHECK(h.fs->Lookup(d, "sub")->ino() == sub);
  CHECK(h.fs->Lookup(d, "f").ok());
  CHECK(h.fs->Lookup(1, "top").ok());
  CHECK(h.fs->GetAttr(1)->nlink() == 3);
  // The namespace works again.
  h.Mkfile(d, "new");
  h.RequireConsistent();
}

TEST_CASE("unreachable inodes go to /lost+found, never to the orphan list") {
  Harness h(KELP_BACKENDS);
  uint64_t f = FileWithChunks(h, 1, "file", 30);
  uint64_t d = h.Mkdir(1, "tree");
  uint64_t inner = h.Mkfile(h.Mkdir(d, "b"), "c");
  DropName(h, 1, "file");
  DropName(h, 1, "tree");
  auto kinds = Kinds(*h.kv);
  CHECK(kinds.count(ProblemKind::kUnreachable) == 2);
  CHECK(Has(kinds, ProblemKind::kNlink));  // the root lost a subdirectory
  RepairAndRestart(h);
  uint64_t lf = LostFoundIno(h);
  auto lost = h.Names(lf);
  std::sort(lost.begin(), lost.end());
  std::vector<std::string> want = {kelp::StrCat("#", d), kelp::StrCat("#", f)};
  std::sort(want.begin(), want.end());
  CHECK(lost == want);
  auto fa = h.fs->Lookup(lf, kelp::StrCat("#", f));
  REQUIRE(fa.ok());
  CHECK(fa->ino() == f);
  CHECK(fa->nlink() == 1);
  CHECK(h.fs->GetChunks(f)->chunks_size() == 2);
  auto da = h.fs->Lookup(lf, kelp::StrCat("#", d));
  REQUIRE(da.ok());
  CHECK(da->parent() == lf);
  CHECK(h.fs->Lookup(h.fs->Lookup(d, "b")->ino(), "c")->ino() == inner);
  CHECK(h.fs->GetAttr(lf)->nlink() == 3);
  // Nothing was queued for deletion.
  CHECK(h.GcFids().empty());
  // A second run finds nothing more to do.
  auto again = RepairNamespace(*h.kv, [](std::string_view) {});
  REQUIRE(again.ok());
  CHECK(again->fixes == 0);
}

TEST_CASE("nlink, parent pointers and bookkeeping are recomputed") {
  Harness h(KELP_BACKENDS);
  uint64_t d = h.Mkdir(1, "d");
  uint64_t e = h.Mkdir(1, "e");
  uint64_t f = FileWithChunks(h, d, "f", 40);
  REQUIRE(h.fs->Link(f, e, "g").ok());
  InodeRecord fr = Rec(h, f);
  fr.nlink = 7;
  fr.chunk_count = 9;
  PutRec(h, fr);
  InodeRecord dr = Rec(h, d);
  dr.nlink = 5;
  dr.parent = e;
  PutRec(h, dr);
  auto kinds = Kinds(*h.kv);
  CHECK(kinds.count(ProblemKind::kNlink) == 2);
  CHECK(Has(kinds, ProblemKind::kChunkCount));
  CHECK(Has(kinds, ProblemKind::kDirParent));
  RepairAndRestart(h);
  CHECK(h.fs->GetAttr(f)->nlink() == 2);
  CHECK(h.fs->GetAttr(d)->nlink() == 2);
  CHECK(h.fs->GetAttr(d)->parent() == 1);
  // The repaired counts are the ones the filer goes on with.
  REQUIRE(h.fs->Unlink(e, "g").ok());
  REQUIRE(h.fs->Unlink(d, "f").ok());
  CHECK(kelp::ErrnoOf(h.fs->GetAttr(f).status()) == ENOENT);
  CHECK(h.GcFids() == std::vector<std::string>{Fid(40), Fid(41)});
  h.RequireConsistent();
}

TEST_CASE("the readdir index is rebuilt: missing, stale and clashing slots, cookie counter") {
  Harness h(KELP_BACKENDS);
  uint64_t d = h.Mkdir(1, "d");
  for (const char* n : {"a", "b", "c", "e"}) h.Mkfile(d, n);
  auto dentry = [&](const char* n) {
    auto v = DecodeDentry(*h.kv->Get(keys::DentryKey(d, n)));
    REQUIRE(v.ok());
    return *v;
  };
  // "a" loses its slot; "b" moves to a cookie above the directory's counter; "c" claims the
  // slot of "e"; a slot names an entry that does not exist.
  REQUIRE(h.kv->Delete(keys::DirIndexKey(d, dentry("a").cookie)).ok());
  DentryValue b = dentry("b");
  REQUIRE(h.kv->Put(keys::DentryKey(d, "b"), EncodeDentry({b.ino, S_IFREG, 1000})).ok());
  DentryValue c = dentry("c");
  REQUIRE(h.kv->Put(keys::DentryKey(d, "c"), EncodeDentry({c.ino, S_IFREG, dentry("e").cookie})).ok());
  REQUIRE(h.kv->Put(keys::DirIndexKey(d, 77), EncodeDirIndex(999, S_IFREG, "zz")).ok());
  auto kinds = Kinds(*h.kv);
  CHECK(kinds.count(ProblemKind::kDentryIndex) == 3);
  CHECK(kinds.count(ProblemKind::kIndexStale) == 3);  // b's and c's old slots, and 77
  CHECK(Has(kinds, ProblemKind::kDentryCookie));
  RepairAndRestart(h);
  auto names = h.Names(d);
  std::sort(names.begin(), names.end());
  CHECK(names == std::vector<std::string>{"a", "b", "c", "e"});
  CHECK(dentry("e").cookie != dentry("c").cookie);
  h.Mkfile(d, "new");  // takes a fresh cookie
  CHECK(h.Names(d).size() == 5);
  h.RequireConsistent();
}

TEST_CASE("a GC entry for a blob still referenced is dropped, never deleted") {
  Harness h(KELP_BACKENDS);
  uint64_t f = FileWithChunks(h, 1, "f", 50);
  WriteBatch b;
  b.Put(keys::GcKey(1, 1), EncodeGc({Fid(50), 0, f}));
  b.Put(keys::GcKey(1, 2), EncodeGc({"not-a-fid", 0, f}));
  b.Put(keys::GcKey(1, 3), "\xff");
  REQUIRE(h.kv->Write(b, false).ok());
  auto kinds = Kinds(*h.kv);
  CHECK(Has(kinds, ProblemKind::kGcReferenced));
  CHECK(kinds.count(ProblemKind::kGcBadEntry) == 2);
  RepairAndRestart(h);
  CHECK(h.GcFids().empty());
  REQUIRE(h.fs->gc().RunOnce().ok());
  CHECK(h.cluster.deleted().empty());
  CHECK(h.fs->GetChunks(f)->chunks_size() == 2);
}

TEST_CASE("sequence marks are raised above every number in use") {
  Harness h(KELP_BACKENDS);
  uint64_t last = 0;
  for (int i = 0; i < 5; ++i) last = h.Mkfile(1, kelp::StrCat("f", i));
  std::string low;
  kelp::PutFixed64BE(&low, 2);
  REQUIRE(h.kv->Put(keys::SequenceKey(keys::kInodeSeq), low).ok());
  REQUIRE(h.kv->Put(keys::SequenceKey(keys::kNeedleKeySeq), low).ok());
  FileWithChunks(h, 1, "data", 500);
  auto kinds = Kinds(*h.kv);
  CHECK(kinds.count(ProblemKind::kSequence) == 2);
  RepairAndRestart(h);
  CHECK(h.Mkfile(1, "next") > last);
  CHECK(kelp::DecodeFixed64BE(*h.kv->Get(keys::SequenceKey(keys::kNeedleKeySeq))) > 501);
}

TEST_CASE("orphan marks: added to unlinked inodes, dropped from linked and missing ones") {
  Harness h(KELP_BACKENDS);
  uint64_t unlinked = FileWithChunks(h, 1, "unlinked", 60);
  uint64_t linked = h.Mkfile(1, "linked");
  DropName(h, 1, "unlinked");
  InodeRecord r = Rec(h, unlinked);
  r.nlink = 0;
  PutRec(h, r);
  REQUIRE(h.kv->Put(keys::OrphanKey(linked), "\x01").ok());
  REQUIRE(h.kv->Put(keys::OrphanKey(123456), "\x01").ok());
  auto kinds = Kinds(*h.kv);
  CHECK(Has(kinds, ProblemKind::kNotOrphan));
  CHECK(Has(kinds, ProblemKind::kOrphanLinked));
  CHECK(Has(kinds, ProblemKind::kOrphanWithoutInode));
  RepairAndRestart(h);
  CHECK(h.fs->GetAttr(linked).ok());
  // The filer purges the unlinked inode (orphan_grace is 0 in tests) and collects its blobs.
  h.fs->RunMaintenance();
  CHECK(kelp::ErrnoOf(h.fs->GetAttr(unlinked).status()) == ENOENT);
  CHECK(h.GcFids() == std::vector<std::string>{Fid(60), Fid(61)});
  h.RequireConsistent();
}

TEST_CASE("a directory cycle cut off from the root is reattached under /lost+found") {
  Harness h(KELP_BACKENDS);
  uint64_t a = h.Mkdir(1, "a");
  uint64_t b = h.Mkdir(a, "b");
  h.Mkfile(b, "f");
  // Move "a" into "b" behind the filer's back: a -> b -> a.
  DropName(h, 1, "a");
  REQUIRE(h.kv->Put(keys::DentryKey(b, "a"), EncodeDentry({a, S_IFDIR, 50})).ok());
  REQUIRE(h.kv->Put(keys::DirIndexKey(b, 50), EncodeDirIndex(a, S_IFDIR, "a")).ok());
  InodeRecord ar = Rec(h, a);
  ar.parent = b;
  PutRec(h, ar);
  InodeRecord br = Rec(h, b);
  br.next_cookie = 51;
  br.nlink = 3;
  PutRec(h, br);
  auto kinds = Kinds(*h.kv);
  CHECK(kinds.count(ProblemKind::kDirUnreachable) == 2);
  RepairAndRestart(h);
  uint64_t lf = LostFoundIno(h);
  CHECK(h.fs->Lookup(lf, kelp::StrCat("#", a))->ino() == a);
  CHECK(h.fs->Lookup(a, "b")->ino() == b);
  CHECK(h.fs->Lookup(b, "f").ok());
  CHECK_FALSE(h.fs->Lookup(b, "a").ok());
}

TEST_CASE("bad events, extra directory names and counters are repaired") {
  Harness h(KELP_BACKENDS);
  uint64_t d = h.Mkdir(1, "d");
  uint64_t e = h.Mkdir(1, "e");
  REQUIRE(h.kv->Put(keys::DentryKey(e, "alias"), EncodeDentry({d, S_IFDIR, 1})).ok());
  REQUIRE(h.kv->Put(keys::DirIndexKey(e, 1), EncodeDirIndex(d, S_IFDIR, "alias")).ok());
  InodeRecord er = Rec(h, e);
  er.next_cookie = 2;
  PutRec(h, er);
  REQUIRE(h.kv->Put(keys::EventKey(1'000'000), "garbage").ok());
  REQUIRE(h.kv->Put(keys::CounterKey(9), EncodeCounter(5)).ok());
  auto kinds = Kinds(*h.kv);
  CHECK(Has(kinds, ProblemKind::kDirExtraName));
  CHECK(Has(kinds, ProblemKind::kEventBad));
  CHECK(Has(kinds, ProblemKind::kCounters));
  CHECK(Has(kinds, ProblemKind::kSequence));  // the bogus event is above the event mark
  RepairAndRestart(h);
  CHECK_FALSE(h.fs->Lookup(e, "alias").ok());
  CHECK(h.fs->Lookup(1, "d")->ino() == d);
  CHECK(h.fs->InodeCount() == 3);
}

TEST_CASE("corrupt records are reported and left alone") {
  Harness h(KELP_BACKENDS);
  uint64_t f = h.Mkfile(1, "f");
  REQUIRE(h.kv->Put(keys::InodeKey(f), "\x09junk").ok());
  auto kinds = Kinds(*h.kv);
  CHECK(kinds == std::multiset<ProblemKind>{ProblemKind::kCorruptRecord});
  auto r = RepairNamespace(*h.kv, [](std::string_view) {});
  REQUIRE(r.ok());
  CHECK(r->fixes == 0);
  CHECK(*h.kv->Get(keys::InodeKey(f)) == "\x09junk");
  CHECK(h.kv->Get(keys::DentryKey(1, "f")).ok());
}
