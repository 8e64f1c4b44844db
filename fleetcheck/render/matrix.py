"""The report matrix every human-facing renderer shares: rows grouped by host, cells per column."""

from __future__ import annotations

from collections import Counter
from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any

from fleetcheck.checks import CHECKS_BY_ID, COLUMNS, causal_rank
from fleetcheck.judgement.frameworks import framework_outcomes
from fleetcheck.judgement.statuses import GATE_UNVERIFIED, PROBLEM_CHECK_STATUSES, PROBLEM_STATUSES
from fleetcheck.report.content import Check, NodeResult, Report

#: Cell states, best first; a cell shows the worst state of its checks.
CELL_STATES = ("none", "pass", "skip", "warn", "error", "fail")
_CELL_RANK = {state: index for index, state in enumerate(CELL_STATES)}

#: Node statuses whose rows carry no checks: their reason spans the row.
SPANNING_STATUSES = GATE_UNVERIFIED
#: Node statuses listed below the matrix, most urgent first.
PROBLEM_ORDER = PROBLEM_STATUSES

_VERDICT_STATE = {
    "gpu": "pass",
    "cpu-fallback": "fail",
    "no-gpu": "skip",
    "not-installed": "skip",
    "unknown": "error",
}

#: Short cell words for a framework's outcome (verdict.FRAMEWORK_STATES has the full set).
FRAMEWORK_SHORT = {
    "gpu": "gpu", "triton": "gpu", "cpu-only": "cpu", "cpu-fallback": "cpu",
    "fails-at-kernel": "kernel", "triton-disabled": "off", "no-triton": "off",
    "gpu-unsupported": "unsup", "unknown": "?", "fails-before-triton": "compile",
    "import-fails": "import", "cpu": "cpu", "triton-off": "off",
}
_STATE_WORDS = {"pass": "ok", "skip": "skip", "warn": "warn", "error": "error", "fail": "fail"}


@dataclass(frozen=True)
class Cell:
    """One column of one node: its worst state, a short text and the checks behind it."""

    column: str
    state: str
    text: str
    checks: tuple[Check, ...] = ()


@dataclass(frozen=True)
class Row:
    """One node as the matrix shows it; `cells` is empty when its reason spans the row."""

    node: NodeResult
    cells: tuple[Cell, ...]

    @property
    def spans(self) -> bool:
        return not self.cells

    @property
    def fallback(self) -> bool:
        return self.node.triton.verdict == "cpu-fallback"


def fact(facts: Any, *path: str) -> Any:
    """The fact at this key path, or None when any step is missing or not a mapping."""
    value = facts
    for key in path:
        if not isinstance(value, Mapping):
            return None
        value = value.get(key)
    return value


def _scalar(value: Any) -> str | None:
    if isinstance(value, bool) or value is None:
        return None
    if isinstance(value, (str, int, float)):
        text = str(value).strip()
        return text or None
    return None


def _gpu_name(name: str) -> str:
    # NVIDIA's names lose the vendor; AMD's keep it ("AMD Instinct MI300X"), so a mixed fleet's
    # column says which is which.
    for prefix in ("NVIDIA ", "GeForce "):
        if name.startswith(prefix):
            name = name[len(prefix):]
    return name


def gpus_text(facts: Mapping[str, Any]) -> str | None:
    """'8× H200' from gpu_count and gpus[].name; None when the probe said nothing."""
    gpus = facts.get("gpus")
    names = []
    if isinstance(gpus, list):
        names = [_gpu_name(n) for g in gpus if (n := _scalar(fact(g, "name")))]
    count = facts.get("gpu_count")
    if not isinstance(count, int) or isinstance(count, bool):
        count = len(gpus) if isinstance(gpus, list) else None
    if count is None:
        return None
    if count == 0:
        return "0"
    common = Counter(names).most_common()
    if not common:
        return f"{count}×"
    return f"{count}× {common[0][0]}" if len(common) == 1 else f"{count}× mixed"


def torch_text(facts: Mapping[str, Any]) -> str | None:
    """'2.11.0/13.0': torch's version without the local part, then the CUDA it was built for
    ('2.9.0/ROCm 6.4' for a ROCm build)."""
    if "torch" not in facts:
        return None
    version = _scalar(fact(facts, "torch", "version"))
    if version is None:
        return "no torch"
    hip = _scalar(fact(facts, "torch", "hip"))
    if hip:
        return f"{version.split('+')[0]}/ROCm {'.'.join(hip.split('.')[:2])}"
    cuda = _scalar(fact(facts, "torch", "cuda")) or "cpu"
    return f"{version.split('+')[0]}/{cuda}"


