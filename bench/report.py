"""Medians of the runs, the ratios, and bench/results.md."""

from __future__ import annotations

import json
import re
import statistics
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from pathlib import Path

from bench.contenders import Outcome

PROBE_PERFORMANCE = Path(__file__).resolve().parent.parent / "docs" / "probe-performance.md"


@dataclass(frozen=True)
class Row:
    """The median of a contender's runs on one fleet size with one probe."""

    containers: int
    probe: str
    contender: str
    runs: int
    wall_s: float
    wall_min_s: float
    wall_max_s: float
    cpu_s: float
    machine_cpu_s: float
    peak_rss_mb: float
    tree_rss_mb: float
    ok: int
    total: int
    #: Highest 1-minute load average seen at the start of a run.
    load_max: float = 0.0
    #: Most file descriptors the auditor's tree held at once (sampled).
    peak_fds: int = 0
    note: str = ""
    #: Median CPU of the fleet's sshd and all they ran, plus the auditor's (bench/measure.py).
    fleet_cpu_s: float = 0.0
    #: "containers" (Proxmox hosts of 20) or "nodes" (bare metal, one sshd each).
    shape: str = "containers"
    #: The core split (--pin): which cores the auditor and the fleet ran on.
    cores: str = ""
    #: The 1-minute load average at each run's start (every run's, in order).
    loads: tuple[float, ...] = ()

    @classmethod
    def from_outcomes(cls, containers: int, probe: str, contender: str,
                      outcomes: Sequence[Outcome], shape: str = "containers",
                      cores: str = "") -> Row:
        walls = [o.measurement.wall_s for o in outcomes]
        notes = sorted({o.note for o in outcomes if o.note})
        return cls(
            containers=containers, probe=probe, contender=contender, runs=len(outcomes),
            wall_s=statistics.median(walls), wall_min_s=min(walls), wall_max_s=max(walls),
            cpu_s=statistics.median(o.measurement.cpu_s for o in outcomes),
            machine_cpu_s=statistics.median(o.measurement.machine_cpu_s for o in outcomes),
            peak_rss_mb=max(o.measurement.peak_rss_mb for o in outcomes),
            tree_rss_mb=max(o.measurement.tree_rss_mb for o in outcomes),
            ok=min(o.ok for o in outcomes), total=outcomes[0].total,
            load_max=max(o.measurement.load_before for o in outcomes),
            peak_fds=max(o.measurement.peak_fds for o in outcomes), note="; ".join(notes),
            fleet_cpu_s=statistics.median(o.measurement.cpu_s + o.measurement.server_cpu_s
                                          for o in outcomes),
            shape=shape, cores=cores,
            loads=tuple(round(o.measurement.load_before, 2) for o in outcomes),
        )

    @property
    def cpu_ms_per_node(self) -> float:
        return 1000 * self.cpu_s / max(self.total, 1)


def _find(rows: Sequence[Row], containers: int, probe: str, contender: str) -> Row | None:
    for row in rows:
        if (row.containers, row.probe, row.contender) == (containers, probe, contender):
            return row
    return None


def ratio(rows: Sequence[Row], containers: int, probe: str, over: str, under: str) -> float | None:
    top, bottom = (_find(rows, containers, probe, over), _find(rows, containers, probe, under))
    if top is None or bottom is None or bottom.wall_s <= 0:
        return None
    return top.wall_s / bottom.wall_s


def fleet_cpu_ratio(rows: Sequence[Row], containers: int, probe: str, over: str,
                    under: str) -> float | None:
    """Like `ratio`, on fleet CPU (sshd and all it ran, plus the auditor): load-independent."""
    top, bottom = (_find(rows, containers, probe, over), _find(rows, containers, probe, under))
    if top is None or bottom is None or bottom.fleet_cpu_s <= 0 or top.fleet_cpu_s <= 0:
        return None
    return top.fleet_cpu_s / bottom.fleet_cpu_s


