"""Diff two auditor profiles, per node, by own time: cProfile pstats or py-spy's raw stacks.

    python bench/profile_diff.py BASE OTHER --nodes N [--top 30] [--rate 250]

BASE and OTHER are pstats files (`bench/profile_audit.py`, `bench/probecost.py --profile`) or
py-spy's collapsed stacks (`bench/probecost.py --spy`, a `.txt`: each leaf frame's samples,
divided by --rate, are its own time; lines are dropped, so a function is one row). py-spy
samples a runnable thread as busy, so on a loaded machine its seconds exceed the CPU time:
compare the shares there, or one sampled run against another at the same load.

Prints the profiled CPU of each, the difference per node, then the functions whose own time
(tottime) differs most, in µs per node, and the same grouped by area (asyncssh's packets and
ciphers, asyncio, fleetcheck's parse, imports...), so that a gap between two runs of the same
fleet (the trivial and the real probe) is attributed to code rather than argued.
"""

from __future__ import annotations

import argparse
import pstats
from typing import Any

#: Areas, first match wins: (name, substrings of "file:line(function)").
AREAS = (
    ("imports (importlib, marshal, compile, exec)",
     ("importlib", "marshal.loads", "builtins.compile", "builtins.exec", "__build_class__",
      "posix.stat", "typing.py", "/re/_", "/enum.py", "dataclasses.py")),
    ("asyncssh cipher (encrypt/decrypt, C crypto)",
     ("asyncssh/crypto/", "_openssl", "cryptography", "decrypt", "encrypt", "finalize",
      "update_into")),
    ("asyncssh packets, channel, window", ("asyncssh/",)),
    ("sockets (send/recv)", ("_socket.socket", "selector_events.py", "selectors.py")),
    ("asyncio loop", ("asyncio/", "_contextvars")),
    ("fleetcheck parse of the reply", ("fleetcheck/probe/results.py", "json/decoder",
                                       "json.loads", "scanner")),
    ("fleetcheck rest", ("fleetcheck/",)),
)


def label(key: tuple[str, int, str]) -> str:
    path, line, name = key
    if path == "~":
        return name
    parts = path.split("/")
    return f"{'/'.join(parts[-3:])}:{line}({name})"


def area(text: str) -> str:
    for name, needles in AREAS:
        if any(needle in text for needle in needles):
            return name
    return "other (C builtins, stdlib)"


def spy_times(path: str, rate: float) -> tuple[float, dict[str, tuple[float, int]]]:
    """py-spy's raw format: `frame;frame;...;leaf COUNT`, a frame `function (path:line)`."""
    table: dict[str, tuple[float, int]] = {}
    total = 0.0
    with open(path, encoding="utf-8") as handle:
        for line in handle:
            stack, _, count = line.rstrip("\n").rpartition(" ")
            if not stack or not count.isdigit():
                continue
            leaf = stack.rsplit(";", 1)[-1]
            name, _, where = leaf.partition(" (")
            file = where.rsplit(":", 1)[0]
            text = f"{'/'.join(file.split('/')[-3:])}({name})"
            seconds = int(count) / rate
            total += seconds
            before, samples = table.get(text, (0.0, 0))
            table[text] = (before + seconds, samples + int(count))
    return total, table


def own_times(path: str, rate: float) -> tuple[float, dict[str, tuple[float, int]]]:
    if path.endswith(".txt"):
        return spy_times(path, rate)
    stats: Any = pstats.Stats(path)
    table: dict[str, tuple[float, int]] = {}
    for key, (_cc, calls, tottime, _ct, _callers) in stats.stats.items():
        text = label(key)
        seconds, count = table.get(text, (0.0, 0))
        table[text] = (seconds + tottime, count + calls)
    return float(stats.total_tt), table


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("base")
    parser.add_argument("other")
    parser.add_argument("--nodes", type=int, required=True)
    parser.add_argument("--top", type=int, default=30)
    parser.add_argument("--rate", type=float, default=250.0,
                        help="py-spy's samples per second (bench/probecost.py's SPY_RATE)")
    args = parser.parse_args()
    base_total, base = own_times(args.base, args.rate)
    other_total, other = own_times(args.other, args.rate)
    per = 1e6 / args.nodes
    print(f"profiled CPU: base {base_total:.3f} s, other {other_total:.3f} s, "
          f"difference {(other_total - base_total) * per / 1000:+.2f} ms per node "
          f"({args.nodes} nodes)")
    rows = []
    for text in set(base) | set(other):
        b_s, b_n = base.get(text, (0.0, 0))
        o_s, o_n = other.get(text, (0.0, 0))
        rows.append(((o_s - b_s) * per, (o_n - b_n) / args.nodes, b_s * per, o_s * per, text))
    print("\nby area, own time, µs per node: base, other, difference (share of base, of other)")
    areas: dict[str, list[float]] = {}
    for diff, _calls, b_us, o_us, text in rows:
        entry = areas.setdefault(area(text), [0.0, 0.0, 0.0])
        entry[0] += b_us
        entry[1] += o_us
        entry[2] += diff
    for name, (b_us, o_us, diff) in sorted(areas.items(), key=lambda item: -abs(item[1][2])):
        print(f"  {b_us:9.0f} {o_us:9.0f} {diff:+9.0f}  ({100 * b_us / (base_total * per):4.1f}%,"
              f" {100 * o_us / (other_total * per):4.1f}%)  {name}")
    print(f"\nfunctions, own time, µs per node: difference, calls (py-spy: samples) per node "
          f"difference, "
          f"base, other (top {args.top} by |difference|)")
    rows.sort(key=lambda row: -abs(row[0]))
    for diff, calls, b_us, o_us, text in rows[: args.top]:
        print(f"  {diff:+8.0f} {calls:+8.1f} {b_us:8.0f} {o_us:8.0f}  {text}")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
