#!/usr/bin/env python3
"""Writes the seed corpora under fuzz/corpus/ (checked in; rerun after a format change).

Each target gets a few small, valid inputs in its own format (plus a few broken ones), so the
fuzzer starts from the shapes real data has. Formats: docs/needle-format.md,
docs/cache-format.md, docs/filer-keys.md, docs/volume-http.md, docs/filer-http.md,
docs/rpc-protocol.md.
"""
import os
import struct
import sys

ROOT = os.path.join(os.path.dirname(os.path.abspath(__file__)), "corpus")


def put(target, name, data):
    d = os.path.join(ROOT, target)
    os.makedirs(d, exist_ok=True)
    if isinstance(data, str):
        data = data.encode()
    with open(os.path.join(d, name), "wb") as f:
        f.write(data)


def varint(v):
    out = bytearray()
    while v >= 0x80:
        out.append((v & 0x7F) | 0x80)
        v >>= 7
    out.append(v)
    return bytes(out)


def zigzag(v):
    return varint((v << 1) ^ (v >> 63) if v >= 0 else ((v << 1) ^ -1) & (2**64 - 1))


def lp(b):
    return varint(len(b)) + b


def main():
    # ---- HTTP request heads (http_parser_fuzz) ----
    put("http_parser_fuzz", "get", "GET /3,01637037d6 HTTP/1.1\r\nHost: x\r\nRange: bytes=0-9\r\n\r\n")
    put("http_parser_fuzz", "put_cl", "PUT /dir/f?fsync=true HTTP/1.1\r\nHost: x\r\nContent-Length: 5\r\n\r\nhello")
    put("http_parser_fuzz", "chunked",
        "POST /a HTTP/1.1\r\nHost: x\r\nTransfer-Encoding: chunked\r\n\r\n5;ext=1\r\nhello\r\n0\r\nT: v\r\n\r\n")
    put("http_parser_fuzz", "http10", "HEAD /x%20y?a=1&b=%41 HTTP/1.0\nConnection: keep-alive\n\n")
    put("http_parser_fuzz", "expect",
        "PUT /f HTTP/1.1\r\nHost: x\r\nExpect: 100-continue\r\nContent-Length: 3\r\nAuthorization: Bearer a.b.c\r\n\r\nabc")
    put("http_parser_fuzz", "response",
        "HTTP/1.1 206 Partial Content\r\nContent-Range: bytes 0-1/2\r\nContent-Length: 2\r\n\r\nab")
    put("http_parser_fuzz", "smuggle",
        "POST / HTTP/1.1\r\nHost: x\r\nContent-Length: 4\r\nTransfer-Encoding: chunked\r\n\r\n")

    # ---- the metadata transport (rpc_frame_fuzz): a mode byte, then its input (docs/rpc-protocol.md) ----
    def frame(ftype, method, cid, payload):
        return struct.pack("<IBBHQ", 12 + len(payload), ftype, 0, method, cid) + payload
    put("rpc_frame_fuzz", "frames", b"\x00\xff" + frame(1, 3, 1, b"\x0a\x03abc") + frame(2, 0, 1, b"")
        + frame(4, 0, 7, b"\x08\x01") + frame(5, 0, 7, b""))
    put("rpc_frame_fuzz", "error_frame", b"\x00\x10" + frame(3, 0, 9, struct.pack("<Ii", 5, 2) + b"no such file"))
    put("rpc_frame_fuzz", "too_big", b"\x00\x00" + frame(1, 1, 1, b"x" * 100))
    put("rpc_frame_fuzz", "bad_flags", b"\x00\x10" + struct.pack("<IBBHQ", 12, 1, 1, 0, 1))
    put("rpc_frame_fuzz", "status", b"\x01" + struct.pack("<Ii", 9, 39) + b"directory not empty")
    put("rpc_frame_fuzz", "status_bad_code", b"\x01" + struct.pack("<Ii", 99, 0) + b"x")
    put("rpc_frame_fuzz", "upgrade", b"\x02GET /rpc HTTP/1.1\r\nHost: 127.0.0.1:8888\r\nConnection: Upgrade\r\n"
        b"Upgrade: kelp-rpc/1\r\nAuthorization: Bearer a.b.c\r\n\r\n" + frame(1, 1, 1, b""))
    put("rpc_frame_fuzz", "upgrade_other", b"\x02GET /rpc HTTP/1.1\r\nHost: x\r\nUpgrade: h2c\r\n\r\n")
    put("rpc_frame_fuzz", "switching", b"\x03HTTP/1.1 101 Switching Protocols\r\nConnection: Upgrade\r\n"
        b"Upgrade: kelp-rpc/1\r\n\r\n" + frame(2, 0, 1, b""))
    put("rpc_frame_fuzz", "refused", b"\x03HTTP/1.1 401 Unauthorized\r\nContent-Length: 0\r\n\r\n")

    # ---- Range / If-None-Match (range_fuzz): 8 bytes of file size, then the header ----
    for i, h in enumerate(["bytes=0-99", "bytes=100-", "bytes=-500", "bytes=5-1", "bytes=0-0,5-9",
                           "bytes= 7 - 9 ", "items=0-1", "\"abc\", W/\"def\""]):
        put("range_fuzz", f"r{i}", struct.pack("<Q", 1000 * (i + 1)) + h.encode())

    # ---- a volume server's answer to a local read (local_read_fuzz): an HTTP response head ----
    put("local_read_fuzz", "ok", "HTTP/1.1 200 OK\r\nX-Kelp-Dat: /var/lib/kelp/3.dat\r\n"
        "X-Kelp-Needle-Offset: 4096\r\nX-Kelp-Needle-Size: 4194304\r\nContent-Length: 0\r\n\r\n")
    put("local_read_fuzz", "unaligned", "HTTP/1.1 200 OK\r\nX-Kelp-Dat: /d/1.dat\r\n"
        "X-Kelp-Needle-Offset: 4097\r\nX-Kelp-Needle-Size: 10\r\nContent-Length: 0\r\n\r\n")
    put("local_read_fuzz", "relative", "HTTP/1.1 200 OK\r\nX-Kelp-Dat: d/1.dat\r\n"
        "X-Kelp-Needle-Offset: 8\r\nX-Kelp-Needle-Size: 18446744073709551616\r\n\r\n")
    put("local_read_fuzz", "refused", "HTTP/1.1 403 Forbidden\r\nContent-Length: 2\r\n\r\n{}")

    # ---- file ids (file_id_fuzz) ----
    for i, s in enumerate(["3,01637037d6", "1,ff00000001", "7,01637037d6_3", "4294967295,ffffffffffffffff00000000",
                           "0,01637037d6", "3,", "3,0163703"]):
        put("file_id_fuzz", f"f{i}", s)

    # ---- flags (flags_fuzz): NUL-separated argv ----
    for i, args in enumerate([["-dir=/x", "-port", "8080"], ["--readOnly", "-ratio=0.25"],
                              ["-master=a:1", "-sizeMB=18446744073709551615", "pos"],
                              ["-max=-1"], ["-offset", "-9223372036854775808", "-security=/etc/kelp/security.toml"],
                              ["-h"], ["--", "-dir"]]):
        put("flags_fuzz", f"a{i}", b"\0".join(a.encode() for a in args))

    # ---- needles (needle_fuzz): flag byte (1 = fix checksum), then a needle ----
    def needle(key, cookie, data, tomb=False):
        size = 0xFFFFFFFF if tomb else len(data)
        body = struct.pack("<IQI", cookie, key, size) + (b"" if tomb else data) + struct.pack("<QQ", 0, 1700000000 * 10**9)
        return body + b"\0" * (-len(body) % 8)
    put("needle_fuzz", "small", b"\x01" + needle(1, 0x637037D6, b"hello world"))
    put("needle_fuzz", "empty", b"\x01" + needle(2, 7, b""))
    put("needle_fuzz", "tomb", b"\x01" + needle(3, 7, b"", tomb=True))
    put("needle_fuzz", "superblock", b"\x00" + struct.pack("<I", 0x56504C4B) + b"\x01" + b"001" + b"\0" * 8)
    put("needle_fuzz", "short", b"\x00" + needle(1, 1, b"abc")[:20])

    # ---- volume loading (volume_load_fuzz): FuzzedDataProvider bytes ----
    for i in range(6):
        put("volume_load_fuzz", f"v{i}", bytes((i * 37 + j * 11) % 256 for j in range(64 + 48 * i)))

    # ---- multipart (multipart_fuzz): boundary, \\, read size, body ----
    body = ("--XyZ\r\nContent-Disposition: form-data; name=\"a\"\r\n\r\nv\r\n"
            "--XyZ\r\nContent-Disposition: form-data; name=\"file\"; filename=\"f.txt\"\r\n"
            "Content-Type: text/plain\r\n\r\nfile content\r\n--XyZ--\r\n")
    put("multipart_fuzz", "two_parts", "XyZ" + "\\" + "\x07" + body)
    put("multipart_fuzz", "no_close", "b" + "\\" + "\x01" + "--b\r\nContent-Disposition: form-data; filename=x\r\n\r\nabc")
    put("multipart_fuzz", "fid_path", "q\\\x10/3,01637037d6.jpg")

    # ---- AGFS JSON bodies and paths (agfs_body_fuzz) ----
    for i, s in enumerate(['{"data":"hello"}', '{"newPath":"/a/b/c"}', '{"mode":420}', '{"target":"../x"}',
                           '/a/./b', '/a//b', '/a/b/', '{"data":"\\u0000\\ud83d\\ude00"}', '[1,2]']):
        put("agfs_body_fuzz", f"j{i}", s)

    # ---- filer records (filer_records_fuzz): kind byte, then the value ----
    inode = (b"\x01" + varint(0o100644) + varint(0) + varint(0) + varint(5) + varint(1) + zigzag(1) + zigzag(2)
             + zigzag(3) + zigzag(-4) + varint(0) + varint(1) + varint(1) + varint(3) + varint(2) + varint(0)
             + varint(0) + varint(1) + lp(b"") + varint(0))
    put("filer_records_fuzz", "inode", b"\x00" + inode)
    put("filer_records_fuzz", "dentry", b"\x01" + varint(42) + varint(0o100000) + varint(7))
    put("filer_records_fuzz", "dirindex", b"\x02" + varint(42) + varint(0o40000) + b"name")
    put("filer_records_fuzz", "chunk", b"\x03" + lp(b"3,01637037d6") + varint(0) + varint(4096) + varint(0) + varint(8192))
    put("filer_records_fuzz", "gc", b"\x04" + lp(b"3,01637037d6") + varint(2) + varint(9))
    put("filer_records_fuzz", "key", b"\x05" + b"D" + struct.pack(">Q", 1) + b"name")

    # ---- cache entry files (cache_entry_fuzz): flags (1 page sums, 2 header sum, tier << 2) ----
    def entry(fid, data, tier):
        pages = (len(data) + 4095) // 4096
        fixed = struct.pack("<IHHQQIB3xQQ", 0x314E454B, 1, len(fid), len(data) * 2, 0, len(data), tier, 1, 0)
        return fixed + fid + b"\0" * (8 * pages) + data
    put("cache_entry_fuzz", "small", bytes([3 | (0 << 2)]) + entry(b"3,01637037d6", b"x" * 100, 0))
    put("cache_entry_fuzz", "two_pages", bytes([3 | (1 << 2)]) + entry(b"5,0a00000001", bytes(range(256)) * 20, 1))
    put("cache_entry_fuzz", "bad_sum", bytes([2]) + entry(b"1,0100000001", b"abc", 0))
    # 64 KiB of data or more starts at a page boundary (zeros after the header).
    big = bytes(range(251)) * 300
    aligned = entry(b"6,0c00000003", big, 2)
    head = len(aligned) - len(big)
    put("cache_entry_fuzz", "aligned", bytes([3 | (2 << 2)]) + aligned[:head] + b"\0" * (-head % 4096) + big)

    # ---- cache index (cache_index_fuzz): flag (1 = fix magic, version, trailer), then the index ----
    def index_record(eid, fid, data_len, tier, state):
        pages = (data_len + 4095) // 4096
        return struct.pack("<QQQIBBH8x", eid, data_len, 0, data_len, tier, state, len(fid)) + fid + b"\0" * (8 * pages)
    recs = index_record(1, b"3,01637037d6", 100, 0, 1) + index_record(2, b"4,0b00000002", 5000, 1, 0)
    put("cache_index_fuzz", "two", b"\x01" + b"KELPIDX1" + struct.pack("<IIQQ", 1, 0, 2, 3) + recs)
    put("cache_index_fuzz", "empty", b"\x01" + b"KELPIDX1" + struct.pack("<IIQQ", 1, 0, 0, 1))
    put("cache_index_fuzz", "raw", b"\x00KELPIDX1" + b"\0" * 40)
    return 0


if __name__ == "__main__":
    sys.exit(main())