def quick_line(rows: Sequence[Row], containers: int) -> str:
    """`fleetcheck/floor=X.XX ansible/fleetcheck=Y.YY` (real probe, trivial probe)."""
    x = ratio(rows, containers, "real", "fleetcheck", "floor")
    y = ratio(rows, containers, "trivial", "ansible", "fleetcheck")
    show = lambda value: "n/a" if value is None else f"{value:.2f}"  # noqa: E731
    return f"fleetcheck/floor={show(x)} ansible/fleetcheck={show(y)}"


def cpu_ratio(rows: Sequence[Row], containers: int, probe: str, over: str,
              under: str) -> float | None:
    """Auditor CPU of `over` / that of `under` (same nodes, so per node alike)."""
    top, bottom = (_find(rows, containers, probe, over), _find(rows, containers, probe, under))
    if top is None or bottom is None or bottom.cpu_s <= 0:
        return None
    return top.cpu_s / bottom.cpu_s


def nodes_table(rows: Sequence[Row]) -> list[str]:
    """The table of a bare-metal run (pdsh, clush): the core split and each run's load."""
    lines = [
        "| nodes | probe | contender | cores | wall s (min–max) | × floor | × fleetcheck "
        "| auditor CPU s | CPU ms/node | CPU × fleetcheck | fleet CPU s | peak RSS MB "
        "| tree RSS MB | ok | runs | load at each run's start |",
        "|---:|---|---|---|---:|---:|---:|---:|---:|---:|---:|---:|---:|---:|---:|---|",
    ]
    for row in rows:
        floor = ratio(rows, row.containers, row.probe, row.contender, "floor")
        vs_fc = ratio(rows, row.containers, row.probe, row.contender, "fleetcheck")
        cpu_fc = cpu_ratio(rows, row.containers, row.probe, row.contender, "fleetcheck")
        spread = f" ({row.wall_min_s:.2f}–{row.wall_max_s:.2f})" if row.runs > 1 else ""
        lines.append(
            f"| {row.containers} | {row.probe} | {row.contender} | {row.cores or '–'} "
            f"| {row.wall_s:.2f}{spread} "
            f"| {'' if floor is None else f'{floor:.2f}'} "
            f"| {'' if vs_fc is None else f'{vs_fc:.2f}'} "
            f"| {row.cpu_s:.2f} | {row.cpu_ms_per_node:.1f} "
            f"| {'' if cpu_fc is None or row.contender.startswith('floor') else f'{cpu_fc:.1f}'} "
            f"| {f'{row.fleet_cpu_s:.1f}' if row.fleet_cpu_s else '–'} "
            f"| {row.peak_rss_mb:.0f} | {f'{row.tree_rss_mb:.0f}' if row.tree_rss_mb else '–'} "
            f"| {row.ok}/{row.total} "
            f"| {row.runs} | {', '.join(f'{load:.1f}' for load in row.loads) or '–'} |"
        )
    return lines


def table(rows: Sequence[Row]) -> list[str]:
    if rows and all(row.shape == "nodes" for row in rows):
        return nodes_table(rows)
    lines = [
        "| containers | probe | contender | wall s (min–max) | × floor | × fleetcheck "
        "| auditor CPU s | CPU ms/node | machine CPU s | peak RSS MB | tree RSS MB | ok "
        "| fds | runs | load | fleet CPU s | fleet CPU × floor |",
        "|---:|---|---|---:|---:|---:|---:|---:|---:|---:|---:|---:|---:|---:|---:|---:|---:|",
    ]
    for row in rows:
        floor = ratio(rows, row.containers, row.probe, row.contender, "floor")
        vs_fc = ratio(rows, row.containers, row.probe, row.contender, "fleetcheck")
        fleet = fleet_cpu_ratio(rows, row.containers, row.probe, row.contender, "floor")
        spread = f" ({row.wall_min_s:.2f}–{row.wall_max_s:.2f})" if row.runs > 1 else ""
        lines.append(
            f"| {row.containers} | {row.probe} | {row.contender} "
            f"| {row.wall_s:.2f}{spread} "
            f"| {'' if floor is None else f'{floor:.2f}'} "
            f"| {'' if vs_fc is None else f'{vs_fc:.2f}'} "
            f"| {row.cpu_s:.2f} | {row.cpu_ms_per_node:.1f} | {row.machine_cpu_s:.1f} "
            f"| {row.peak_rss_mb:.0f} | {row.tree_rss_mb:.0f} | {row.ok}/{row.total} "
            f"| {row.peak_fds or '–'} | {row.runs} | {row.load_max:.1f} "
            f"| {f'{row.fleet_cpu_s:.1f}' if row.fleet_cpu_s else '–'} "
            f"| {'' if fleet is None else f'{fleet:.2f}'} |"
        )
    return lines


