#!/usr/bin/env python3
"""The fsync-heavy workload of power_cut_test.sh, and its check.

  power_cut_workload.py write DIR LOG ZONE_BASE SEED [SHARED]
      Writes records of random sizes at increasing, non-overlapping offsets of three files
      (starting at ZONE_BASE in each, so writers with different bases never overlap): its own
      DIR/w<SEED>.0..2, or with SHARED=1 DIR/f0..f2 which every writer shares,
      fsyncs each (fdatasync for some), and only after the fsync returned appends
      "file offset length sha256 time" to LOG on the local disk, flushed. Most records are a few
      bytes to 64 KiB (the mount's journaled fsync path, under -journalMaxKB), one in five is
      300-700 KiB (the upload path). Runs until killed or until an I/O error (the servers died).

  power_cut_workload.py verify DIR LOG...
      Reads back every logged (acknowledged) record: exit 0 when each has its bytes; else one
      line per bad record (EIO, short read, other bytes) and exit 1.
"""
import hashlib
import os
import random
import sys
import time

ZONE = 48 << 20  # bytes of each file one writer may use


def write(directory, log_path, zone_base, seed, shared):
    rng = random.Random(seed)
    files = ["f%d" % i if shared else "w%d.%d" % (seed, i) for i in range(3)]
    fds = {f: os.open(os.path.join(directory, f), os.O_RDWR | os.O_CREAT, 0o644) for f in files}
    cursor = {f: zone_base for f in files}
    with open(log_path, "a") as log:
        while True:
            name = rng.choice(files)
            if rng.random() < 0.2:
                size = rng.randint(300 << 10, 700 << 10)
            else:
                size = rng.choice((rng.randint(1, 100), rng.randint(100, 64 << 10)))
            off = cursor[name]
            if off + size > zone_base + ZONE:
                return 0  # this writer's zone is full
            cursor[name] = off + size + rng.randint(0, 4096)  # records never touch
            data = rng.randbytes(size)
            try:
                os.pwrite(fds[name], data, off)
                if rng.random() < 0.5:
                    os.fsync(fds[name])
                else:
                    os.fdatasync(fds[name])
            except OSError as e:
                print("writer %d stopped: %s" % (seed, e), file=sys.stderr)
                return 0
            log.write("%s %d %d %s %.3f\n" % (name, off, size, hashlib.sha256(data).hexdigest(), time.time()))
            log.flush()


def verify(directory, logs):
    checked = bad = 0
    for log_path in logs:
        for line in open(log_path):
            name, off, size, digest, when = line.split()
            off, size = int(off), int(size)
            checked += 1
            try:
                fd = os.open(os.path.join(directory, name), os.O_RDONLY)
                try:
                    data = os.pread(fd, size, off)
                finally:
                    os.close(fd)
            except OSError as e:
                bad += 1
                print("acknowledged record %s @%d +%d (%s, fsync returned at %s): %s" % (name, off, size, log_path, when, e))
                continue
            if len(data) != size:
                bad += 1
                print("acknowledged record %s @%d +%d (%s, fsync returned at %s): short read, %d bytes"
                      % (name, off, size, log_path, when, len(data)))
            elif hashlib.sha256(data).hexdigest() != digest:
                bad += 1
                zeros = data.count(0)
                print("acknowledged record %s @%d +%d (%s, fsync returned at %s): other bytes (%d of them zero)"
                      % (name, off, size, log_path, when, zeros))
    print("%d acknowledged records checked, %d bad" % (checked, bad))
    return 1 if bad else 0


if __name__ == "__main__":
    if len(sys.argv) in (6, 7) and sys.argv[1] == "write":
        shared = len(sys.argv) == 7 and sys.argv[6] == "1"
        sys.exit(write(sys.argv[2], sys.argv[3], int(sys.argv[4]), int(sys.argv[5]), shared))
    if len(sys.argv) >= 4 and sys.argv[1] == "verify":
        sys.exit(verify(sys.argv[2], sys.argv[3:]))
    sys.exit(__doc__)
