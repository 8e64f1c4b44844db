"""The check catalogue on the host: the probe's checks as the host shows them, derived from the
cause records (fleetcheck/probe/parts/catalogue.py, the module the probe is built from): ids,
causal order, vendors, titles, report columns, short labels, fixes.

Ids marked `catalogue=True` come from the failure catalogue (docs/checks.md lists them with
their error texts); the others are fleetcheck's own checks around them.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any

from fleetcheck.probe.parts.catalogue import (
    CAUSES,
    CAUSES_BY_ID,
    REPAIRS,
    Cause,
    cause_label,
    fill_fix,
)


@dataclass(frozen=True)
class CheckInfo:
    id: str
    title: str
    column: str
    catalogue: bool = True
    #: "nvidia" or "amd" for a check of one vendor's stack only (the other's documents leave it
    #: out); None for the checks every GPU node's document holds.
    vendor: str | None = None
    #: The title on an AMD node, where the shared check answers for HIP (None: `title`).
    amd_title: str | None = None
    #: The text of a report cell this check fails or warns (None: the state's word).
    short: str | None = None


#: The column of a check whose record names none: the end-to-end checks', shown under Triton.
VERDICT_COLUMN = "verdict"


def check_info(cause: Cause) -> CheckInfo:
    """How the host shows a record's check; a record that says nothing of it still gets its
    label as the title and the verdict's column (a test asks every record for both)."""
    return CheckInfo(cause.id, cause.title or cause.label, cause.column or VERDICT_COLUMN,
                     cause.catalogue, cause.vendor, cause.amd_title, cause.short)


#: Every check the probe emits, in causal order: the first failing one is the root cause.
CHECKS: tuple[CheckInfo, ...] = tuple(check_info(cause) for cause in CAUSES if cause.check)

CHECKS_BY_ID: dict[str, CheckInfo] = {info.id: info for info in CHECKS}


def check_title(check_id: str, facts: object = None) -> str:
    """A check's title for a node: its AMD wording on an AMD node (facts.gpu_vendor "amd")."""
    info = CHECKS_BY_ID.get(check_id)
    if info is None:
        return check_id
    amd = isinstance(facts, Mapping) and facts.get("gpu_vendor") == "amd"
    return info.amd_title if amd and info.amd_title else info.title


def vendor_checks(vendor: str) -> tuple[CheckInfo, ...]:
    """The checks a node of `vendor`'s GPUs reports ("nvidia" for a node without a GPU too)."""
    return tuple(info for info in CHECKS if info.vendor in (None, vendor))

#: Report columns in display order, with their headings.
COLUMNS: tuple[tuple[str, str], ...] = (
    ("gpus", "GPUs"),
    # Memory in use on the GPUs: used/total, or `held` and by what (facts.gpu_state).
    ("gpu_memory", "GPU mem"),
    ("driver", "Driver"),
    ("torch", "CUDA/torch"),
    ("triton", "Triton"),
    ("compiler", "Compiler"),
    ("headers", "Headers"),
    ("libcuda", "libcuda"),
    ("cache", "Cache"),
    ("fla", "FLA"),
    # What each installed framework will do (facts.frameworks): fed by no check of its own.
    ("frameworks", "Frameworks"),
)


def causal_rank(check_id: str) -> int:
    """Position in causal order; unknown ids sort last."""
    for index, info in enumerate(CHECKS):
        if info.id == check_id:
            return index
    return len(CHECKS)


def _section(facts: Mapping[str, Any], key: str) -> Mapping[str, Any]:
    value = facts.get(key)
    return value if isinstance(value, Mapping) else {}


def node_fix_values(facts: object) -> dict[str, str]:
    """The values a cause's fix is filled with, from a node's facts (the probe's own names)."""
    if not isinstance(facts, Mapping):
        return {}
    python, os_info, triton, torch = (_section(facts, key) for key in (
        "python", "os", "triton", "torch"))
    executable = str(python.get("executable") or "python3")
    version = ".".join(str(python.get("version") or "3").split(".")[:2])
    rhel = str(os_info.get("id") or "") in ("rhel", "centos", "rocky", "almalinux", "fedora",
                                            "ol", "amzn")
    return {"python": executable, "pip": f"{executable} -m pip",
            "install": "dnf install -y" if rhel else "apt-get install -y",
            "pkg_cc": f"gcc glibc-devel python{version}-devel" if rhel
            else f"gcc libc6-dev python{version}-dev",
            "pkg_libc": "glibc-devel" if rhel else "libc6-dev",
            "pkg_python": f"python{version}-devel" if rhel else f"python{version}-dev",
            "triton": str(triton.get("version") or ""), "torch": str(torch.get("version") or ""),
            "cache_dir": str(facts.get("triton_cache_dir") or "")}


def cause_fix(cause_id: str | None, facts: object = None) -> str:
    """'label: fix' of a cause from its record, filled with the node's values ('' for none)."""
    if not cause_id or cause_id not in CAUSES_BY_ID:
        return ""
    vendor = facts.get("gpu_vendor") if isinstance(facts, Mapping) else None
    return f"{cause_label(cause_id, vendor)}: {fill_fix(cause_id, node_fix_values(facts))}"


#: Where docs/checks.md holds the table of causes generated from the records.
CAUSES_TABLE_START = "<!-- causes: generated from fleetcheck/probe/parts/catalogue.py -->"
CAUSES_TABLE_END = "<!-- end of causes -->"


def _cell(text: str) -> str:
    return text.replace("|", "\\|")


def _named_from(cause: Cause) -> str:
    """What names a cause: its check, its messages, errnos, errnos in a workload dir."""
    named = ["its check"] if cause.check else []
    named += [f"`{_cell(text)}`" for text in cause.texts]
    named += [f"errno {name}" for name in cause.errnos]
    named += [f"{' '.join(names)} in the {place} dir"
              for place, names in sorted((cause.places or {}).items())]
    return "; ".join(named) or "its object or limit"


def _judged(cause: Cause) -> str:
    """How the probe weighs a check: what it fails, what it needs, what hides it."""
    if not cause.check:
        return ""
    scope = {"triton": "the verdict", "framework": "the node (a framework's own way)",
             "gpu_state": "the node (the GPUs' state)"}.get(cause.scope, cause.scope)
    notes = [f"fails {scope}"]
    if cause.graded_by:
        notes.append(f"graded by `{cause.graded_by}`")
    if cause.stack:
        notes.append("needs the stack")
    if cause.maskable:
        notes.append("a warm cache hides it")
    info = check_info(cause)
    shown = f"`{info.column}`" + (f" ({info.short})" if info.short else "")
    return f"{'; '.join(notes)}; column {shown}"


def causes_table() -> str:
    """docs/checks.md's table of causes, one row per record (a test pins the file to it)."""
    rows = [CAUSES_TABLE_START, "",
            "| cause | label | named from | judged (checks) | fix (filled with the node's "
            "values) | `fleetcheck fix` |",
            "|---|---|---|---|---|---|"]
    for cause in CAUSES:
        label = _cell(cause.label) + (" (toolchain)" if cause.toolchain else "")
        rows.append(f"| `{cause.id}` | {label} | {_named_from(cause)} | {_judged(cause)} "
                    f"| {_cell(cause.fix)} | {cause.repair or 'printed'} |")
    legend = [f"- `{repair or 'printed'}`: {what}" for repair, what in REPAIRS.items()]
    return "\n".join([*rows, "", "What `fleetcheck fix` does (the record's `repair`):", "",
                      *legend, "", CAUSES_TABLE_END])