def probe_performance_section() -> list[str]:
    """Quote docs/probe-performance.md's figures table (the probe engineer's H200 runs)."""
    lines = ["## Probe cost on a real GPU", ""]
    if not PROBE_PERFORMANCE.exists():
        return [*lines, "docs/probe-performance.md does not exist yet: the probe's cost next "
                "to a bare `import triton` on an H200 is not quoted here.", ""]
    text = PROBE_PERFORMANCE.read_text().splitlines()
    quoted: list[str] = []
    in_figures = False
    for line in text:
        if line.startswith("## "):
            in_figures = line.strip() == "## Figures"
            continue
        if in_figures and line.startswith("|"):
            quoted.append(line)
        elif quoted and not line.startswith("|"):
            break
    paragraphs = " ".join(line.strip() or "\n" for line in text).split("\n")
    cpu_only = [p.strip() for p in paragraphs if p.strip().startswith("No GPU stack")]
    lines += ["Quoted from [docs/probe-performance.md](../docs/probe-performance.md) (wall "
              "seconds on one NVIDIA H200, fresh Triton cache, median of 3; the method is "
              "there):", "", *quoted, ""]
    if cpu_only:
        lines += [f"> {cpu_only[0]}", ""]
    return lines


TARGETS = (
    # (label, containers, probe, kind, limit); issue #15's targets
    ("fleetcheck / floor, trivial probe, 100 containers", 100, "trivial", "floor", 1.15),
    ("fleetcheck / floor, trivial probe, 500 containers", 500, "trivial", "floor", 1.15),
    ("ansible / fleetcheck, trivial probe, 500 containers", 500, "trivial", "ansible", 3.0),
    ("fleetcheck / floor, real probe, 500 containers", 500, "real", "floor", 1.10),
    ("fleetcheck / floor, real probe, 100 containers", 100, "real", "floor", 1.3),
    ("ansible / fleetcheck, trivial probe, 100 containers", 100, "trivial", "ansible", 2.0),
    ("fleetcheck peak RSS at 500 containers (MB)", 500, "real", "rss", 150.0),
    ("fleetcheck auditor CPU per node at 500 containers (ms)", 500, "real", "cpu", 5.0),
)


def targets_section(rows: Sequence[Row], contender: str = "fleetcheck") -> list[str]:
    lines = ["## Targets", "", f"| target | limit | {contender} | met |", "|---|---:|---:|---|"]
    for label, containers, probe, kind, limit in TARGETS:
        row = _find(rows, containers, probe, contender)
        value: float | None
        if kind == "floor":
            value = ratio(rows, containers, probe, contender, "floor")
            met = value is not None and value <= limit
            shown = f"<= {limit:g}"
        elif kind == "ansible":
            value = ratio(rows, containers, probe, "ansible", contender)
            met = value is not None and value >= limit
            shown = f">= {limit:g}"
        elif kind == "rss":
            value = max((r.peak_rss_mb for r in rows if r.containers == containers
                         and r.contender == contender), default=None)
            met = value is not None and value <= limit
            shown = f"<= {limit:g}"
        else:
            value = row.cpu_ms_per_node if row else None
            met = value is not None and value <= limit
            shown = f"<= {limit:g}"
        lines.append(f"| {label.replace('fleetcheck', contender)} | {shown} "
                     f"| {'n/a' if value is None else f'{value:.2f}'} "
                     f"| {'yes' if met else ('n/a' if value is None else 'no')} |")
    return [*lines, ""]