def _fact_text(column: str, node: NodeResult) -> str | None:
    facts = node.facts if isinstance(node.facts, Mapping) else {}
    if column == "gpus":
        return gpus_text(facts)
    if column == "driver":
        return _scalar(fact(facts, "driver", "userspace")) or _scalar(
            fact(facts, "driver", "kernel_module")
        )
    if column == "torch":
        return torch_text(facts)
    if column == "triton":
        return node.triton.verdict
    if column == "compiler":
        if "compiler" in facts and facts.get("compiler") is None:
            return "missing"
        path = _scalar(fact(facts, "compiler", "path"))
        return path.rsplit("/", 1)[-1] if path else None
    if column == "fla":
        return _scalar(fact(facts, "fla", "version"))
    return None


def _number(value: Any) -> float | None:
    if isinstance(value, bool) or not isinstance(value, (int, float)):
        return None
    return float(value)


def _gib(mib: float) -> str:
    gib = mib / 1024
    return f"{gib:.1f}" if gib < 10 else f"{gib:.0f}"


def _gpu_states(facts: Mapping[str, Any]) -> list[Mapping[str, Any]]:
    gpus = fact(facts, "gpu_state", "gpus")
    return [g for g in gpus if isinstance(g, Mapping)] if isinstance(gpus, list) else []


def _holder(gpu: Mapping[str, Any]) -> str:
    """Who holds a GPU, in a word: the first foreign process's name, its pid, or '?' when its
    process is not in this pid namespace."""
    processes = gpu.get("processes")
    for process in processes if isinstance(processes, list) else []:
        if isinstance(process, Mapping) and not process.get("own"):
            if process.get("here"):
                return _scalar(process.get("name")) or f"pid {_scalar(process.get('pid'))}"
            return f"pid {_scalar(process.get('pid'))}?"
    return "?"


def gpu_memory_text(facts: Mapping[str, Any], problem: bool) -> str | None:
    """The GPU memory column: '0.5/140G' (the fullest GPU's memory in use, of its total), or
    'held 131G python' when its GPU-state checks found memory held or another process."""
    sized: list[tuple[Mapping[str, Any], float, float]] = []
    # The GPUs the job may use (CUDA_VISIBLE_DEVICES's), not a neighbour's on a shared node.
    for gpu in (g for g in _gpu_states(facts) if g.get("job") is not False):
        held, total = _number(gpu.get("held_mib")), _number(gpu.get("total_mib"))
        if held is not None and total is not None and total > 0:
            sized.append((gpu, held, total))
    if not sized:
        return None
    gpu, held, total = max(sized, key=lambda item: item[1] / item[2])
    if problem and held / total > 0.01:
        return f"held {_gib(held)}G {_holder(gpu)}"
    return f"{_gib(held)}/{_gib(total)}G"


@dataclass(frozen=True)
class GpuRow:
    """One GPU of a node as the HTML report lists it (facts.gpu_state)."""

    index: str
    memory: str
    processes: str
    modes: str
    health: str


def _process_text(process: Mapping[str, Any]) -> str:
    pid = _scalar(process.get("pid")) or "?"
    used = _number(process.get("used_mib"))
    size = f" {_gib(used)} GiB" if used is not None else ""
    if process.get("own"):
        return f"pid {pid} (the probe){size}"
    if not process.get("here"):
        return f"pid {pid} (another pid namespace){size}"
    who = _scalar(process.get("cmdline")) or _scalar(process.get("name")) or "?"
    user = _scalar(process.get("user"))
    return f"pid {pid} {who}" + (f" ({user})" if user else "") + size


def _health_text(health: Any) -> str:
    if not isinstance(health, Mapping) or not health:
        return "not read"
    remapped = health.get("remapped_rows")
    rows: Mapping[str, Any] = remapped if isinstance(remapped, Mapping) else {}
    words = []
    if rows.get("failure"):
        words.append("row remap failed")
    if rows.get("pending") or health.get("retired_pages_pending"):
        words.append("repair pending")
    ecc = _number(health.get("ecc_uncorrected_volatile"))
    if ecc:
        words.append(f"{ecc:.0f} uncorrected ECC")
    return ", ".join(words) or "ok"


