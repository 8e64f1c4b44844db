"""The repair planner: a probed node's failing causes -> the steps that fix them, where they run.

Which causes fleetcheck repairs itself (safe and local: packages, the ld.so.conf.d entry and
`ldconfig`, the `libcuda.so` symlink) and which it only prints for the host's admin or the
workload's owner (device pass-through, drivers, fabric manager, the venv's torch/Triton, the
workload's environment) is each cause record's `repair` (probe/parts/catalogue.py, REPAIRS);
this module owns how. Every step is an argv list; every name or path taken from the node's
facts is checked against a strict pattern before it enters one.
"""

from __future__ import annotations

import os
import re
from collections.abc import Mapping
from dataclasses import dataclass, field
from typing import Any

from fleetcheck import kinds
from fleetcheck.checks import CHECKS_BY_ID, causal_rank, node_fix_values
from fleetcheck.fix.distro import (
    Family,
    UnsafeName,
    family_for,
    install_argv,
    python_headers_package,
    python_xy,
)
from fleetcheck.judgement.statuses import UNVERIFIED_STATUSES
from fleetcheck.probe.parts.catalogue import CAUSES_BY_ID, fill_fix
from fleetcheck.report.content import Check, NodeResult, Report

#: Our own ld.so.conf.d file: one line, ours alone, so the step is idempotent and revertible.
LDCONF_FILE = "/etc/ld.so.conf.d/fleetcheck-libcuda.conf"
#: The path Triton itself runs (it is hard-coded there, so it is the one that must work).
LDCONFIG = "/sbin/ldconfig"
#: A directory as it may appear in a step: absolute, no spaces, quotes, newlines or `..`.
_SAFE_DIR = re.compile(r"^/[A-Za-z0-9._+@/-]{0,4000}$")
_VERSION = re.compile(r"^[0-9]{1,4}(?:\.[0-9]{1,4}){0,3}$")
#: HIP's version as the probe writes it: major.minor.patch, the patch a build number (6.4.43482).
_HIP_VERSION = re.compile(r"^[0-9]{1,3}\.[0-9]{1,3}\.[0-9]{1,8}$")
#: Where the interpreter's headers come from a distribution package (else the person's job).
_DISTRO_INCLUDE = ("/usr/include/", "/usr/local/include/")

#: What a fix never touches, whatever the node's causes: said in every plan.
LEAVES_ALONE = (
    "the workload's Python packages (torch, triton, flash-linear-attention)",
    "the workload's environment and the user's Triton cache",
    "the host: container configuration, drivers, services",
)
#: The records' repairs that are the host's (its admin's) to do, never run from the node.
HOST_REPAIRS = ("host", "gpu_access")


@dataclass(frozen=True)
class Step:
    """One command the fix runs on the node, as root there."""

    cause: str
    why: str
    argv: tuple[str, ...]
    #: Text fed on stdin (a file's content for `tee`), or None.
    input: str | None = None


@dataclass(frozen=True)
class ManualAction:
    """A repair fleetcheck prints and never runs: `who` is "host" or "person"."""

    cause: str
    who: str
    summary: str
    lines: tuple[str, ...] = ()


@dataclass(frozen=True)
class NodePlan:
    """What fixing one failing node takes: steps to run, actions to print, where they run."""

    node: NodeResult
    where: str
    causes: tuple[str, ...]
    steps: tuple[Step, ...] = ()
    manual: tuple[ManualAction, ...] = ()
    #: Why some safe cause got no step (unknown distribution, an unsafe name...), or "".
    note: str = ""
    leaves_alone: tuple[str, ...] = LEAVES_ALONE


@dataclass(frozen=True)
class FixPlan:
    """The plan for a whole selection: failing nodes planned, unverified ones listed."""

    plans: tuple[NodePlan, ...]
    #: Nodes that could not be probed: nothing is known to plan from (id, status, reason).
    unverified: tuple[tuple[str, str, str], ...] = ()
    #: Nodes with no failing cause: never touched.
    untouched: tuple[str, ...] = ()
    source: str = ""
    extra: Mapping[str, Any] = field(default_factory=dict)

    @property
    def runnable(self) -> tuple[NodePlan, ...]:
        """The plans with at least one step to run."""
        return tuple(plan for plan in self.plans if plan.steps)


def node_kind(node: NodeResult) -> str:
    """The node's `kind` when it has one, else the registry's default from its VMID."""
    kind = getattr(node, "kind", None)
    if isinstance(kind, str) and kind:
        return kind
    return kinds.default_kind(node.vmid)