METHOD = """\
## How it is measured

- Fleet: the tests' loopback kit (`tests/fleet`): one OpenSSH sshd per host on 127.0.0.1,
  with its own host key and OpenSSH's default MaxStartups/MaxSessions, and the `pct` stand-in.
  There are 20 containers per host (500 containers = 25 sshd). Each container is a fake GPU node
  from `tests/nodeenv.py` (stub libcuda, torch and Triton; the stub Triton really compiles
  its `cuda_utils` with gcc, so the real probe costs about 0.26 s of CPU per container here).
- **real**: the shipped probe (`fleetcheck.probe.probe_source()`, `probe_argv("python3", ...)`).
  **trivial**: a script that prints what the real probe printed in the first container and
  nothing else, so that only the orchestration is left. **latency**: the trivial probe after a
  2 s sleep. It stands in for a GPU node, whose probe mostly waits on `import torch` (4–6 s),
  and it shows what concurrency buys when the nodes are slow rather than busy.
  fleetcheck offers no option to choose the probe, so `bench/fleetcheck_with_probe.py`
  hands the probe to the real CLI, `fleetcheck.cli.main(argv, parts=AuditParts(probe=...))`.
- **floor**: `pct exec VMID --keep-env 0 -- python3 - ... < probe.py` for every container,
  run directly with no SSH, `cores` at a time. **floor-wide**: the same, with as many at a
  time as fleetcheck runs (min(64, 8 × hosts)).
- **fleetcheck**: `python -m fleetcheck audit INVENTORY --format json -o FILE --no-progress`,
  with the containers listed in the inventory (no discovery, like the others).
- **ansible**: `ansible containers -i hosts.ini -f 50 -m raw -a "pct exec {{ vmid }}
  --keep-env 0 -- python3 - ... < /path/probe.py"`. The inventory has one entry per container
  (`ansible_host=127.0.0.1 ansible_port=... vmid=...`), and ansible-core runs with its default
  ssh_args (ControlMaster=auto, ControlPersist=60s). `retries = 3` is set: without it, forks 50
  against sshd's default MaxStartups lost about 1 target in 100 ("kex_exchange_identification:
  Connection closed by remote host").
- **ssh-loop**: a bash loop of `ssh -p PORT root@127.0.0.1 "pct exec VMID ... < /path/probe.py"`,
  one container after the other. At 500 containers it runs once, not three times: it takes
  minutes per run.
- How the probe reaches the node: fleetcheck pipes it over the SSH channel, which is its
  design. Ansible `raw` cannot feed stdin, so ansible and the loop read a copy already on the
  host. That spares them the transfer.
- **auditor CPU**: user+sys of the auditor's whole process tree (`wait4`), plus the ssh
  ControlPersist masters it leaves behind (adopted as a child subreaper and reaped).
  **machine CPU**: busy time of the whole machine during the run: sshd, pct and probes, and
  also anything else running on the machine (see **load**, the 1-minute load average when a
  run started; this machine was shared with other test suites while the bench ran).
  **peak RSS**: `ru_maxrss` of the largest single process of the auditor's tree, measured
  from a small launcher (`bench/launch.py`) so that the bench's own memory does not count.
  **tree RSS**: the largest sampled sum over the tree (every 0.2 s).
  **fds**: the largest sampled count of open descriptors.
- The runs are interleaved (run 1 of every contender, then run 2, and so on), so drift in the
  machine's load hits every contender alike.
"""


