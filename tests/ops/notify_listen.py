#!/usr/bin/env python3
"""Listens where systemd would (a Unix datagram socket, as NOTIFY_SOCKET names it) and appends
each message to OUT with newlines as '|': notify_listen.py SOCKET OUT. Runs until killed."""
import os
import socket
import sys

path, out = sys.argv[1], sys.argv[2]
if os.path.exists(path):
    os.unlink(path)
s = socket.socket(socket.AF_UNIX, socket.SOCK_DGRAM)
s.bind(path)
open(out, "a").close()  # exists once bound: the test waits for it
while True:
    msg = s.recv(4096).decode(errors="replace")
    with open(out, "a") as f:
        f.write(msg.replace("\n", "|") + "\n")
