"""Exit 0 when the qemu-guest-agent behind the socket argv[1] answers guest-sync-delimited."""

import json
import select
import socket
import sys

sock = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
try:
    sock.connect(sys.argv[1])
    sock.sendall(json.dumps({"execute": "guest-sync-delimited",
                             "arguments": {"id": 4711}}).encode() + b"\n")
    data = b""
    while b'"return": 4711}' not in data:
        if not select.select([sock], [], [], 2)[0]:
            sys.exit(1)
        chunk = sock.recv(4096)
        if not chunk:
            sys.exit(1)
        data += chunk
except OSError:
    sys.exit(1)
sys.exit(0)
