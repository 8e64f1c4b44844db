"""Owns reading the guest and container listings discovery runs on a node.

`pct list`, `qm list`, `pvesh get /nodes/NODE/{lxc,qemu} --output-format json`,
`docker ps -a --format '{{json .}}'` and `podman ps -a --format json`. A listing that is not
what it claims to be at all (another program answered) raises DiscoveryError; one line or
row that does not parse becomes one entry with `problem` set (its VMID or name when
readable), so a single odd line never hides the other guests of a host.
"""

from __future__ import annotations

import json
import re
from typing import Any

from fleetcheck.inventory_data.errors import DiscoveryError
from fleetcheck.inventory_data.model import VMID_MAX, VMID_MIN, DiscoveredContainer, DiscoveredOci

_PCT_HEADER = ("VMID", "Status", "Lock", "Name")
#: qm.pm prints `%10s %-20s %-10s %-10s %12s %-10s` of these.
_QM_HEADER = ("VMID", "NAME", "STATUS", "MEM(MB)", "BOOTDISK(GB)", "PID")
#: pve-common split_list: tags are separated by `,`, `;` or whitespace.
_TAG_SEPARATORS = re.compile(r"[,;\s]+")
_NUMBER = re.compile(r"^\d+(\.\d+)?$")


def discovered_vmid(value: object) -> int | None:
    """A VMID from `pct list` or the API, checked like the inventory's (pve-vmid), else None.

    Only an int or a string of ASCII digits counts: `int()` alone would take 101.7 (another
    container), True (1), "²" or Arabic-Indic digits.
    """
    if isinstance(value, bool):
        return None
    if isinstance(value, str):
        if not (value.isascii() and value.isdigit()):
            return None
        value = int(value)
    if not isinstance(value, int) or not VMID_MIN <= value <= VMID_MAX:
        return None
    return value


def split_tags(tags: object) -> tuple[str, ...]:
    """ "gpu;prod" -> ("gpu", "prod"), as PVE reads its tag lists."""
    if not isinstance(tags, str):
        return ()
    return tuple(dict.fromkeys(t for t in _TAG_SEPARATORS.split(tags) if t))


def first_words(line: str, limit: int = 80) -> str:
    text = " ".join(line.split())
    return text if len(text) <= limit else text[: limit - 3] + "..."


def _bad_line(line: str, number: int, listing: str, problem: str) -> DiscoveredContainer:
    words = line.split()
    vmid = discovered_vmid(words[0]) if words else None
    return DiscoveredContainer(vmid=vmid, status="unknown", name="", problem=problem,
                               where=f"`{listing}` line {number}")


def parse_pct_list(text: str) -> list[DiscoveredContainer]:
    """Parse `pct list` stdout; raise DiscoveryError when it is not pct list output.

    pct prints `printf "%-10s %-10s %-12s %-20s\\n"` rows (VMID Status Lock Name) under a
    header, and nothing at all, not even the header, when the host has no containers. The
    columns are not relied on: a lock such as `snapshot-delete` or a long name overflows its
    column. Words are: VMID and status always, the lock only when set, and the name, which is
    the hostname or `CT<vmid>` with whitespace stripped, so it is never empty.
    """
    found: list[DiscoveredContainer] = []
    for number, line in _table_rows(text, _PCT_HEADER, "pct list"):
        words = line.split()
        if len(words) == 3:
            vmid, status, name = words
            lock = ""
        elif len(words) == 4:
            vmid, status, lock, name = words
        else:
            found.append(_bad_line(line, number, "pct list",
                                   f"unexpected line: {first_words(line)}"))
            continue
        parsed = discovered_vmid(vmid)
        if parsed is None:
            found.append(_bad_line(line, number, "pct list",
                                   f"unexpected line (VMID {vmid!r}): {first_words(line)}"))
            continue
        found.append(DiscoveredContainer(vmid=parsed, status=status, name=name, lock=lock))
    return found


def _table_rows(text: str, header: tuple[str, ...], tool: str) -> list[tuple[int, str]]:
    """The non-blank lines below a table's header, each with its line number; DiscoveryError
    when the first line is not the header `tool` prints (a different tool, a wrapper's text)."""
    lines = [(n, line) for n, line in enumerate(text.splitlines(), 1) if line.strip()]
    if lines and tuple(lines[0][1].split()) != header:
        raise DiscoveryError(f"unexpected `{tool}` output: {first_words(lines[0][1])}")
    return lines[1:]


