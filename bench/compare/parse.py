#!/usr/bin/env python3
"""bench/compare: turn raw tool output into 'metric value unit' lines (the caller prefixes the label).

  parse.py sysbench-prepare LOG PREFIX
  parse.py sysbench-run     LOG PREFIX
  parse.py fio              JSON PREFIX read|write
  parse.py fio-sync         JSON PREFIX
  parse.py dd               LOG PREFIX
  parse.py ab               LOG PREFIX
"""
import json
import re
import sys


def out(metric, value, unit):
    if value is None:
        print(f"{metric} NA {unit}")
    elif isinstance(value, float):
        print(f"{metric} {value:.6g} {unit}")
    else:
        print(f"{metric} {value} {unit}")


def num(pattern, text):
    m = re.search(pattern, text, re.M)
    return float(m.group(1)) if m else None


def sysbench_prepare(log, p):
    t = open(log, errors="replace").read()
    m = re.search(r"(\d+) bytes written in ([\d.]+) seconds \(([\d.]+) MiB/sec\)", t)
    out(f"{p}.MiBps", float(m.group(3)) if m else None, "MiB/s")
    out(f"{p}.seconds", float(m.group(2)) if m else None, "s")


def sysbench_run(log, p):
    t = open(log, errors="replace").read()
    out(f"{p}.reads", num(r"^\s*reads/s:\s*([\d.]+)", t), "ops/s")
    out(f"{p}.writes", num(r"^\s*writes/s:\s*([\d.]+)", t), "ops/s")
    out(f"{p}.fsyncs", num(r"^\s*fsyncs/s:\s*([\d.]+)", t), "ops/s")
    out(f"{p}.read_MiBps", num(r"^\s*read, MiB/s:\s*([\d.]+)", t), "MiB/s")
    out(f"{p}.written_MiBps", num(r"^\s*written, MiB/s:\s*([\d.]+)", t), "MiB/s")
    out(f"{p}.lat_avg", num(r"^\s*avg:\s*([\d.]+)", t), "ms")
    out(f"{p}.lat_p95", num(r"^\s*95th percentile:\s*([\d.]+)", t), "ms")
    out(f"{p}.lat_max", num(r"^\s*max:\s*([\d.]+)", t), "ms")


def fio(js, p, rw):
    try:
        raw = open(js, errors="replace").read()
        # fio may print warnings before the JSON document
        d = json.loads(raw[raw.index("{"):])
        j = d["jobs"][0][rw]
        bw = j["bw_bytes"] / 1048576.0
        iops = j["iops"]
        pct = j.get("clat_ns", {}).get("percentile", {})
        p99 = pct.get("99.000000")
        p99 = p99 / 1000.0 if p99 is not None else None
        errs = d["jobs"][0].get("error", 0)
        if errs:
            bw = iops = p99 = None
    except Exception as e:  # noqa: BLE001
        print(f"# fio parse error {js}: {e}", file=sys.stderr)
        bw = iops = p99 = None
    out(f"{p}.MiBps", bw, "MiB/s")
    out(f"{p}.iops", iops, "ops/s")
    out(f"{p}.clat_p99", p99, "us")


def fio_sync(js, p):
    """fsync latency (fio's 'sync' section, present with --fsync=N)."""
    try:
        raw = open(js, errors="replace").read()
        d = json.loads(raw[raw.index("{"):])
        s = d["jobs"][0]["sync"]["lat_ns"]
        mean = s["mean"] / 1000.0
        p99 = s.get("percentile", {}).get("99.000000")
        p99 = p99 / 1000.0 if p99 is not None else None
    except Exception as e:  # noqa: BLE001
        print(f"# fio sync parse error {js}: {e}", file=sys.stderr)
        mean = p99 = None
    out(f"{p}.fsync_avg", mean, "us")
    out(f"{p}.fsync_p99", p99, "us")


def dd(log, p):
    t = open(log, errors="replace").read()
    m = re.search(r"^(\d+) bytes .* copied, ([\d.]+) s", t, re.M)
    if m and float(m.group(2)) > 0:
        out(f"{p}.MiBps", int(m.group(1)) / float(m.group(2)) / 1048576.0, "MiB/s")
    else:
        out(f"{p}.MiBps", None, "MiB/s")


def ab(log, p):
    """ApacheBench: requests/s, transfer rate, failures, 99th percentile."""
    t = open(log, errors="replace").read()
    failed = num(r"^Failed requests:\s*(\d+)", t)
    non2xx = num(r"^Non-2xx responses:\s*(\d+)", t)
    ok = failed is not None and failed == 0 and not non2xx
    rps = num(r"^Requests per second:\s*([\d.]+)", t)
    kbs = num(r"^Transfer rate:\s*([\d.]+)", t)
    out(f"{p}.rps", rps if ok else None, "req/s")
    out(f"{p}.MiBps", kbs / 1024.0 if ok and kbs is not None else None, "MiB/s")
    out(f"{p}.p99", num(r"^\s*99%\s+(\d+)", t) if ok else None, "ms")
    out(f"{p}.failed", failed, "count")


if __name__ == "__main__":
    kind, f, prefix = sys.argv[1:4]
    if kind == "sysbench-prepare":
        sysbench_prepare(f, prefix)
    elif kind == "sysbench-run":
        sysbench_run(f, prefix)
    elif kind == "fio":
        fio(f, prefix, sys.argv[4])
    elif kind == "fio-sync":
        fio_sync(f, prefix)
    elif kind == "dd":
        dd(f, prefix)
    elif kind == "ab":
        ab(f, prefix)
    else:
        sys.exit(f"unknown kind {kind}")