def where_it_runs(node: NodeResult) -> str:
    """Where and as whom the node's steps run: the transport its probe ran through."""
    # Each kind words its own transport; a kind this version does not know is read as a host.
    return (kinds.find(node_kind(node)) or kinds.root()).where_it_runs(node)


def container_kind(node: NodeResult) -> kinds.NodeKind | None:
    """The kind of container the node is (LXC, Docker, Podman, a pod): its inventory kind,
    or for a `host` node (a node document), the one the probe's facts.where names; None for
    a host or a VM."""
    own = kinds.find(node_kind(node))
    if own is not None and own.where_name is not None:
        return own
    where = node.facts.get("where")
    found = where.get("container") if isinstance(where, Mapping) else None
    return next((k for k in kinds.all_kinds() if found and k.where_name == found), None)


def failing_causes(node: NodeResult) -> list[Check]:
    """The node's failing causes in causal order (the root cause first).

    Causes are the catalogue's checks; fleetcheck's own (torch_cuda, triton_target...) only
    restate a cause's consequence and get no repair of their own.
    """
    return sorted((c for c in node.checks if c.status == "fail"
                   and (c.id not in CHECKS_BY_ID or CHECKS_BY_ID[c.id].catalogue)),
                  key=lambda check: causal_rank(check.id))


def repair_of(cause_id: str) -> str | None:
    """What fix does about a cause: its record's `repair` (None, for an id no record has too:
    its fix printed for the workload's owner)."""
    cause = CAUSES_BY_ID.get(cause_id)
    return cause.repair if cause is not None else None


def _safe_dir(path: object) -> str | None:
    if not isinstance(path, str) or not _SAFE_DIR.match(path):
        return None
    if path != os.path.normpath(path) or "/../" in f"{path}/":
        return None
    return path


def _libcuda_dir(check: Check) -> str | None:
    """The directory holding the libcuda.so.1 the loader found, when it is a real driver dir."""
    loaded = check.evidence.get("dlopen")
    directory = _safe_dir(os.path.dirname(loaded)) if isinstance(loaded, str) else None
    # A forward-compat or link-time stub dir in the cache breaks more than it fixes.
    if directory is None or any(part in ("compat", "stubs") for part in directory.split("/")):
        return None
    return directory


def _python_headers(
    node: NodeResult, family: Family, *, failed: bool
) -> tuple[list[str], ManualAction | None]:
    """(packages, manual action) for Python.h: a package only for a distribution interpreter.

    `failed`: the headers check itself failed; otherwise (alongside a missing compiler) the
    package is added only when the probe found no Python.h.
    """
    check = node.check("python_headers_missing")
    evidence = check.evidence if check else {}
    if not failed and evidence.get("python_h_exists") is True:
        return [], None
    xy = python_xy(node.facts)
    include = evidence.get("include")
    python = node.facts.get("python")
    executable = python.get("executable") if isinstance(python, Mapping) else None
    if isinstance(include, str):
        distro = include.startswith(_DISTRO_INCLUDE)
    else:
        distro = isinstance(executable, str) and executable.startswith(("/usr/bin/", "/bin/"))
    if xy is None or not distro:
        where = include if isinstance(include, str) else "its include directory"
        return [], ManualAction(
            "python_headers_missing", "person",
            f"Python.h for {executable or 'the workload interpreter'} belongs in {where}, "
            "which no distribution package provides",
            (f"reinstall that interpreter with its headers (pyenv, conda and uv builds ship "
             f"them in {where})",))
    return [python_headers_package(family, xy)], None


def _manual_for(node: NodeResult, check: Check) -> ManualAction:
    """The printed repair for a cause that belongs to the host or to a person."""
    facts = node.facts
    driver = facts.get("driver") if isinstance(facts.get("driver"), Mapping) else {}
    assert isinstance(driver, Mapping)
    module = driver.get("kernel_module")
    if not isinstance(module, str) or not _VERSION.match(module):
        module = "<the host's driver version>"
    if repair_of(check.id) == "gpu_access":
        # How the GPUs reach the node is its kind's to say (LXC config, a runtime's options).
        vendor = "amd" if facts.get("gpu_vendor") == "amd" else "nvidia"
        inside = kinds.find(node_kind(node)) if vendor == "amd" else container_kind(node)
        lines = inside.gpu_passthrough(node, check, vendor) if inside is not None else None
        if lines:
            return ManualAction(check.id, "host", check.summary, lines)
    if facts.get("gpu_vendor") == "amd":
        return _manual_for_amd(node, check)
    if check.id == "driver_userspace_mismatch":
        return ManualAction(check.id, "host", check.summary, (
            f"install the driver's user-space libraries at exactly {module} in the node "
            f"(NVIDIA-Linux-x86_64-{module}.run --no-kernel-module), or match the host's "
            "driver to the node's",))
    if check.id == "fabric_manager_not_ready":
        return ManualAction(check.id, "host", check.summary, (
            f"# on {node.host}: nvidia-fabricmanager at exactly the driver's version {module}",
            "systemctl enable --now nvidia-fabricmanager",))
    return _printed_fix(node, check)


