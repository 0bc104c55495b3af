#!/usr/bin/env python3
"""A file-tree workload that keeps a ledger of what the file system acknowledged.

    tree_workload.py run DIR LEDGER [--seconds N] [--seed S] [--max-kb K] [--stop FILE]
    tree_workload.py verify DIR LEDGER
    tree_workload.py fill DIR LEDGER --kb K [--count N]  # K KiB files until the first error

`run` creates, overwrites, renames, deletes and reads files under DIR, each file's content a
function of its name and generation, so any byte can be checked. A write is acknowledged
once write, fsync and close returned and the directory was fsynced; only then does the
ledger (a local file, fsynced too) record it. An operation that fails leaves its names
"unknown" (they are not checked: a failed write may or may not have happened). Errors are
expected while a fault is on (EIO, ENOTCONN, ENOSPC...) and are counted, not fatal; a read
that returns other bytes than the ledger says is a failure (exit 1). Stops after --seconds or
when --stop exists.

`verify` replays the ledger and reads back every acknowledged file: exit 0 when each one
has exactly its content, 1 otherwise. Both print one JSON line of counts.
"""
import argparse
import errno
import hashlib
import json
import os
import random
import sys
import time


def content(name, gen, size):
    """Deterministic bytes for (name, gen): blocks of sha256 over a counter."""
    seed = hashlib.sha256(f"{name}#{gen}".encode()).digest()
    out = bytearray()
    i = 0
    while len(out) < size:
        out += hashlib.sha256(seed + i.to_bytes(8, "little")).digest() * 128  # 4 KiB
        i += 1
    return bytes(out[:size])


class Ledger:
    def __init__(self, path):
        self.path = path
        self.f = open(path, "a")

    def add(self, *fields):
        self.f.write(" ".join(str(x) for x in fields) + "\n")
        self.f.flush()
        os.fsync(self.f.fileno())

    @staticmethod
    def replay(path):
        """path -> (gen, size, sha256) of every acknowledged file still expected."""
        files = {}
        if not os.path.exists(path):
            return files
        with open(path) as f:
            for line in f:
                p = line.split()
                if not p:
                    continue
                if p[0] == "put":
                    files[p[1]] = (int(p[2]), int(p[3]), p[4])
                elif p[0] in ("del", "unknown"):
                    files.pop(p[1], None)
                elif p[0] == "mv":
                    files[p[2]] = files.pop(p[1])
        return files


def fsync_dir(d):
    fd = os.open(d, os.O_RDONLY | os.O_DIRECTORY)
    try:
        os.fsync(fd)
    finally:
        os.close(fd)


def write_file(path, data):
    fd = os.open(path, os.O_WRONLY | os.O_CREAT | os.O_TRUNC, 0o644)
    try:
        view = memoryview(data)
        while view:
            n = os.write(fd, view[:1 << 20])
            view = view[n:]
        os.fsync(fd)
    finally:
        os.close(fd)


def read_file(path):
    with open(path, "rb") as f:
        try:  # past the kernel's page cache: what the file system holds now
            os.posix_fadvise(f.fileno(), 0, 0, os.POSIX_FADV_DONTNEED)
        except OSError:
            pass
        return f.read()


