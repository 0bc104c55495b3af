#!/usr/bin/env python3
# Prints a loopback port p with p and p + 10000 both free (a kelp server's gRPC port is its HTTP
# port + 10000). Used by tests/mount/lib.sh and bench/lib/kelp_bench.sh.
import random
import socket

while True:
    p = random.randint(20000, 50000)
    ok = True
    for q in (p, p + 10000):
        s = socket.socket()
        try:
            s.bind(("127.0.0.1", q))
        except OSError:
            ok = False
        finally:
            s.close()
    if ok:
        print(p)
        break