def write_results(path: Path, rows: Sequence[Row], machine: Mapping[str, object],
                  runs: int, extra: Sequence[str] = (),
                  supplement: Sequence[Row] = ()) -> None:
    text = [
        "# fleetcheck benchmarks",
        "",
        f"Measured {machine['date']} on one machine: {machine['cores']} cores ({machine['cpu']}),"
        f" {machine['memory_gb']} GB, Python {machine['python']}, {machine['openssh']},"
        f" {machine['ansible']}"
        + "".join(f", {machine[key]}" for key in ("pdsh", "clush") if machine.get(key))
        + f"; core split: {machine.get('core_split', 'shared')}. Median of {runs} runs (min–max"
        " in brackets); produced by `python bench/run.py`. × floor and × fleetcheck compare"
        " wall times.",
        "",
        *table(rows),
        "",
        *targets_section(rows),
    ]
    if supplement:
        text += [
            "## Variants, measured",
            "",
            "Run separately, with `python bench/run.py --contenders",
            "floor,floor-wide,fleetcheck,fleetcheck-chacha`. **fleetcheck-chacha** is the same",
            "CLI given `bench/proposed_fixes.py`'s transport factory with asyncssh's own cipher",
            "order (chacha20-poly1305 first). **floor-wide** runs the probes directly, as many",
            "at a time as fleetcheck does.",
            "",
            *table(supplement),
            "",
            *targets_section(supplement, "fleetcheck-chacha"),
        ]
    text += [*extra, *probe_performance_section(), METHOD]
    path.write_text("\n".join(text).rstrip() + "\n")


_LOG_LINE = re.compile(
    r"^\[\s*[\d.]+s\]\s+(?P<n>\d+) (?P<probe>\w+)\s+(?P<name>\S+)\s+run (?P<run>\d+)/\d+:"
    r"\s+(?P<wall>[\d.]+) s wall,\s+(?P<cpu>[\d.]+) s cpu, load\s+(?P<load>[\d.]+),"
    r"\s+(?P<rss>[\d.]+) MB, ok (?P<ok>\d+)/(?P<total>\d+)", re.MULTILINE)


def rows_from_log(text: str, *, shape: str, cores: str,
                  skip: Sequence[tuple[int, str]] = ()) -> list[Row]:
    """Rows from bench/run.py's progress lines, for runs whose step was cut before its
    results were written: wall, auditor CPU, peak RSS, ok and load per run (no fleet CPU,
    tree RSS or machine CPU: the log does not carry them). `skip`: (nodes, probe) pairs
    already in a results file."""
    runs: dict[tuple[int, str, str], list[re.Match[str]]] = {}
    for match in _LOG_LINE.finditer(text):
        key = (int(match["n"]), match["probe"], match["name"])
        if key[:2] not in skip:
            runs.setdefault(key, []).append(match)
    rows = []
    for (nodes, probe, name), found in runs.items():
        walls = [float(m["wall"]) for m in found]
        rows.append(Row(
            containers=nodes, probe=probe, contender=name, runs=len(found),
            wall_s=statistics.median(walls), wall_min_s=min(walls), wall_max_s=max(walls),
            cpu_s=statistics.median(float(m["cpu"]) for m in found), machine_cpu_s=0.0,
            peak_rss_mb=max(float(m["rss"]) for m in found), tree_rss_mb=0.0,
            ok=min(int(m["ok"]) for m in found), total=int(found[0]["total"]),
            load_max=max(float(m["load"]) for m in found), shape=shape, cores=cores,
            loads=tuple(float(m["load"]) for m in found), note="from the run's log"))
    return rows


def load_rows(path: Path) -> tuple[list[Row], dict[str, object], int]:
    data = json.loads(path.read_text())
    fields = set(Row.__dataclass_fields__)
    rows = [Row(**{k: tuple(v) if k == "loads" else v for k, v in row.items() if k in fields})
            for row in data["rows"]]
    return rows, data["machine"], int(data["runs"])


def main(argv: Sequence[str] | None = None) -> int:
    """Rewrite results.md from results.json (and a supplement run's JSON, if given)."""
    import argparse

    parser = argparse.ArgumentParser(description=main.__doc__)
    parser.add_argument("results_json")
    parser.add_argument("--supplement", nargs="*", default=[],
                        help="JSON of runs with floor-wide and fleetcheck-chacha")
    parser.add_argument("--notes", help="markdown to include after the targets (findings)")
    parser.add_argument("-o", "--output", required=True)
    args = parser.parse_args(argv)
    rows, machine, runs = load_rows(Path(args.results_json))
    supplement = [row for extra in args.supplement for row in load_rows(Path(extra))[0]]
    notes = [*Path(args.notes).read_text().splitlines(), ""] if args.notes else []
    write_results(Path(args.output), rows, machine, runs, supplement=supplement, extra=notes)
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