def gpu_rows(facts: Any) -> list[GpuRow]:
    """Each GPU's memory, processes, modes and memory health (none for older probes)."""
    rows = []
    for gpu in _gpu_states(facts if isinstance(facts, Mapping) else {}):
        held, total = _number(gpu.get("held_mib")), _number(gpu.get("total_mib"))
        memory = (f"{_gib(held)} of {_gib(total)} GiB in use"
                  if held is not None and total is not None and total > 0 else "not read")
        processes = gpu.get("processes")
        listed = [_process_text(p) for p in processes if isinstance(p, Mapping)] if isinstance(
            processes, list) else []
        mode = gpu.get("persistence_mode")
        persistence = ("persistence on" if mode == 1 else "persistence off" if mode == 0
                       else "persistence ?")
        modes = f"{persistence}, {_scalar(gpu.get('compute_mode')) or 'compute mode ?'}"
        rows.append(GpuRow(_scalar(gpu.get("index")) or "?", memory,
                           "; ".join(listed) or _scalar(gpu.get("processes_error")) or "none",
                           modes, _health_text(gpu.get("health"))))
    return rows


def worst_state(states: list[str]) -> str:
    return max(states, key=lambda state: _CELL_RANK.get(state, 0), default="none")


def column_of(check_id: str) -> str | None:
    """The report column a check feeds; the end-to-end checks feed the Triton column."""
    info = CHECKS_BY_ID.get(check_id)
    if info is None:
        return None
    return "triton" if info.column == "verdict" else info.column


def frameworks_cell(node: NodeResult) -> Cell:
    """'FLA cpu vLLM off': each installed framework's outcome; the cell shows the worst."""
    outcomes = framework_outcomes(node.facts if isinstance(node.facts, Mapping) else {})
    if not outcomes:
        return Cell("frameworks", "none", "—", ())
    state = worst_state([item.state for item in outcomes])
    text = " ".join(f"{item.label} {FRAMEWORK_SHORT.get(item.outcome, '?')}" for item in outcomes)
    return Cell("frameworks", state, text, ())


def build_cell(node: NodeResult, column: str) -> Cell:
    if column == "frameworks":
        return frameworks_cell(node)
    checks = sorted(
        (c for c in node.checks if column_of(c.id) == column), key=lambda c: causal_rank(c.id)
    )
    states = [c.status if c.status in _CELL_RANK else "error" for c in checks]
    if column == "triton":
        states.append(_VERDICT_STATE.get(node.triton.verdict, "error"))
    state = worst_state(states)
    text = _fact_text(column, node)
    if column == "gpu_memory":
        facts = node.facts if isinstance(node.facts, Mapping) else {}
        text = gpu_memory_text(facts, state in PROBLEM_CHECK_STATUSES)
        if text is None and state in PROBLEM_CHECK_STATUSES:
            text = _STATE_WORDS[state]
    elif column != "triton" and state in PROBLEM_CHECK_STATUSES:
        culprit = next((c for c, s in zip(checks, states, strict=True) if s == state), None)
        label = _STATE_WORDS[state]
        info = CHECKS_BY_ID.get(culprit.id) if culprit is not None else None
        # The record's short text, so a narrow column still says what is wrong.
        text = info.short if info is not None and info.short else label
    if text is None:
        text = _STATE_WORDS.get(state, "—")
    return Cell(column, state, text, tuple(checks))


def build_row(node: NodeResult) -> Row:
    if node.status in SPANNING_STATUSES and not node.checks:
        return Row(node, ())
    return Row(node, tuple(build_cell(node, column) for column, _ in COLUMNS))


def grouped_nodes(report: Report) -> list[NodeResult]:
    """Nodes grouped by host in first-seen order: the host itself first, then containers by VMID."""
    hosts: dict[str, list[NodeResult]] = {}
    for node in report.nodes:
        hosts.setdefault(node.host, []).append(node)
    ordered: list[NodeResult] = []
    for members in hosts.values():
        ordered.extend(sorted(members, key=lambda n: (n.vmid is not None, n.vmid or 0)))
    return ordered


def build_rows(report: Report) -> list[Row]:
    return [build_row(node) for node in grouped_nodes(report)]


def problem_nodes(report: Report) -> list[NodeResult]:
    """Nodes that need a look, most urgent status first, cpu-fallback ones leading."""
    rank = {status: index for index, status in enumerate(PROBLEM_ORDER)}
    nodes = [n for n in grouped_nodes(report) if n.status in rank]
    return sorted(nodes, key=lambda n: (rank[n.status], n.triton.verdict != "cpu-fallback"))


def fallback_nodes(report: Report) -> list[NodeResult]:
    return [n for n in grouped_nodes(report) if n.triton.verdict == "cpu-fallback"]


def display_name(node: NodeResult) -> str:
    """Node id, then its name when it adds something."""
    return node.id if not node.name or node.name == node.id else f"{node.id} {node.name}"