def _manual_for_amd(node: NodeResult, check: Check) -> ManualAction:
    """The printed repair on an AMD node: /dev/kfd and /dev/dri, amdgpu and ROCm's userspace."""
    if check.id == "driver_userspace_mismatch":
        amdgpu = check.evidence.get("amdgpu_version")
        hip = check.evidence.get("hip_runtime")
        amdgpu = amdgpu if isinstance(amdgpu, str) and _VERSION.match(amdgpu) else "in-tree"
        hip = hip if isinstance(hip, str) and _HIP_VERSION.match(hip) else "<the node's HIP>"
        return ManualAction(check.id, "host", check.summary, (
            f"install, on {node.host}, the amdgpu-dkms of the ROCm release the node's userspace "
            f"comes from (HIP {hip}), or give the node a ROCm userspace that supports the "
            f"host's amdgpu driver ({amdgpu})",))
    return _printed_fix(node, check)


def _printed_fix(node: NodeResult, check: Check) -> ManualAction:
    """The check's own fix, else its cause's record filled with the node's facts."""
    who = "host" if repair_of(check.id) in HOST_REPAIRS else "person"
    fix = check.fix or fill_fix(check.id, node_fix_values(node.facts))
    return ManualAction(check.id, who, check.summary, (fix,) if fix else ())


def _linker_off_path(node: NodeResult) -> ManualAction | None:
    """The package puts `ld` in /usr/bin; a workload PATH without it still finds no linker.

    Seen with a toolchain named by CC outside the distribution (CC=/opt/gcc/bin/gcc): gcc
    then looks for `ld` on PATH, and installing binutils alone changes nothing.
    """
    compiler = node.check("no_c_compiler")
    path = compiler.evidence.get("PATH") if compiler is not None else None
    if not isinstance(path, str) or {"/usr/bin", "/bin"} & set(path.split(":")):
        return None
    return ManualAction(
        "no_linker", "person",
        f"the workload's PATH ({path}) lacks /usr/bin, where the package puts ld",
        ("add /usr/bin to the workload's PATH (inventory `env:`, the service unit), or set "
         "CC to the distribution's compiler: CC=/usr/bin/gcc",))


def _packages(node: NodeResult, check: Check, family: Family) -> tuple[list[str],
                                                                       ManualAction | None]:
    """(package names, printed action) for a cause whose repair is "packages" on this family."""
    if check.id == "no_c_compiler":
        names, action = _python_headers(node, family, failed=False)
        return [*family.compiler, *names], action
    if check.id == "no_linker":
        return list(family.linker), _linker_off_path(node)
    if check.id == "libc_headers_missing":
        return list(family.libc_headers), None
    if check.id == "python_headers_missing":
        return _python_headers(node, family, failed=True)
    # A record that says "packages" of a cause this planner knows no packages for: printed
    # (tests/fix/test_repairs.py fails on it).
    return [], _printed_fix(node, check)


def _loader_steps(check: Check) -> list[Step] | ManualAction:
    """The repair "ldcache": the loader finds libcuda.so.1, Triton's `ldconfig -p` does not
    (absent, or only at a path missing here), so the real dir is listed for the loader."""
    directory = _libcuda_dir(check)
    if directory is None:
        return ManualAction(check.id, "person", check.summary, (
            "set TRITON_LIBCUDA_PATH=<dir of the real libcuda.so.1> in the workload's "
            "environment",))
    return [Step(check.id, f"list {directory} for the loader in {LDCONF_FILE}",
                 ("tee", LDCONF_FILE), input=directory + "\n"),
            Step(check.id, "rebuild the loader cache", (LDCONFIG,))]


def _symlink_steps(check: Check) -> list[Step] | ManualAction:
    dirs = check.evidence.get("dirs")
    directory = _safe_dir(dirs[0]) if isinstance(dirs, list) and dirs else None
    if directory is None:
        return ManualAction(check.id, "person", check.summary, (check.fix,))
    return [Step(check.id, f"add libcuda.so next to libcuda.so.1 in {directory}",
                 ("ln", "-s", "--", "libcuda.so.1", f"{directory}/libcuda.so"))]


