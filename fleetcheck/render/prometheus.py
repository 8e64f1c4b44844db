"""Prometheus text exposition for node_exporter's textfile collector (docs/reports.md maps it)."""

from __future__ import annotations

from fleetcheck.render.matrix import fact
from fleetcheck.render.sanitize import prometheus_label
from fleetcheck.report.content import CHECK_STATUSES, NODE_STATUSES, VERDICTS, Report
from fleetcheck.timestamps import parse_timestamp

_HELP = {
    "fleetcheck_audit_timestamp_seconds": "When the audit finished, as a Unix time.",
    "fleetcheck_audit_duration_seconds": "How long the audit took, first probe to last result.",
    "fleetcheck_audit_interrupted": "1 when the audit was interrupted and the report is partial.",
    "fleetcheck_nodes": "Nodes per status in the audit.",
    "fleetcheck_node_info": "Always 1; carries the node's host and display name.",
    "fleetcheck_node_status": "1 for the node's status, 0 for the other statuses.",
    "fleetcheck_node_gpus": "GPUs the probe found on the node.",
    "fleetcheck_node_probe_duration_seconds": "How long probing the node took.",
    "fleetcheck_triton_verdict": "1 for the node's Triton verdict, 0 for the other verdicts.",
    "fleetcheck_triton_fallback": "1 when Triton falls back to CPU on the node (cause labelled).",
    "fleetcheck_check_status": "1 for each check of each node, labelled with its status.",
    "fleetcheck_fleet_check_status": "1 for each fleet-wide check, labelled with its status.",
    "fleetcheck_node_version": "Always 1; one per version a node reports (driver, torch, ...).",
    "fleetcheck_gpu_memory_used_bytes":
        "GPU memory in use before the job, the probe's own left out (per GPU).",
    "fleetcheck_gpu_memory_total_bytes": "GPU memory in all (per GPU).",
    "fleetcheck_gpu_foreign_processes":
        "Processes other than the probe's on the GPU, as the driver lists them (per GPU).",
    "fleetcheck_gpu_remap_pending":
        "1 when a memory repair (row remap, page retirement) waits for a GPU reset (per GPU).",
}

_MIB = 1 << 20


def _number(value: float) -> str:
    return str(int(value)) if float(value).is_integer() else repr(float(value))


class _Exposition:
    """Collects samples per metric so each family is written once with its HELP and TYPE."""

    def __init__(self) -> None:
        self.families: dict[str, list[str]] = {}

    def add(self, metric: str, value: float, **labels: object) -> None:
        pairs = ",".join(f'{key}="{prometheus_label(val)}"' for key, val in labels.items())
        sample = f"{metric}{{{pairs}}}" if pairs else metric
        self.families.setdefault(metric, []).append(f"{sample} {_number(value)}")

    def text(self) -> str:
        lines: list[str] = []
        for metric, samples in self.families.items():
            lines.append(f"# HELP {metric} {_HELP[metric]}")
            lines.append(f"# TYPE {metric} gauge")
            lines.extend(samples)
        return "\n".join(lines) + "\n"


def render_prometheus(report: Report) -> str:
    """Gauges for the textfile collector; every family is present even when it has no node."""
    out = _Exposition()
    finished = parse_timestamp(report.finished_at)
    started = parse_timestamp(report.started_at)
    if finished is not None:
        out.add("fleetcheck_audit_timestamp_seconds", finished)
    if finished is not None and started is not None:
        out.add("fleetcheck_audit_duration_seconds", max(0.0, finished - started))
    out.add("fleetcheck_audit_interrupted", int(report.interrupted))
    for status, count in report.summary.items():
        out.add("fleetcheck_nodes", count, status=status)
    for node in report.nodes:
        out.add("fleetcheck_node_info", 1, node=node.id, host=node.host, name=node.name)
    for node in report.nodes:
        for status in NODE_STATUSES:
            out.add("fleetcheck_node_status", int(node.status == status), node=node.id,
                    host=node.host, status=status)
    for node in report.nodes:
        count = fact(node.facts, "gpu_count")
        if isinstance(count, int) and not isinstance(count, bool):
            out.add("fleetcheck_node_gpus", count, node=node.id)
    for node in report.nodes:
        out.add("fleetcheck_node_probe_duration_seconds", node.duration_s, node=node.id)
    probed = [node for node in report.nodes if node.checks]
    for node in probed:
        for verdict in VERDICTS:
            out.add("fleetcheck_triton_verdict", int(node.triton.verdict == verdict),
                    node=node.id, verdict=verdict)
    for node in probed:
        fallback = node.triton.verdict == "cpu-fallback"
        cause = (node.triton.cause or "unknown") if fallback else ""
        out.add("fleetcheck_triton_fallback", int(fallback), node=node.id, cause=cause)
    for node in probed:
        for check in node.checks:
            status = check.status if check.status in CHECK_STATUSES else "error"
            out.add("fleetcheck_check_status", 1, node=node.id, check=check.id, status=status)
    for check in report.fleet_checks:
        status = check.status if check.status in CHECK_STATUSES else "error"
        out.add("fleetcheck_fleet_check_status", 1, check=check.id, status=status)
    _add_versions(out, report)
    _add_gpu_state(out, report)
    return out.text()


def _add_gpu_state(out: _Exposition, report: Report) -> None:
    """Per-GPU gauges from facts.gpu_state (nodes probed before it have none)."""
    for node in report.nodes:
        gpus = fact(node.facts, "gpu_state", "gpus")
        for gpu in gpus if isinstance(gpus, list) else []:
            index = fact(gpu, "index")
            if not isinstance(index, int) or isinstance(index, bool):
                continue
            labels = {"node": node.id, "gpu": index, "uuid": fact(gpu, "uuid") or ""}
            held, total = fact(gpu, "held_mib"), fact(gpu, "total_mib")
            if _count(held) is not None and _count(total) is not None:
                out.add("fleetcheck_gpu_memory_used_bytes", held * _MIB, **labels)
                out.add("fleetcheck_gpu_memory_total_bytes", total * _MIB, **labels)
            processes = fact(gpu, "processes")
            if isinstance(processes, list):
                out.add("fleetcheck_gpu_foreign_processes",
                        sum(1 for p in processes if isinstance(p, dict) and not p.get("own")),
                        **labels)
            health = fact(gpu, "health")
            if isinstance(health, dict) and health:
                pending = bool(fact(health, "remapped_rows", "pending")
                               or health.get("retired_pages_pending"))
                out.add("fleetcheck_gpu_remap_pending", int(pending), **labels)


def _count(value: object) -> int | None:
    return value if isinstance(value, int) and not isinstance(value, bool) else None


def _add_versions(out: _Exposition, report: Report) -> None:
    """One sample per node and compared fact, so a rule can count distinct values (drift)."""
    from fleetcheck.judgement.consistency import fact_value
    from fleetcheck.judgement.policy import CONSISTENCY_KEYS

    for node in report.nodes:
        for key in CONSISTENCY_KEYS:
            value = fact_value(node.facts, key)
            if value is not None:
                out.add("fleetcheck_node_version", 1, node=node.id, key=key, version=value)
