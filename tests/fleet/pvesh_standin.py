"""A `pvesh` stand-in for the test fleet: `pvesh get /nodes/NODE/lxc|qemu --output-format json`.

Reads the same `containers/<vmid>/config.json` and `vms/<vmid>/config.json` as the pct and qm
stand-ins and prints what pve-common's CLIFormatter prints for `json`: one compact line,
sorted keys (`to_json(..., canonical => 1)`), then a newline; rows in no particular order.
LXC rows carry `type: "lxc"` (pve-container vmstatus), qemu rows no `type`; `template` is
present only for templates, `lock` and `tags` only when set, `pid` only when running.
A file `<host dir>/pvesh-extra-<kind>.json` holds raw rows appended to the list (odd rows).
"""

import json
import os
import sys

HOST_DIR = os.path.dirname(os.path.dirname(os.path.realpath(__file__)))
NODE = os.path.basename(HOST_DIR)


def die(message):
    sys.stderr.write(message + "\n")
    sys.stderr.flush()
    os._exit(255)


def rows(kind):
    folder = os.path.join(HOST_DIR, "containers" if kind == "lxc" else "vms")
    found = []
    for entry in sorted(os.listdir(folder)) if os.path.isdir(folder) else []:
        if not entry.isdigit():
            continue
        with open(os.path.join(folder, entry, "config.json"), encoding="utf-8") as handle:
            config = json.load(handle)
        vmid = int(entry)
        status = config.get("status", "running")
        row = {"vmid": vmid, "status": status, "maxmem": 8589934592, "cpus": 4, "uptime": 0,
               "name": config.get("name") or (f"CT{vmid}" if kind == "lxc" else f"VM {vmid}")}
        if kind == "lxc":
            row["type"] = "lxc"
        if status == "running":
            row["pid"] = 4242 + vmid
        for key in ("lock", "tags"):
            if config.get(key):
                row[key] = config[key]
        if config.get("template"):
            row["template"] = 1
        found.append(row)
    extra = os.path.join(HOST_DIR, f"pvesh-extra-{kind}.json")
    if os.path.exists(extra):
        with open(extra, encoding="utf-8") as handle:
            found += json.load(handle)
    return found


def main(argv):
    if len(argv) != 4 or argv[0] != "get" or argv[2:] != ["--output-format", "json"]:
        die("400 unable to parse option")
    parts = argv[1].strip("/").split("/")
    if len(parts) != 3 or parts[0] != "nodes" or parts[2] not in ("lxc", "qemu"):
        die(f"no '{argv[0]}' handler for '{argv[1]}'")
    if parts[1] != NODE:
        die(f"hostname lookup '{parts[1]}' failed - failed to get address info for: "
            f"{parts[1]}: Name or service not known")
    sys.stdout.write(json.dumps(rows(parts[2]), sort_keys=True, separators=(",", ":")) + "\n")
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
