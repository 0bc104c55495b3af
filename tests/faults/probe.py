#!/usr/bin/env python3
"""Probes for faults_test.sh: timed concurrent reads checked against the expected bytes, and
finding (and damaging) a file's bytes in a server's files on disk.

    probe.py read [--threads N] [--passes P] [--max-seconds S] PATH:SRC:EXPECT...
        Reads every PATH (past the page cache) from N threads, P passes each, and compares
        with the local file SRC. EXPECT: ok (must read back equal), err (must fail), any.
        A read that returns other bytes than SRC always fails the probe; so does one that
        takes longer than S seconds, or an outcome EXPECT forbids. Prints one JSON line.
    probe.py write [--max-seconds S] DIR COUNT KB
        Writes COUNT files of KB KiB (write, fsync, close), each timed, going on after
        errors; the ones that succeeded are listed with their sha256 in DIR.ok. JSON line.
    probe.py locate SRC DIR...
        The files under each DIR that hold SRC's bytes (a 64-byte sample at 4 KiB), with the
        offset: "PATH OFFSET" lines.
    probe.py corrupt PATH OFFSET
        Flips 16 bytes of PATH at OFFSET (in place, same size).
"""
import errno
import hashlib
import json
import os
import sys
import threading
import time
import argparse

SAMPLE_AT, SAMPLE_LEN = 4096, 64


def read_past_cache(path):
    with open(path, "rb") as f:
        try:
            os.posix_fadvise(f.fileno(), 0, 0, os.POSIX_FADV_DONTNEED)
        except OSError:
            pass
        return f.read()


def cmd_read(a):
    specs = []
    for s in a.specs:
        path, src, expect = s.rsplit(":", 2)
        with open(src, "rb") as f:
            specs.append((path, f.read(), expect))
    lock = threading.Lock()
    res = {"reads": 0, "ok": 0, "errors": {}, "wrong": [], "violations": [], "max_ok_s": 0.0, "max_err_s": 0.0}

    def worker(t):
        for p in range(a.passes):
            for i in range(len(specs)):
                path, want, expect = specs[(i + t + p) % len(specs)]
                t0 = time.monotonic()
                try:
                    got, err = read_past_cache(path), None
                except OSError as e:
                    got, err = None, errno.errorcode.get(e.errno, str(e.errno))
                dt = time.monotonic() - t0
                with lock:
                    res["reads"] += 1
                    if err is None:
                        res["max_ok_s"] = max(res["max_ok_s"], dt)
                        if got != want:
                            res["wrong"].append(f"{path}: {len(got)} bytes, want {len(want)}")
                        else:
                            res["ok"] += 1
                            if expect == "err":
                                res["violations"].append(f"{path}: read back, expected an error")
                    else:
                        res["max_err_s"] = max(res["max_err_s"], dt)
                        res["errors"][err] = res["errors"].get(err, 0) + 1
                        if expect == "ok":
                            res["violations"].append(f"{path}: {err}, expected its bytes")
                    if dt > a.max_seconds:
                        res["violations"].append(f"{path}: took {dt:.1f} s")

    threads = [threading.Thread(target=worker, args=(t,)) for t in range(a.threads)]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    res["max_ok_s"] = round(res["max_ok_s"], 3)
    res["max_err_s"] = round(res["max_err_s"], 3)
    res["violations"] = res["violations"][:10]
    print(json.dumps(res))
    return 1 if res["wrong"] or res["violations"] else 0


def cmd_write(a):
    os.makedirs(a.dir, exist_ok=True)
    res = {"ok": 0, "errors": {}, "max_s": 0.0, "slow": 0}
    with open(a.dir.rstrip("/") + ".ok", "a") as ok:
        for i in range(a.count):
            path = os.path.join(a.dir, f"w{i}")
            data = os.urandom(a.kb * 1024)
            t0 = time.monotonic()
            try:
                fd = os.open(path, os.O_WRONLY | os.O_CREAT | os.O_TRUNC, 0o644)
                try:
                    os.write(fd, data)
                    os.fsync(fd)
                finally:
                    os.close(fd)
                res["ok"] += 1
                ok.write(f"{hashlib.sha256(data).hexdigest()}  {path}\n")
            except OSError as e:
                name = errno.errorcode.get(e.errno, str(e.errno))
                res["errors"][name] = res["errors"].get(name, 0) + 1
            dt = time.monotonic() - t0
            res["max_s"] = round(max(res["max_s"], dt), 3)
            if dt > a.max_seconds:
                res["slow"] += 1
    print(json.dumps(res))
    return 1 if res["slow"] else 0


def cmd_locate(a):
    with open(a.src, "rb") as f:
        f.seek(SAMPLE_AT)
        sample = f.read(SAMPLE_LEN)
    if len(sample) < SAMPLE_LEN:
        print(f"{a.src} is too small to locate", file=sys.stderr)
        return 2
    for d in a.dirs:
        for root, _, names in os.walk(d):
            for n in sorted(names):
                p = os.path.join(root, n)
                try:
                    with open(p, "rb") as f:
                        data = f.read()
                except OSError:
                    continue
                at = data.find(sample)
                while at >= 0:
                    print(p, at)
                    at = data.find(sample, at + 1)
    return 0


def cmd_corrupt(a):
    with open(a.path, "r+b") as f:
        f.seek(a.offset)
        b = f.read(16)
        f.seek(a.offset)
        f.write(bytes(x ^ 0x5A for x in b))
        f.flush()
        os.fsync(f.fileno())
    return 0


def main():
    ap = argparse.ArgumentParser()
    sub = ap.add_subparsers(dest="cmd", required=True)
    r = sub.add_parser("read")
    r.add_argument("--threads", type=int, default=1)
    r.add_argument("--passes", type=int, default=1)
    r.add_argument("--max-seconds", type=float, default=60)
    r.add_argument("specs", nargs="+")
    w = sub.add_parser("write")
    w.add_argument("--max-seconds", type=float, default=60)
    w.add_argument("dir")
    w.add_argument("count", type=int)
    w.add_argument("kb", type=int)
    lo = sub.add_parser("locate")
    lo.add_argument("src")
    lo.add_argument("dirs", nargs="+")
    c = sub.add_parser("corrupt")
    c.add_argument("path")
    c.add_argument("offset", type=int)
    a = ap.parse_args()
    return {"read": cmd_read, "write": cmd_write, "locate": cmd_locate, "corrupt": cmd_corrupt}[a.cmd](a)


if __name__ == "__main__":
    sys.exit(main())