def parse_qm_list(text: str) -> list[DiscoveredContainer]:
    """Parse `qm list` stdout (VMID NAME STATUS MEM(MB) BOOTDISK(GB) PID).

    The name is `VM <vmid>` when unset (a space in it) and overflows its column when long,
    so a row is read from both ends: the VMID first, then the last four words (status,
    memory, disk, pid), and the name is what lies between. Without `--full`, the status is
    `running` or `stopped`. Templates are not marked here (pvesh or the API mark them).
    """
    found: list[DiscoveredContainer] = []
    for number, line in _table_rows(text, _QM_HEADER, "qm list"):
        words = line.split()
        vmid = discovered_vmid(words[0])
        tail = words[-4:]
        if (vmid is None or len(words) < 6 or not _NUMBER.match(tail[1])
                or not _NUMBER.match(tail[2]) or not tail[3].isdigit()):
            found.append(_bad_line(line, number, "qm list",
                                   f"unexpected line: {first_words(line)}"))
            continue
        name = " ".join(words[1:-4])
        found.append(DiscoveredContainer(vmid=vmid, status=tail[0], name=name))
    return found


def parse_guest_rows(rows: Any, listing: str, default_name: str) -> list[DiscoveredContainer]:
    """Rows of `GET /nodes/NODE/lxc|qemu` (the API, or pvesh's JSON): one guest each.

    `default_name` is PVE's own when the row has none: "CT{vmid}" or "VM {vmid}". A row that
    is not an object or has no readable VMID becomes an entry with `problem` set.
    """
    if not isinstance(rows, list):
        raise DiscoveryError(f"unexpected `{listing}` output (not a list of guests)")
    found: list[DiscoveredContainer] = []
    for index, row in enumerate(rows, 1):
        where = f"`{listing}` row {index}"
        if not isinstance(row, dict):
            found.append(DiscoveredContainer(vmid=None, status="unknown", name="",
                                             problem="row is not an object", where=where))
            continue
        vmid = discovered_vmid(row.get("vmid"))
        try:
            template = bool(int(row.get("template") or 0))
        except (TypeError, ValueError):
            template = False
        if vmid is None:
            found.append(DiscoveredContainer(
                vmid=None, status="unknown", name=str(row.get("name") or ""),
                problem=f"row without a valid vmid ({first_words(str(row.get('vmid')))})",
                where=where))
            continue
        found.append(DiscoveredContainer(
            vmid=vmid,
            status=str(row.get("status") or "unknown"),
            name=str(row.get("name") or default_name.format(vmid=vmid)),
            lock=str(row.get("lock") or ""),
            template=template,
            tags=split_tags(row.get("tags")),
        ))
    return sorted(found, key=lambda g: (g.vmid is None, g.vmid or 0))


def parse_pvesh_json(text: str, listing: str, default_name: str) -> list[DiscoveredContainer]:
    """`pvesh get /nodes/NODE/lxc|qemu --output-format json`: one compact JSON line."""
    try:
        rows = json.loads(text)
    except json.JSONDecodeError:
        raise DiscoveryError(
            f"unexpected `{listing}` output: {first_words(text) or 'nothing'}") from None
    return parse_guest_rows(rows, listing, default_name)


def parse_oci_ps(text: str, runtime: str) -> list[DiscoveredOci]:
    """`docker ps -a --format '{{json .}}'` or `podman ps -a --format json`: the containers.

    Two shapes, as the real tools print them: one JSON object a line (docker/cli 20.10 to 28,
    current podman with `{{json .}}`), or one JSON array, pretty-printed over many lines
    (podman's `--format json` in every release, and its `{{json .}}` in 4.3). Docker gives
    `Names` as a comma-joined string, podman as an array; both give `State` as a word
    (running, paused, exited, created...). A row that is not such an object becomes one entry
    with `problem` set; a container with several names is known by its first.
    """
    listing = f"{runtime} ps"
    rows: list[tuple[str, Any, str]] = []  # (where, the row, its text)
    rest, skipped_lines = text, 0
    start = len(text) - len(text.lstrip())
    if text[start:start + 1] == "[":
        try:
            whole, end = json.JSONDecoder().raw_decode(text, start)
        except json.JSONDecodeError:
            whole, end = None, 0
        if isinstance(whole, list):
            rows = [(f"`{listing}` entry {number}", row, json.dumps(row))
                    for number, row in enumerate(whole, 1)]
            # Whatever follows the array is read line by line, numbered as printed.
            skipped_lines, rest = text.count("\n", 0, end), text[end:]
    for number, line in enumerate(rest.splitlines(), skipped_lines + 1):
        if not line.strip():
            continue
        try:
            row = json.loads(line)
        except json.JSONDecodeError:
            row = None
        rows.append((f"`{listing}` line {number}", row, line))
    found: list[DiscoveredOci] = []
    for where, row, shown in rows:
        names = row.get("Names") if isinstance(row, dict) else None
        if isinstance(names, str):
            names = [n for n in names.split(",") if n]
        if not isinstance(names, list) or not names or not isinstance(names[0], str):
            found.append(DiscoveredOci(name="", state="unknown", where=where,
                                       problem=f"unexpected line: {first_words(shown)}"))
            continue
        state = row.get("State") if isinstance(row, dict) else None
        found.append(DiscoveredOci(name=names[0].lstrip("/"),
                                   state=state if isinstance(state, str) else "unknown"))
    return found