class Workload:
    def __init__(self, root, ledger_path, seed, max_kb):
        self.root = root
        self.ledger = Ledger(ledger_path)
        self.files = Ledger.replay(ledger_path)
        self.rng = random.Random(seed)
        self.seed = seed
        self.max_kb = max_kb
        self.n = 0
        self.ok = {}
        self.errors = {}
        self.bad = []

    def rel(self, path):
        return os.path.relpath(path, self.root)

    def new_name(self):
        self.n += 1
        d = os.path.join(self.root, f"d{self.rng.randrange(8)}", f"s{self.rng.randrange(4)}")
        return os.path.join(d, f"f{self.seed}-{self.n}")

    def make_parents(self, path):
        """Creates the directories between the root and path, never the root itself: while
        the mount is down the root is an empty directory of the local disk, and what the
        workload wrote there must fail, not be acknowledged by the local disk."""
        d = os.path.dirname(path)
        missing = []
        while d != self.root and not os.path.isdir(d):
            missing.append(d)
            d = os.path.dirname(d)
        if not os.path.isdir(self.root):
            raise FileNotFoundError(errno.ENOENT, "workload root missing", self.root)
        for m in reversed(missing):
            try:
                os.mkdir(m)
            except FileExistsError:
                pass

    def size(self):
        r = self.rng.random()
        if r < 0.4:
            return self.rng.randrange(0, 4096)  # inline in the filer
        return self.rng.randrange(4096, self.max_kb * 1024 + 1)

    def put(self, path, gen):
        size = self.size()
        data = content(self.rel(path), gen, size)
        self.make_parents(path)
        write_file(path, data)
        fsync_dir(os.path.dirname(path))
        self.ledger.add("put", self.rel(path), gen, size, hashlib.sha256(data).hexdigest())
        self.files[self.rel(path)] = (gen, size, hashlib.sha256(data).hexdigest())

    def step(self):
        known = list(self.files)
        op = self.rng.random()
        if op < 0.45 or not known:
            path = self.new_name()
            self.touched = [self.rel(path)]
            self.put(path, 0)
            return "create"
        victim = self.rng.choice(known)
        path = os.path.join(self.root, victim)
        self.touched = [victim]
        if op < 0.60:
            self.put(path, self.files[victim][0] + 1)
            return "overwrite"
        if op < 0.70:
            to = self.new_name()
            self.touched.append(self.rel(to))
            self.make_parents(to)
            os.rename(path, to)
            fsync_dir(os.path.dirname(to))
            fsync_dir(os.path.dirname(path))
            self.ledger.add("mv", victim, self.rel(to))
            self.files[self.rel(to)] = self.files.pop(victim)
            return "rename"
        if op < 0.78:
            os.unlink(path)
            fsync_dir(os.path.dirname(path))
            self.ledger.add("del", victim)
            del self.files[victim]
            return "delete"
        gen, size, digest = self.files[victim]
        data = read_file(path)
        if hashlib.sha256(data).hexdigest() != digest:
            self.bad.append(f"{victim}: read {len(data)} bytes, want {size} (gen {gen})")
        return "read"

    def run(self, seconds, stop):
        end = time.monotonic() + seconds
        while time.monotonic() < end and not (stop and os.path.exists(stop)):
            self.touched = []
            try:
                op = self.step()
                self.ok[op] = self.ok.get(op, 0) + 1
            except OSError as e:
                name = errno.errorcode.get(e.errno, str(e.errno))
                self.errors[name] = self.errors.get(name, 0) + 1
                for t in self.touched:  # whatever it touched is no longer known
                    self.ledger.add("unknown", t)
                    self.files.pop(t, None)
                time.sleep(0.05)
            if self.bad:
                break


def verify(root, ledger_path):
    files = Ledger.replay(ledger_path)
    bad, errors, nbytes = [], {}, 0
    for rel, (gen, size, digest) in sorted(files.items()):
        try:
            data = read_file(os.path.join(root, rel))
        except OSError as e:
            name = errno.errorcode.get(e.errno, str(e.errno))
            errors[name] = errors.get(name, 0) + 1
            bad.append(f"{rel}: {e}")
            continue
        nbytes += len(data)
        if hashlib.sha256(data).hexdigest() != digest:
            bad.append(f"{rel}: read {len(data)} bytes, want {size} (gen {gen})")
    return {"verified": len(files), "bytes": nbytes, "errors": errors, "bad": bad[:20], "nbad": len(bad)}


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("cmd", choices=["run", "verify", "fill"])
    ap.add_argument("dir")
    ap.add_argument("ledger")
    ap.add_argument("--seconds", type=float, default=10)
    ap.add_argument("--seed", type=int, default=1)
    ap.add_argument("--max-kb", type=int, default=2048)
    ap.add_argument("--kb", type=int, default=1024)
    ap.add_argument("--count", type=int, default=1 << 30)
    ap.add_argument("--stop", default="")
    a = ap.parse_args()
    os.makedirs(a.dir, exist_ok=True)
    if a.cmd == "verify":
        r = verify(a.dir, a.ledger)
        print(json.dumps(r))
        return 0 if r["nbad"] == 0 else 1
    if a.cmd == "fill":
        # Files of --kb KiB until the first error: how a full disk shows. Prints the errno.
        w = Workload(a.dir, a.ledger, a.seed, a.kb)
        w.size = lambda: a.kb * 1024
        first = None
        for _ in range(a.count):
            path = os.path.join(a.dir, f"fill{a.seed}-{w.n}")
            w.n += 1
            try:
                w.put(path, 0)
            except OSError as e:
                first = errno.errorcode.get(e.errno, str(e.errno))
                w.ledger.add("unknown", w.rel(path))
                break
        print(json.dumps({"written": w.n - (1 if first else 0), "first_error": first}))
        return 0
    w = Workload(a.dir, a.ledger, a.seed, a.max_kb)
    w.run(a.seconds, a.stop)
    print(json.dumps({"ok": w.ok, "errors": w.errors, "files": len(w.files), "bad": w.bad}))
    return 1 if w.bad else 0


if __name__ == "__main__":
    sys.exit(main())