def _printed(node: NodeResult, check: Check) -> ManualAction:
    """The action for a cause fleetcheck does not repair itself."""
    if repair_of(check.id) == "cache_dir":
        return _cache_action(node, check)
    if check.id == "cc_env_invalid":
        return ManualAction(check.id, "person", check.summary, (
            "unset CC in the workload's environment (inventory `env:`, the service unit), "
            "or set it to an installed compiler: CC=/usr/bin/gcc",))
    return _manual_for(node, check)


def plan_node(node: NodeResult) -> NodePlan | None:
    """The plan for a failing node; None for a node that is not failing (never touched)."""
    if node.status != "fail":
        return None
    causes = failing_causes(node)
    if not causes and node.triton.cause:
        # A verdict whose cause check is not itself marked failing (a saved report).
        found = node.check(node.triton.cause)
        causes = [found] if found else []
    family, unknown = family_for(node.facts)
    packages: dict[str, str] = {}  # name -> the cause that wants it, in order
    steps: list[Step] = []
    manual: list[ManualAction] = []
    notes: list[str] = []
    for check in causes:
        repair: list[Step] | ManualAction | None = None
        kind = repair_of(check.id)
        if kind == "packages":
            if family is None:
                notes.append(f"{check.id}: {unknown}")
                repair = ManualAction(check.id, "person", check.summary,
                                     (check.fix,) if check.fix else ())
            else:
                try:
                    names, repair = _packages(node, check, family)
                except UnsafeName as exc:
                    names = []
                    notes.append(f"{check.id}: {exc}")
                for name in names:
                    packages.setdefault(name, check.id)
        elif kind == "ldcache":
            repair = _loader_steps(check)
        elif kind == "symlink":
            repair = _symlink_steps(check)
        else:
            repair = _printed(node, check)
        if isinstance(repair, list):
            # Two causes with one repair (both loader causes): its steps once.
            steps += [step for step in repair if step.argv not in [s.argv for s in steps]]
        elif repair is not None:
            if repair.lines and any(a.lines == repair.lines for a in manual):
                # zero_active_drivers after dev_nodes_missing: the same lines, said once.
                repair = ManualAction(repair.cause, repair.who, repair.summary,
                                     ("(the lines above)",))
            manual.append(repair)
    if not causes:
        manual.append(ManualAction(node.triton.cause or "unknown", "person", node.reason,
                                   (node.triton.fix,) if node.triton.fix else ()))
    if packages and family is not None:
        try:
            install = tuple(install_argv(family, list(packages)))
        except UnsafeName as exc:
            notes.append(str(exc))
        else:
            cause = next(iter(packages.values()))
            steps[:0] = [Step(cause, "refresh the package lists", refresh)
                         for refresh in family.refresh]
            steps.insert(len(family.refresh), Step(cause, "install " + " ".join(packages),
                                                   install))
        if family.caveat:
            notes.append(family.caveat)
    return NodePlan(node=node, where=where_it_runs(node), causes=tuple(c.id for c in causes),
                    steps=tuple(steps), manual=tuple(manual), note="; ".join(notes))


def _cache_action(node: NodeResult, check: Check) -> ManualAction:
    cache = check.evidence.get("cache_dir")
    home = check.evidence.get("HOME")
    target = "$HOME/.triton/cache" if isinstance(home, str) and home else "<a dir of its own>"
    return ManualAction(check.id, "person", check.summary, (
        f"as the workload's user: mkdir -p -m 0700 {target} on a local mount without noexec, "
        f"and set TRITON_CACHE_DIR={target} in the workload's environment"
        + (f" (now {cache})" if isinstance(cache, str) else ""),
        "the cache is per user: a root-owned directory made by fleetcheck would not be the "
        "user's to write",))


def plan_report(report: Report, source: str = "") -> FixPlan:
    """Plan every failing node of an audit; list the unverified ones and the untouched."""
    plans = []
    unverified = []
    untouched = []
    for node in report.nodes:
        plan = plan_node(node)
        if plan is not None:
            plans.append(plan)
        elif node.status in UNVERIFIED_STATUSES:
            unverified.append((node.id, node.status, node.reason))
        else:
            untouched.append(node.id)
    return FixPlan(plans=tuple(plans), unverified=tuple(unverified), untouched=tuple(untouched),
                   source=source)
