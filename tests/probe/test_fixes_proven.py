"""Fixes that fix, proven (issue 41, item 5): each cause a fake node can show is shown, its fix
is read from the probe's document, applied to the node as it is written, and the node probed
again: the fix must clear its cause, and the node end on the GPU.

A fix is applied by what it names (`Interpreter`): a package it installs (`apt-get install`,
`pip install`) is what the fake node lacks put back (a compiler, a linker, headers, a Triton
or torch of the version named); a variable it sets, unsets or takes a path out of is changed in
the node's environment; a path it chmods, removes, moves, links or creates is changed on the
node, by the command itself; `run ldconfig` refreshes the node's linker cache from its dirs; a
host action (the device nodes passed in, a driver of the version named, the fabric manager,
the compute mode, a GPU reset) rebuilds the node with that part changed. A fix that names
nothing the test can map (no package, path, variable or value) fails the test: a fix that names
no object is a defect of the probe's, not of the test's.

Each scenario is one node with one or more faults (a probe is ~0.6 s of CPU: faults on
different objects share a node, so one probe shows several). Every round applies the fix of the
root cause (the verdict's) and of every other cause the scenario declares whose own check fails
in that same document, then probes again; a fix that changes what another fix of the round
changes waits for the next round (each is proven by itself), and two findings whose fixes do
the same are one fix. Each applied fix must clear its cause (the next, different cause may
follow: its fix is applied too, a few rounds at most), and the last probe must be `gpu` with
every check passing. A fix that does not clear its cause fails the scenario, which goes on with
its other causes. Every cause of the catalogue is proven by a scenario or excluded (EXCLUDED)
with the reason.
"""

from __future__ import annotations

import atexit
import os
import re
import shlex
import shutil
import subprocess
import sys
import tempfile
from collections.abc import Callable
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import pytest

from fleetcheck.probe.parts.catalogue import CAUSES, GPU_STATE_IDS, cause_label
from tests.nodeenv import (
    PTXAS_ARCHS,
    TEST_WHEELS,
    NodeEnv,
    gpu_state_env,
    kernels_run_ptxas,
    ldconfig_refresh,
    make_amd_node,
    make_node,
    private_mount_prefix,
    private_tmpfs_prefix,
    run_probe,
    triton_source_checkout,
    write_ptxas,
)
from tests.probe.workload_state import workload_base  # noqa: F401  (a fixture)

pytestmark = pytest.mark.subprocess

#: The checks that repeat another cause's failure (Triton's own steps): their finding is the
#: cause their evidence `matches`, never the step itself.
STEPS = frozenset({"triton_target", "triton_own_path", "triton_kernel"})
#: The interpreter's version, as a python3.X-dev package names it.
PY_XY = "{}.{}".format(*sys.version_info[:2])


class FixFailed(Exception):
    """Doing what a fix says failed on the node (its command, the dir it has made)."""


class Unmapped(Exception):
    """A fix names no object the test can apply (or one it cannot be: another interpreter's
    pip, a path outside the node, a version other than the node's)."""


# ---- the node, its faults and what the fixes did to it ----

@dataclass(frozen=True)
class Fault:
    """A fault made on the built node beyond make_node's keywords, and the repairs that undo
    it (the packages whose install puts back what it broke, "reboot", "ld.so.cache")."""

    name: str
    make: Callable[[World], None]
    repaired_by: frozenset[str] = frozenset()
    #: The node's dir of a file system of its own: a fix that frees it (`delete files on`,
    #: `free space on` a path in it) undoes the fault.
    mount: str | None = None
    #: What lets the node be removed again (an immutable flag taken off).
    undo: Callable[[World], None] | None = None


@dataclass(frozen=True)
class Op:
    """A change a fix made to the node (a variable, a path, the linker cache): done on the
    node, and again on each rebuild (the node is rebuilt in the same place, so its paths hold)."""

    what: str
    run: Callable[[World], None]
    #: What it changes (a variable, a path, the linker cache): two fixes that change the same
    #: thing are not applied in one round.
    key: str = ""


@dataclass
class World:
    """A scenario's node as it stands: make_node's keywords, the faults still there and the
    changes the fixes made. Host actions and package installs rebuild it (`build`)."""

    root: Path
    kwargs: dict[str, Any]
    faults: list[Fault]
    amd: bool = False
    ops: list[Op] = field(default_factory=list)
    prefix: list[str] = field(default_factory=list)
    node: NodeEnv | None = None
    fresh: int = 0
    #: The workload's user where the probe runs as another user than the test (its dirs).
    uid: int | None = None
    made: list[Fault] = field(default_factory=list)

    @property
    def env(self) -> dict[str, str]:
        assert self.node is not None
        return self.node.env

    def build(self) -> None:
        self.clean()
        if self.root.exists():
            subprocess.run(["chmod", "-R", "u+rwX", str(self.root)], capture_output=True)
            shutil.rmtree(self.root)
        maker = make_amd_node if self.amd else make_node
        self.node = maker(self.root, **self.kwargs)
        self.prefix = []
        self.uid = None
        for fault in self.faults:
            fault.make(self)
            self.made.append(fault)
        for op in self.ops:
            self.do(op)

    def clean(self) -> None:
        while self.made:
            fault = self.made.pop()
            if fault.undo:
                fault.undo(self)

    def do(self, op: Op) -> None:
        try:
            op.run(self)
        except (OSError, AssertionError, subprocess.CalledProcessError) as exc:
            raise FixFailed(f"{op.what}: {exc}") from exc

    def probe(self, *args: str) -> dict[str, Any]:
        assert self.node is not None
        _, doc, _ = run_probe(self.node, *args, prefix=self.prefix or None, timeout=180)
        return doc

    def fresh_dir(self, hint: str) -> Path:
        """A new dir of the workload's own on an exec, local, writable mount with space (what
        a fix's `<a writable dir>` asks the person to choose)."""
        self.fresh += 1
        return self.root / "chosen" / f"{hint}-{self.fresh}"

    def give(self, path: Path) -> None:
        """A dir a fix made, the workload user's (as the person doing the fix would)."""
        if self.uid is not None:
            subprocess.run(["chown", "-R", f"{self.uid}:{self.uid}", str(path)], check=True)

    def inside(self, path: str) -> Path:
        """A path a fix acts on: the node's own (a fix never reaches outside it here)."""
        resolved = Path(os.path.normpath(path))
        if self.root not in resolved.parents and resolved != self.root:
            raise Unmapped(f"acts on {path}, outside the node")
        return resolved


# ---- reading a fix: what it names, as changes to the node ----

@dataclass
class Plan:
    """What one alternative of a fix does: keyword changes (a rebuild), repairs (faults it
    undoes), and ops on the built node."""

    kwargs: dict[str, Any] = field(default_factory=dict)
    repairs: set[str] = field(default_factory=set)
    ops: list[Op] = field(default_factory=list)
    did: list[str] = field(default_factory=list)
    #: File systems it frees (the paths it names on them).
    freed: list[Path] = field(default_factory=list)

    def __bool__(self) -> bool:
        return bool(self.kwargs or self.repairs or self.ops or self.freed)

    def signature(self) -> str:
        """What doing it changes: two findings whose fixes do the same are one fix."""
        return repr((sorted(self.kwargs.items(), key=str), sorted(self.repairs),
                     sorted(map(str, self.freed)), [op.what for op in self.ops]))

    def touches(self) -> set[str]:
        return ({f"kwarg:{k}" for k in self.kwargs} | {f"repair:{r}" for r in self.repairs}
                | {f"freed:{p}" for p in self.freed} | {op.key for op in self.ops if op.key})

    def undoes(self, fault: Fault, root: Path) -> bool:
        if fault.repaired_by & self.repairs:
            return True
        mount = root / fault.mount if fault.mount else None
        return any(mount == path or mount in path.parents for path in self.freed if mount)


#: A fix's alternatives: ", or ", "; or ", and a bare " or " before another action.
ALTERNATIVES = re.compile(
    r"[,;]\s+or\s+|\(\s*or\s+|\s+or\s+(?=(?:set|unset|export|install|upgrade|point|run|rerun|remove|"
    r"give|chmod|rm|mv|pip|apt-get|ln|delete|free|raise|move|create|reboot)\b)")
#: Distribution package names (fleetcheck's fix planner checks them against the same).
PACKAGE = re.compile(r"^[a-z0-9][a-z0-9+.-]*$")
#: Words that end a command's arguments in a fix's prose.
PROSE = frozenset({"for", "with", "in", "into", "then", "and", "or", "to", "the", "a", "as"})
#: The end of a path or value inside prose.
TAIL = ",;)"


def _path(text: str) -> str:
    return text.rstrip(TAIL + ".")


def _version_tuple(text: str) -> tuple[int, ...]:
    return tuple(int(p) for p in re.findall(r"\d+", text)[:3])


def bundled_ptxas(triton: str) -> dict[str, Any]:
    """The ptxas a Triton wheel of that version bundles (its backends/nvidia/bin)."""
    version = _version_tuple(triton)
    return {"ptxas": "12.8" if version >= (3, 3) else "12.4",
            "ptxas_blackwell": "12.9" if version >= (3, 5) else None}


def oldest_ptxas_knowing(arch: str) -> str:
    """The oldest CUDA release whose ptxas knows `arch` (PTXAS_ARCHS)."""
    knowing = [release for release, names in PTXAS_ARCHS if arch in names]
    if not knowing:
        raise Unmapped(f"no CUDA release's ptxas knows {arch}")
    major, minor = min(knowing)
    return f"{major}.{minor}"


class Interpreter:
    """Maps a fix's text onto the node: each recognizer finds an object the fix names and says
    what doing the fix does to it. The first alternative with a mappable object is applied;
    an object the test cannot map makes its alternative unusable (the reason is kept)."""

    def __init__(self, world: World, cause: str, fix: str, summary: str) -> None:
        self.world, self.cause, self.fix, self.summary = world, cause, fix, summary
        self.kw = world.kwargs

    def plan(self) -> Plan:
        reasons = []
        for alternative in ALTERNATIVES.split(self.fix):
            try:
                plan = self.read(alternative)
            except Unmapped as exc:
                reasons.append(f"{alternative.strip()!r}: {exc}")
                continue
            if plan:
                return plan
            reasons.append(f"{alternative.strip()!r}: names no package, path or variable")
        raise Unmapped("; ".join(reasons))

    def read(self, text: str) -> Plan:
        plan = Plan()
        found = []
        for pattern, handler in self.recognizers():
            for match in re.finditer(pattern, text):
                found.append((match.start(), handler, match))
        for _, handler, match in sorted(found, key=lambda item: item[0]):
            handler(plan, match, text)
        return plan

    def recognizers(self) -> list[tuple[str, Callable[[Plan, re.Match[str], str], None]]]:
        return [
            (r"\bapt-get install (?:-y )?(?:--reinstall )?([^,;(]+)", self.apt),
            (r"(?:(\S+) -m )?\bpip (install|uninstall)\b([^,;]*)", self.pip),
            (r"\binstall a (CUDA|ROCm) build of torch", self.torch_build),
            (r"\btorch build that includes (sm_\d+a?) \((cu\d+)", self.torch_arch),
            (r"\bupgrade: torch >= (\d+\.\d+) with Triton >= (\d+\.\d+)(?:[^,;]*Triton >= "
             r"(\d+\.\d+))?", self.upgrade_stack),
            (r"\bupgrade flash-linear-attention to >= (\d+\.\d+(?:\.\d+)?)", self.upgrade_fla),
            (r"\bunset ([A-Z][A-Z0-9_]*)", self.unset),
            (r"\b(?:export|set) ([A-Z][A-Z0-9_]*)=(<[^>]*>|[^\s,;)]+)", self.setenv),
            (r"\bset ([A-Z][A-Z0-9_]*) to (?:a|an) ([^,;]+)", self.set_to),
            (r"\b(?:drop|remove|take) (/[^\s,;()]+) (?:from|off) (?:the runtime search path )?"
             r"\(?([A-Z_]*PATH)\b", self.path_entry),
            (r"\b(?:run|rerun) (?:/sbin/)?ldconfig\b", self.ldconfig),
            (r"\bln -s (\S+) (/\S+)", self.command),
            (r"\bchmod (?:-R )?(\S+) (/\S+)(?: and its parents)?", self.command),
            (r"\bchown (?:-R )?(\S+) (/\S+)", self.command),
            (r"\brm (?:-[a-z]+ )*(/\S+)", self.command),
            (r"\bmkdir (?:-p )?(/\S+)", self.command),
            (r"\bmv (/\S+) (/\S+)", self.command),
            (r"\bcreate (/[^\s,;()]+)", self.create),
            (r"\b(?:delete files|free space) on (/[^\s,;()]+)", self.free),
            (r"\bulimit -([a-z]) (?:unlimited|\d+)", self.ulimit),
            (r"/dev/nvidia|--gpus all|nvidia\.com/gpu", self.device_nodes),
            (r"\binstall the (?:NVIDIA )?driver userspace", self.driver_userspace),
            (r"\bnvidia-fabricmanager\b", self.fabric_manager),
            (r"\bnvidia-smi -i \S+ -c DEFAULT", self.compute_mode),
            (r"\b(?:recreate|restart) the container", self.container_restart),
            (r"\bupgrade the (?:NVIDIA )?driver to one supporting CUDA (\d+)\.(\d+|x)",
             self.driver_upgrade),
            (r"\bGPU of compute capability (\d+\.\d+)", self.gpu_swap),
            (r"\bnvidia-smi -pm 1|nvidia-persistenced", self.persistence),
            (r"\bnvidia-smi -r\b|\breboot\b", self.gpu_reset),
            (r"\bstop what holds it", self.stop_holders),
        ]

    # -- packages --

    def apt(self, plan: Plan, match: re.Match[str], text: str) -> None:
        for word in match.group(1).split():
            name = word.rstrip("):.")
            if not PACKAGE.match(name) or name in PROSE:
                break  # prose after the package list
            self._package(plan, name, match, text)
            if name != word:
                break  # the list ends with its punctuation

    def _package(self, plan: Plan, name: str, match: re.Match[str], text: str) -> None:
        """One package installed: the part of the node it puts back."""
        plan.did.append(f"apt-get install {name}")
        if name == "gcc":
            plan.kwargs["compiler"] = True
            plan.repairs.add("gcc")
        elif name == "cpp":
            plan.repairs.add("cpp")
        elif name == "libc6-dev":
            plan.kwargs["libc_headers"] = True
            plan.repairs.add("libc6-dev")
        elif name == "binutils":
            plan.kwargs["linker"] = True
            plan.repairs.add("binutils")
        elif name == "libc-bin":
            plan.kwargs["ldconfig"] = True
        elif re.fullmatch(r"python(\d+\.\d+)-dev", name):
            if name != f"python{PY_XY}-dev":
                raise Unmapped(f"{name} is not the headers of the node's Python {PY_XY}")
            plan.kwargs["python_headers"] = True
            plan.repairs.add("python-dev")
        elif re.fullmatch(r"nvidia-fabricmanager-(\d+)", name):
            self.fabric_manager(plan, match, text)
        else:
            raise Unmapped(f"package {name!r}: the test knows no part of the node it is")

    def pip(self, plan: Plan, match: re.Match[str], text: str) -> None:
        python, verb, rest = match.group(1), match.group(2), match.group(3)
        node = self.world.node
        assert node is not None
        named_for = re.search(r"\bfor (/\S+)", rest)
        if named_for:
            python, rest = python or _path(named_for.group(1)), rest[:named_for.start()]
        if python and python != node.python:
            raise Unmapped(f"{python}'s pip, not the workload's ({node.python})")
        named = re.search(r"\(([a-z0-9][\w.-]*) [\d.]+\)", rest)
        words = [w for w in rest.split() if not w.startswith("-")]
        if "--index-url" in rest.split():
            at = rest.split().index("--index-url")
            url = rest.split()[at + 1]
            words = [w for w in words if w != url]
            cuda = re.search(r"/cu(\d+)(\d)$", url.rstrip("/"))
            if not cuda:
                raise Unmapped(f"index {url}: no CUDA build named")
            self._torch(plan, cuda=f"{cuda.group(1)}.{cuda.group(2)}")
            plan.did.append(f"pip install torch from {url}")
            words = [w for w in words if w != "torch"]
        if verb == "uninstall" and named:
            words = [named.group(1)]
        for word in words:
            spec = re.fullmatch(r"'?([A-Za-z0-9][\w.-]*)(?:(==|>=)([\w.+]+))?'?", word)
            if not spec or word in PROSE:
                break  # prose after the requirements
            name, version = spec.group(1).lower(), spec.group(3)
            plan.did.append(f"pip {verb} {word}")
            if verb == "uninstall":
                self._uninstall(plan, name)
            else:
                self._install(plan, name, version)

    def _uninstall(self, plan: Plan, name: str) -> None:
        extra = self.kw.get("extra_triton_dist")
        backend = self.kw.get("extra_backend")
        if name == "triton":
            plan.kwargs["triton"] = None
        elif extra and name == extra.split()[0]:
            plan.kwargs["extra_triton_dist"] = None
        elif backend and name == f"triton-{backend}-backend":
            plan.kwargs["extra_backend"] = None
        else:
            raise Unmapped(f"uninstall {name}: not a distribution on the node")

    def _install(self, plan: Plan, name: str, version: str | None) -> None:
        if name == "triton":
            version = version or self.kw.get("triton") or "3.6.0"
            plan.kwargs.update(triton=version, triton_backends=True, **bundled_ptxas(version))
            plan.repairs.add("triton")
        elif name == "torch":
            local = (version or "").partition("+")[2]
            if local == "cpu":  # the same CPU build again
                plan.kwargs.update(torch=version, torch_cuda=None)
                plan.repairs.add("torch")
            else:
                cuda = re.fullmatch(r"cu(\d+)(\d)", local)
                self._torch(plan, cuda=f"{cuda.group(1)}.{cuda.group(2)}" if cuda else None,
                            base=(version or "").partition("+")[0] or None)
        elif name in ("flash-linear-attention", "fla-core"):
            plan.kwargs["fla"] = version or "0.6.0"
            plan.repairs.add("flash-linear-attention")
        elif name == "einops":
            def run(world: World) -> None:
                assert world.node is not None
                install_wheels(world.node.site, "einops-0.8.2")
            plan.ops.append(Op("pip install einops", run, "site:einops"))
        else:
            raise Unmapped(f"pip install {name}: not a package the test installs")

    def _torch(self, plan: Plan, cuda: str | None = None, base: str | None = None) -> None:
        current = plan.kwargs.get("torch") or self.kw.get("torch") or "2.11.0+cu130"
        old = current.split("+")[0]
        base = base if base and _version_tuple(base) >= _version_tuple(old) else old
        cuda = cuda or plan.kwargs.get("torch_cuda") or self.kw.get("torch_cuda") or "13.0"
        plan.kwargs.update(torch=f"{base}+cu{cuda.replace('.', '')}", torch_cuda=cuda)
        plan.repairs.add("torch")

    def torch_build(self, plan: Plan, match: re.Match[str], text: str) -> None:
        if match.group(1) == "ROCm":
            if not self.world.amd:
                raise Unmapped("a ROCm torch on an NVIDIA node")
            plan.kwargs["mode"] = "ok"
            plan.did.append("a ROCm build of torch, which bundles libamdhip64.so")
        # A CUDA build: the index URL beside it says which (pip()).

    def torch_arch(self, plan: Plan, match: re.Match[str], text: str) -> None:
        arch, build = match.group(1), match.group(2)
        self._torch(plan, cuda=f"{build[2:-1]}.{build[-1]}")
        arches = tuple(self.kw.get("torch_arch") or ())
        plan.kwargs["torch_arch"] = (*arches, arch.rstrip("a"))
        plan.did.append(f"a torch {build} build with {arch}")

    def upgrade_stack(self, plan: Plan, match: re.Match[str], text: str) -> None:
        torch, *tritons = match.groups()
        triton = max((t for t in tritons if t), key=_version_tuple)
        self._torch(plan, base=f"{torch}.0")
        self._install(plan, "triton", f"{triton}.0")
        plan.did.append(f"torch >= {torch}, triton {triton}.0")

    def upgrade_fla(self, plan: Plan, match: re.Match[str], text: str) -> None:
        plan.kwargs["fla"] = match.group(1)
        plan.repairs.add("flash-linear-attention")
        plan.did.append(f"flash-linear-attention {match.group(1)}")

    # -- the environment --

    def unset(self, plan: Plan, match: re.Match[str], text: str) -> None:
        name = match.group(1)

        def run(world: World) -> None:
            world.env.pop(name, None)
        plan.ops.append(Op(f"unset {name}", run, f"env:{name}"))

    def setenv(self, plan: Plan, match: re.Match[str], text: str) -> None:
        name, value = match.group(1), _path(match.group(2))
        if value.startswith("<"):
            if "dir" not in value:
                raise Unmapped(f"{name}={value}: a value the fix does not name")
            self._set(plan, name, self._dir(name))
            return
        if "$USER" in value or "${USER}" in value:
            # An example for the person to adapt (/tmp/triton_$USER): the node's own /tmp.
            value = value.replace("${USER}", "job").replace("$USER", "job")
            if value.startswith("/tmp/"):
                self._set(plan, name, self.world.root / "tmp" / value[len("/tmp/"):])
                return
        self._set(plan, name, value)

    def set_to(self, plan: Plan, match: re.Match[str], text: str) -> None:
        name, what = match.group(1), match.group(2)
        older = re.search(r"ptxas no newer than CUDA (\d+\.\d+)", what)
        knowing = re.search(r"ptxas that knows (sm_\w+)", what)
        if older or knowing:
            version = (older.group(1) if older else
                       oldest_ptxas_knowing(knowing.group(1) if knowing else ""))
            path = self.world.root / "chosen" / f"cuda-{version}" / "bin" / "ptxas"

            def run(world: World) -> None:
                write_ptxas(path, version)
                world.env[name] = str(path)
            plan.ops.append(Op(f"{name}={path} (a CUDA {version} ptxas)", run, f"env:{name}"))
        elif "dir" in what:
            self._set(plan, name, self._dir(name))
        else:
            raise Unmapped(f"set {name} to {what!r}: a value the test cannot choose")

    def _dir(self, name: str) -> Path:
        return self.world.fresh_dir(name.lower())

    def _set(self, plan: Plan, name: str, value: str | Path) -> None:
        def run(world: World) -> None:
            if isinstance(value, Path):
                value.mkdir(parents=True, exist_ok=True)
                world.give(value)
            world.env[name] = str(value)
        plan.ops.append(Op(f"{name}={value}", run, f"env:{name}"))

    def path_entry(self, plan: Plan, match: re.Match[str], text: str) -> None:
        entry, name = _path(match.group(1)), match.group(2)
        conf = "ld.so.conf" in text

        def run(world: World) -> None:
            parts = world.env.get(name, "").split(os.pathsep)
            world.env[name] = os.pathsep.join(p for p in parts if p and p.rstrip("/") != entry)
            confs = world.node.sysroot / "etc" / "ld.so.conf.d" if world.node else None
            if conf and confs and confs.is_dir():
                for path in confs.glob("*.conf"):
                    lines = path.read_text().splitlines()
                    path.write_text("".join(f"{line}\n" for line in lines if line != entry))
        plan.ops.append(Op(f"{entry} taken off {name}", run, f"env:{name}"))
        if "ldconfig" in text:
            self.ldconfig(plan, match, "")

    def ldconfig(self, plan: Plan, match: re.Match[str], text: str) -> None:
        entry = re.search(r"ld\.so\.conf\.d entry for (/[^\s,;()]+)|ldconfig over (/[^\s,;()]+)",
                          text)
        folder = _path(entry.group(1) or entry.group(2)) if entry else None

        def run(world: World) -> None:
            assert world.node is not None
            if folder:
                conf = world.node.sysroot / "etc" / "ld.so.conf.d" / "fleetcheck-fix.conf"
                conf.parent.mkdir(parents=True, exist_ok=True)
                conf.write_text(f"{folder}\n")
            ldconfig_refresh(world.node)
        plan.ops.append(Op("ldconfig" + (f" over {folder}" if folder else ""), run, "ldconfig"))
        plan.repairs.add("ld.so.cache")

    # -- paths: the fix's own command, on the node --

    def command(self, plan: Plan, match: re.Match[str], text: str) -> None:
        words = match.group(0).removesuffix(" and its parents")
        argv = [_path(word) for word in shlex.split(words)]
        for word in argv[1:]:
            if word.startswith("/"):
                self.world.inside(word)
        if words != match.group(0):  # chmod MODE PATH and its parents: up to the node's root
            path = Path(argv[-1])
            argv += [str(p) for p in path.parents if self.world.root in p.parents]

        def run(world: World) -> None:
            done = subprocess.run(argv, capture_output=True, text=True)
            assert done.returncode == 0, f"{shlex.join(argv)}: {done.stderr}"
        plan.ops.append(Op(shlex.join(argv), run, f"path:{argv[-1]}"))

    def create(self, plan: Plan, match: re.Match[str], text: str) -> None:
        path = self.world.inside(_path(match.group(1)))

        def run(world: World) -> None:
            path.mkdir(parents=True, exist_ok=True)
            world.give(path)
        plan.ops.append(Op(f"mkdir -p {path}", run, f"path:{path}"))

    def free(self, plan: Plan, match: re.Match[str], text: str) -> None:
        path = self.world.inside(_path(match.group(1)))
        plan.freed.append(path)
        plan.did.append(f"files deleted on {path}'s file system")

    def ulimit(self, plan: Plan, match: re.Match[str], text: str) -> None:
        plan.repairs.add(f"ulimit -{match.group(1)}")
        plan.did.append(match.group(0))

    # -- the host's part --

    def device_nodes(self, plan: Plan, match: re.Match[str], text: str) -> None:
        if self.kw.get("gpu") in ("no-dev-nodes", "no-uvm", "proc-only"):
            plan.kwargs.update(gpu=True, dev_modes=None)
            plan.did.append("the GPU's device nodes passed in")

    def driver_userspace(self, plan: Plan, match: re.Match[str], text: str) -> None:
        version = re.search(r"\((\d+\.\d+\.\d+)\)|NVIDIA-Linux-x86_64-(\d+\.\d+\.\d+)", text)
        if version:
            plan.kwargs.update(gpu=True, libcuda_version=version.group(1) or version.group(2))
        elif self.kw.get("gpu") == "mismatch":
            raise Unmapped("the driver userspace of no version named")
        else:
            plan.kwargs["gpu"] = True
        plan.did.append("the driver userspace " + (version.group(0) if version else ""))

    def fabric_manager(self, plan: Plan, match: re.Match[str], text: str) -> None:
        driver = self.kw.get("driver", "580.95.05")
        version = re.search(r"\((\d+\.\d+\.\d+)\)", text)
        package = re.search(r"nvidia-fabricmanager-(\d+)", text)
        if (version and version.group(1) != driver) or (
                package and package.group(1) != driver.split(".")[0]):
            raise Unmapped(f"a fabric manager of another version than the driver's {driver}")
        if not (version or package):
            raise Unmapped("a fabric manager of no version named")
        plan.kwargs["init_rc"] = 0
        plan.did.append(f"nvidia-fabricmanager {driver} started")

    def container_restart(self, plan: Plan, match: re.Match[str], text: str) -> None:
        # A new container gets a new device cgroup: the GPUs open again.
        plan.kwargs.update(nvml_rc=0, init_rc=None, smi_error=None)
        plan.repairs.add("container")
        plan.did.append(match.group(0))

    def compute_mode(self, plan: Plan, match: re.Match[str], text: str) -> None:
        plan.kwargs.update(compute_mode=0, ctx_rc=0)
        plan.did.append("compute mode Default")

    def driver_upgrade(self, plan: Plan, match: re.Match[str], text: str) -> None:
        major, minor = match.group(1), match.group(2)
        plan.kwargs["cuda_driver_version"] = int(major) * 1000 + (
            0 if minor == "x" else int(minor) * 10)
        plan.did.append(f"a driver of CUDA {major}.{minor}")

    def gpu_swap(self, plan: Plan, match: re.Match[str], text: str) -> None:
        plan.kwargs.update(compute_capability=match.group(1), gpu_name="Tesla V100-SXM2-32GB")
        plan.did.append(f"a GPU of compute capability {match.group(1)}")

    def _gpu_state(self, plan: Plan, what: str, change: Callable[[list[str]], list[str]],
                   key: str) -> None:
        def run(world: World) -> None:
            records = world.env.get("FLEETCHECK_STUB_GPU_STATE", "").split(";")
            world.env["FLEETCHECK_STUB_GPU_STATE"] = ";".join(
                ",".join(change(record.split(","))) if record else record for record in records)
        plan.ops.append(Op(what, run, f"gpu-state:{key}"))

    def persistence(self, plan: Plan, match: re.Match[str], text: str) -> None:
        self._gpu_state(plan, "persistence mode on", lambda f: [f[0], "1", *f[2:]],
                        "persistence")

    def gpu_reset(self, plan: Plan, match: re.Match[str], text: str) -> None:
        # A reset applies pending remaps and clears the volatile ECC counts; CUDA sees a GPU
        # that had fallen off the bus again. A reboot also starts a new kernel log.
        self._gpu_state(plan, "GPU reset", lambda f: [*f[:2], "0", f[3], "0", *f[5:]],
                        "reset")
        if self.kw.get("cuda_missing"):
            plan.kwargs["cuda_missing"] = 0
        if match.group(0) == "reboot":
            plan.repairs.add("reboot")

    def stop_holders(self, plan: Plan, match: re.Match[str], text: str) -> None:
        pids = set(re.findall(r"\bpid (\d+)", self.summary))
        if not pids:
            raise Unmapped("stop what holds it: no process named")

        def drop(fields: list[str]) -> list[str]:
            kept = [f for f in fields[5:] if f.split(":")[0] not in pids]
            used = sum(int(f.split(":")[1]) for f in kept if ":" in f)
            return [str(used), *fields[1:5], *kept]
        self._gpu_state(plan, "stopped pid " + ", ".join(sorted(pids)), drop, "holders")


# ---- the scenarios ----

@dataclass(frozen=True)
class Scenario:
    """A node with faults. `proves`: the causes whose fixes it proves (the coverage);
    `names`: what a cause's fix must name (formatted with the node's paths: {root}, {lib},
    {checkout}, {python}); `"*"`: the first root cause, whatever its id."""

    id: str
    proves: tuple[str, ...]
    kwargs: dict[str, Any] = field(default_factory=dict)
    faults: tuple[Fault, ...] = ()
    names: dict[str, tuple[str, ...]] = field(default_factory=dict)
    args: tuple[str, ...] = ()
    amd: bool = False
    #: Root causes that are not an answer for this node (a catch-all, a wrong diagnosis).
    wrong_causes: tuple[str, ...] = ()


def _write_exe(path: Path, text: str) -> None:
    path.parent.mkdir(parents=True, exist_ok=True)
    if path.is_symlink() or path.exists():
        path.unlink()
    path.write_text(text)
    path.chmod(0o755)


def gcc_saying(text: str, repaired_by: str) -> Fault:
    """The node's gcc replaced by one that prints gcc's own words and fails."""
    lines = "".join(f"echo {shlex.quote(line)} >&2\n" for line in text.splitlines())

    def make(world: World) -> None:
        assert world.node is not None
        _write_exe(world.node.bindir / "gcc", f"#!/bin/sh\n{lines}exit 1\n")
    return Fault(f"gcc: {text.splitlines()[0]}", make, frozenset({repaired_by}))


def shadowing_libcuda(subdir: str, init_rc: int, version: str) -> Fault:
    """A second libcuda.so.1 (CUDA's forward-compat one, or the toolkit's link-time stub) in
    `subdir` of the node, first on LD_LIBRARY_PATH: it loads instead of the driver's."""

    def make(world: World) -> None:
        from tests.nodeenv import build_libcuda

        assert world.node is not None
        where = world.root / subdir
        library = build_libcuda(where, version=version, init_rc=init_rc, driver_version=13000,
                                count=1, name="NVIDIA H200", cc="9.0", memory_mib=143771)
        (where / "libcuda.so.1").symlink_to(library.name)
        world.env["LD_LIBRARY_PATH"] = os.pathsep.join(
            [str(where), *filter(None, world.env.get("LD_LIBRARY_PATH", "").split(os.pathsep))])
    return Fault(f"libcuda in {subdir}", make)


def install_wheels(site: Path, *names: str) -> None:
    """Pure-Python wheels of .test-wheels unpacked into `site`, as pip installs them."""
    import zipfile

    for name in names:
        wheel = TEST_WHEELS / f"{name}-py3-none-any.whl"
        if not wheel.is_file():
            pytest.skip(f"{wheel.name} not fetched: run scripts/fetch_test_wheels.py")
        with zipfile.ZipFile(wheel) as archive:
            archive.extractall(site)


def fla_without_einops(world: World) -> None:
    """FLA 0.6.0's real wheels installed with --no-deps: its kernels import einops, absent."""
    assert world.node is not None
    install_wheels(world.node.site, "flash_linear_attention-0.6.0", "fla_core-0.6.0")


def limited(option: str, value: int) -> Fault:
    """The job started under `ulimit -{option} {value}` (its shell's, which the probe inherits);
    raising it (`ulimit -{option} unlimited` where the job starts) undoes it."""

    def make(world: World) -> None:
        world.prefix += ["/bin/sh", "-c", f'ulimit -{option} {value} && exec "$@"', "sh"]
    return Fault(f"ulimit -{option} {value}", make, frozenset({f"ulimit -{option}"}))


def full_fs(where: str, free_kib: int = 0, inodes: bool = False) -> Fault:
    """A small tmpfs mounted at the node's `where` for the probe only (a private mount
    namespace), full to its last block (or to its last inode, bytes left)."""

    def make(world: World) -> None:
        path = world.root / where
        prefix = (private_mount_prefix(path, FILL_INODES, "-") if inodes
                  else private_tmpfs_prefix(path, free_kib))
        if prefix is None:
            pytest.skip("cannot mount a tmpfs in a private mount namespace here (unshare -m)")
        (path / "cache").mkdir(exist_ok=True)  # there without the mount as well
        world.prefix += prefix
    return Fault(f"a full file system at {where}", make, mount=where)


#: Mounts a 4 MiB tmpfs of 64 inodes at $0 and uses every inode (tests/probe/test_objects.py).
FILL_INODES = ('keep=$PATH; PATH=/usr/sbin:/usr/bin:/sbin:/bin; '
               'mount -t tmpfs -o size=4m,nr_inodes=64 tmpfs "$0" && mkdir -p "$0/cache" && '
               'i=0; while touch "$0/f$i" 2>/dev/null; do i=$((i+1)); done; '
               'shift; PATH=$keep; export PATH; exec "$@"')


#: cuInit of a libcuda that returns CUDA_ERROR_OUT_OF_MEMORY (2) under an address-space limit,
#: as the real one does when it cannot reserve its address space (ulimit -v).
LIBCUDA_UNDER_AS = """#include <sys/resource.h>
static int fleetcheck_init_rc(void) {
    struct rlimit as;
    return getrlimit(RLIMIT_AS, &as) == 0 && as.rlim_cur != RLIM_INFINITY ? 2 : 0; }
"""
_AS_LIBCUDA: list[Path] = []


def libcuda_needing_address_space(world: World) -> None:
    """The node's libcuda, rebuilt so that cuInit fails (2) under an address-space limit."""
    from tests import nodeenv

    assert world.node is not None
    target = world.root / "lib" / "libcuda.so.580.95.05"
    if not _AS_LIBCUDA:
        build = Path(tempfile.mkdtemp(prefix="fleetcheck-as-libcuda-"))
        atexit.register(shutil.rmtree, build, ignore_errors=True)
        source = build / "libcuda_as.c"
        assert nodeenv.LIBCUDA_C.count("init_state = INIT_RC;") == 1, "cuInit's return has moved"
        source.write_text(LIBCUDA_UNDER_AS + nodeenv.LIBCUDA_C.replace(
            "init_state = INIT_RC;", "init_state = fleetcheck_init_rc();"))
        defines = {"INIT_RC": 0, "DRIVER_VERSION": 13000, "COUNT": 1,
                   "NAME": '"NVIDIA H200"', "CC_MAJOR": 9, "CC_MINOR": 0, "MEM_MIB": 143771,
                   "CTX_RC": 0}
        subprocess.run([nodeenv.GCC, str(source), "-shared", "-fPIC",
                        "-Wl,-soname,libcuda.so.1", "-o", str(build / "libcuda.so"),
                        *(f"-D{k}={v}" for k, v in defines.items())], check=True)
        _AS_LIBCUDA.append(build / "libcuda.so")
    target.unlink()
    shutil.copy2(_AS_LIBCUDA[0], target)


KMSG_XID = ("3,1000,9000000000,-;NVRM: Xid (PCI:0000:18:00): 79, pid=1234, name=python, GPU has "
            "fallen off the bus.\n")


def xid_in_kernel_log(world: World) -> None:
    """A critical Xid (79, fallen off the bus) on the node's GPU 1000 s ago."""
    assert world.node is not None
    (world.node.sysroot / "dev" / "kmsg").write_text(KMSG_XID)
    (world.node.sysroot / "proc" / "uptime").write_text("10000.00 5000.00\n")


#: The workload user when the suite runs as root (nobody), and its interpreter.
USER_ID = 65534
SYSTEM_PYTHON = "/usr/bin/python3"


def as_workload_user(world: World) -> None:
    """The probe run as the workload's user (nobody) with Debian's python3, its Triton
    building with Triton 3.9's own runtime/build.py and cache.py (tests/probe/workload_state)."""
    from dataclasses import replace

    from tests.nodeenv import real_triton_build
    from tests.probe.workload_state import HAS_HEADERS

    assert world.node is not None
    setpriv = shutil.which("setpriv")
    if os.geteuid() != 0 or not setpriv or not Path(SYSTEM_PYTHON).exists() or subprocess.run(
            [SYSTEM_PYTHON, "-c", HAS_HEADERS], capture_output=True).returncode:
        pytest.skip(f"needs root, setpriv and {SYSTEM_PYTHON} with its Python.h")
    node = real_triton_build(world.node)
    tmp = node.root / "job-tmp"
    tmp.mkdir()
    node.env["TMPDIR"] = str(tmp)
    world.node = replace(node, python=SYSTEM_PYTHON)
    subprocess.run(["chown", "-R", f"{USER_ID}:{USER_ID}", str(node.root)], check=True)
    world.uid = USER_ID
    world.prefix += [setpriv, f"--reuid={USER_ID}", f"--regid={USER_ID}", "--clear-groups", "--"]


def damaged_cache_entries(world: World) -> None:
    """The workload's warm cache (its own first start: the driver module's entry and a
    launcher's), then: the driver module's entry mode 000, the launcher's entry a file, and an
    entry a run as root left (drwx------ root)."""
    from tests.probe.workload_state import TRUTH

    assert world.node is not None
    cache = world.node.home / ".triton" / "cache"
    cache.mkdir(parents=True)
    world.give(world.node.home / ".triton")
    done = subprocess.run([*world.prefix, world.node.python, "-c", TRUTH, "--warm-only"],
                          env=world.node.env, capture_output=True, text=True, timeout=120,
                          cwd=world.node.root)
    assert done.returncode == 0, done.stdout + done.stderr
    entries = sorted(cache.iterdir())
    module = next(e for e in entries if any(e.glob("cuda_utils*")))
    launcher = next(e for e in entries if e != module)
    module.chmod(0)
    shutil.rmtree(launcher)
    launcher.write_text("")
    world.give(launcher)
    foreign = cache / "FOREIGNKEYLEFTBYASUDORUNXXXXXXXXXXXXXXXXXXXXXXXXXXXXXX"
    foreign.mkdir(mode=0o700)
    (foreign / "__triton_launcher.so").write_bytes(b"\x7fELF")


def devices_revoked(world: World) -> None:
    """The device cgroup of a running container no longer allows the GPUs: their nodes are
    there, and opening them answers EPERM (an immutable flag gives the same errno)."""
    assert world.node is not None
    nodes = [str(p) for p in (world.node.sysroot / "dev").iterdir()
             if p.name.startswith("nvidia")]
    if os.geteuid() != 0 or not shutil.which("chattr") or subprocess.run(
            ["chattr", "+i", *nodes], capture_output=True).returncode:
        pytest.skip("needs root and chattr on a file system with the immutable flag")


def devices_back(world: World) -> None:
    assert world.node is not None
    subprocess.run(["chattr", "-i", *map(str, (world.node.sysroot / "dev").iterdir())],
                   capture_output=True)


def triton_backend_gone(world: World) -> None:
    """An interrupted upgrade: Triton's NVIDIA backend, which pip's RECORD lists, is gone."""
    assert world.node is not None
    backend = world.node.site / "triton" / "backends" / "nvidia"
    files = sorted(str(p.relative_to(world.node.site)) for p in backend.rglob("*.py"))[:3]
    (info,) = world.node.site.glob("triton-*.dist-info")
    with open(info / "RECORD", "a") as handle:
        handle.writelines(f"{name},sha256=x,1\n" for name in files)
    shutil.rmtree(backend)


FLA_NEWER_API = """
def get_available_device():
    try:
        # An attribute of another Triton's GPUTarget (the release pairs with another Triton).
        return triton.runtime.driver.active.get_current_target().backend_name
    except Exception:
        _cpu_device_warning()
        return "cpu"

device = get_available_device()
device_platform = "cuda" if device == "cuda" else device
"""


def fla_detection_broken(world: World) -> None:
    """An FLA release whose device detection fails on this Triton's API and falls back."""
    assert world.node is not None
    utils = world.node.site / "fla" / "utils.py"
    utils.write_text(utils.read_text() + FLA_NEWER_API)


def checkout(world: World) -> None:
    assert world.node is not None
    triton_source_checkout(world.node)


def ptxas_override(version: str) -> Fault:
    """TRITON_PTXAS_PATH at an older CUDA's ptxas; the node's kernels go through ptxas."""

    def make(world: World) -> None:
        assert world.node is not None
        kernels_run_ptxas(world.node)
        path = write_ptxas(world.root / f"usr/local/cuda-{version}/bin/ptxas", version)
        world.env.setdefault("TRITON_PTXAS_PATH", str(path))
    return Fault(f"TRITON_PTXAS_PATH at CUDA {version}'s ptxas", make)


def torch_files_gone(world: World) -> None:
    """pip's RECORD of torch lists files that are gone (an interrupted install)."""
    assert world.node is not None
    (info,) = world.node.site.glob("torch-*.dist-info")
    with open(info / "RECORD", "a") as handle:
        handle.write("torch/lib/libtorch_cuda.so,sha256=x,1\ntorch/_C.so,sha256=x,1\n")


def ldconfig_without_cache(world: World) -> None:
    """/sbin/ldconfig whose /etc/ld.so.cache is gone (root's ldconfig -p, in its own words)."""
    assert world.node is not None
    _write_exe(world.node.sysroot / "sbin" / "ldconfig",
               "#!/bin/sh\nprintf \"/sbin/ldconfig: Can't open cache file /etc/ld.so.cache\\n: "
               "No such file or directory\\n\" >&2\nexit 1\n")


def dangling_triton_home(world: World) -> None:
    """~/.triton a link to a scratch file system that is not mounted here."""
    assert world.node is not None
    (world.node.home / ".triton").symlink_to(world.root / "scratch-not-mounted" / ".triton")


def no_entry_points(world: World) -> None:
    """Triton installed without its entry_points.txt (copied, not pip-installed)."""
    assert world.node is not None
    (world.node.site / "triton-3.6.0.dist-info" / "entry_points.txt").unlink()


def too_long_cache_dir(world: World) -> None:
    world.env["TRITON_CACHE_DIR"] = str(world.root / ("x" * 300) / "cache")


def ptxas_override_128(world: World) -> None:
    world.env["TRITON_PTXAS_PATH"] = str(write_ptxas(world.root / "cuda-12.8/bin/ptxas", "12.8"))


def triton_home_loop(world: World) -> None:
    """TRITON_HOME's .triton a loop of symbolic links."""
    home = world.root / "th"
    home.mkdir()
    (home / ".triton").symlink_to(home / ".loop")
    (home / ".loop").symlink_to(home / ".triton")
    world.env["TRITON_HOME"] = str(home)


def dirs_on_full_fs(world: World) -> None:
    world.env.update(TRITON_CACHE_DIR=str(world.root / "full-cache" / "cache"),
                     TMPDIR=str(world.root / "full-tmp"))


def triton_home_a_file(world: World) -> None:
    (world.root / "home" / ".triton").write_text("not a dir\n")


def tmp_on_no_inodes(world: World) -> None:
    (world.root / "no-inodes" / "cache").mkdir(parents=True, exist_ok=True)
    world.env["TMPDIR"] = str(world.root / "no-inodes" / "cache")


#: What `ldconfig -p` lists for libcuda on a node whose cache is stale (Apptainer's path).
STALE_LIBCUDA = "/usr/local/cuda/compat/lib/libcuda.so.1"


def cc_wrapper(body: str) -> Fault:
    """CC a site's wrapper script around the node's compiler."""

    def make(world: World) -> None:
        path = world.root / "cc-wrapper"
        _write_exe(path, "#!/bin/sh\n" + body.format(root=world.root) + "\n")
        world.env["CC"] = str(path)
    return Fault("CC=" + body, make)


def root_only_include(world: World) -> None:
    """An include dir the site's CC adds, below a dir only root may enter (a root-owned home)."""
    include = world.root / "root-home" / "include"
    include.mkdir(parents=True)
    (include / "site.h").write_text("/* the site's */\n")
    (world.root / "root-home").chmod(0o700)


SCENARIOS: tuple[Scenario, ...] = (
    # Issue 41 (a): a Triton source checkout, without its build, on PYTHONPATH shadows the
    # installed wheel; reinstalling the wheel leaves the checkout first on the path.
    Scenario("triton_checkout_shadows_the_wheel", (),
             faults=(Fault("a Triton checkout on PYTHONPATH", checkout),),
             names={"*": ("{checkout}", "PYTHONPATH")}),
    # Issue 41 (b): TRITON_PTXAS_PATH at CUDA 11.7's ptxas, which does not know the H200's
    # sm_90a: every kernel fails in ptxas. The fix is the override (unset it, or a ptxas that
    # knows sm_90a), never an upgrade of Triton or torch.
    Scenario("ptxas_override_does_not_know_the_gpu", (), faults=(ptxas_override("11.7"),),
             args=("--deep",), names={"*": (
                 "TRITON_PTXAS_PATH", "{root}/usr/local/cuda-11.7/bin/ptxas | sm_90a | sm_90")},
             wrong_causes=("triton_kernel", "triton_target", "triton_own_path")),
    # A cache dir whose name is longer than the file system allows (ENAMETOOLONG): whatever
    # it is named, its fix must be one that can be done.
    Scenario("cache_dir_name_too_long", ("path_name_too_long",),
             faults=(Fault("TRITON_CACHE_DIR below a too-long name", too_long_cache_dir),)),
    # The host's part: each fix rebuilds the node with what it names.
    Scenario("device_nodes_then_driver_then_fla_allocator",
             ("dev_nodes_missing", "driver_too_old", "blackwell_no_allocator"),
             {"gpu": "no-dev-nodes", "container": "lxc", "cuda_driver_version": 12020,
              "compute_capability": "10.0", "gpu_name": "NVIDIA B200", "fla": "0.4.2"}),
    # An HGX A100 on an R520 driver (CUDA 11.8) with a cu118 torch and Triton 3.1, whose
    # bundled ptxas is CUDA 12.4's.
    Scenario("driver_userspace_then_fabric_manager_then_ptxas_newer_than_driver",
             ("zero_active_drivers", "fabric_manager_not_ready",
              "driver_too_old_for_bundled_ptxas"),
             {"gpu": "no-libcuda", "init_rc": 802, "gpus": 8, "nvswitches": 4,
              "cuda_driver_version": 11080, "torch": "2.5.1+cu118", "torch_cuda": "11.8",
              "triton": "3.1.0", "ptxas": "12.4", "ptxas_blackwell": None,
              "compute_capability": "8.0", "gpu_name": "NVIDIA A100-SXM4-80GB",
              "driver": "520.61.05"},
             names={"fabric_manager_not_ready": ("520.61.05",)}),
    Scenario("devices_revoked_then_mismatch_then_exclusive_gpu_and_triton_files",
             ("cgroup_devices_revoked", "driver_userspace_mismatch", "gpu_exclusive_busy",
              "triton_install_broken"),
             {"gpu": "mismatch", "compute_mode": 3, "ctx_rc": 46, "gpus": 2,
              "container": "docker", "nvml_rc": 999, "init_rc": 999,
              "smi_error": "Failed to initialize NVML: Unknown Error", "ptxas": None},
             faults=(Fault("device access revoked", devices_revoked, frozenset({"container"}),
                           undo=devices_back),
                     Fault("Triton's NVIDIA backend gone", triton_backend_gone,
                           frozenset({"triton"}))),
             names={"driver_userspace_mismatch": ("580.95.05",),
                    "triton_install_broken": ("triton==3.6.0",)}),
    Scenario("torch_files_cpu_torch_old_gpu_and_triton_without_metadata_or_ptxas",
             ("torch_install_broken", "torch_cuda", "gpu_arch_unsupported", "triton_no_backends",
              "ptxas_missing"),
             {"torch": "2.11.0+cpu", "torch_cuda": None, "compute_capability": "6.1",
              "gpu_name": "NVIDIA GeForce GTX 1080", "torch_arch": ("sm_60", "sm_61", "sm_70"),
              "ptxas": None},
             faults=(Fault("torch's files gone", torch_files_gone, frozenset({"torch"})),
                     Fault("no entry points", no_entry_points, frozenset({"triton"}))),
             names={"torch_install_broken": ("torch==2.11.0+cpu",),
                    "ptxas_missing": ("triton==3.6.0",)}),
    Scenario("torch_arch_then_ptxas_override_then_old_triton",
             ("torch_lacks_arch", "ptxas_override_unparsed", "triton_too_old_for_gpu"),
             {"compute_capability": "12.0", "gpu_name": "NVIDIA RTX PRO 6000",
              "torch": "2.5.1+cu124", "torch_cuda": "12.4",
              "torch_arch": ("sm_50", "sm_80", "sm_86", "sm_90"), "triton": "3.2.0",
              "ptxas": "12.4", "ptxas_blackwell": None},
             faults=(Fault("TRITON_PTXAS_PATH at CUDA 12.8's ptxas", ptxas_override_128),),
             names={"torch_lacks_arch": ("sm_120",),
                    "ptxas_override_unparsed": ("TRITON_PTXAS_PATH",)}),
    Scenario("libcuda_shadowed_by_compat_then_stubs_under_limits",
             ("cuda_compat_on_unsupported_gpu", "libcuda_stub_shadowing",
              "address_space_limit", "file_size_limit"),
             faults=(shadowing_libcuda("usr/local/cuda/lib64/stubs", 34, "580.95.05"),
                     shadowing_libcuda("usr/local/cuda/compat", 804, "575.57.08"),
                     Fault("libcuda needing address space", libcuda_needing_address_space),
                     limited("v", 16 << 20), limited("f", 4)),
             names={"cuda_compat_on_unsupported_gpu": ("{root}/usr/local/cuda/compat",
                                                       "LD_LIBRARY_PATH"),
                    "libcuda_stub_shadowing": ("{root}/usr/local/cuda/lib64/stubs",
                                               "LD_LIBRARY_PATH"),
                    "address_space_limit": ("ulimit -v", "16 GiB"),
                    "file_size_limit": ("ulimit -f", "2 KiB")}),
    # Triton's packaging: each pip command on the node's site-packages, as the fix says.
    Scenario("triton_distributions_backends_network_cache_and_a_gpu_off_the_bus",
             ("triton_installed", "triton_default_backend", "triton_backends_conflict",
              "cache_on_network_fs", "gpu_missing_for_cuda"),
             {"extra_triton_dist": "pytorch-triton 3.5.0", "extra_backend": "cpu",
              "env": {"TRITON_DEFAULT_BACKEND": "cuda"}, "cache_fstype": "nfs4", "gpus": 3,
              "cuda_missing": 1},
             names={"triton_installed": ("pytorch-triton", "triton==3.6.0"),
                    "triton_backends_conflict": ("triton-cpu-backend",)}),
    # The toolchain, the linker cache and the workload's environment, side by side.
    Scenario("toolchain_linker_headers_and_static_checks",
             ("no_linker", "libc_headers_missing", "python_headers_missing",
              "ldconfig_binary_missing", "cache_dir_noexec", "workload_env", "inductor_ready"),
             {"linker": False, "libc_headers": False, "python_headers": False, "ldconfig": False,
              "cache": "noexec", "env": {"TRITON_INTERPRET": "1",
                                         "TORCHINDUCTOR_CACHE_DIR": "/proc/fleetcheck-no"}},
             names={"python_headers_missing": (f"python{PY_XY}-dev",),
                    "ldconfig_binary_missing": ("TRITON_LIBCUDA_PATH={lib}",),
                    "workload_env": ("TRITON_INTERPRET",),
                    "inductor_ready": ("TORCHINDUCTOR_CACHE_DIR",)}),
    Scenario("invalid_cc_stale_ldcache_no_libcuda_link_dangling_cache_fla_fallback",
             ("cc_env_invalid", "ldcache_stale_libcuda_entry", "libcuda_unversioned_missing",
              "path_dangling_link", "fla_fallback_hidden"),
             {"cc_env": "/nonexistent/gcc", "ldcache_libcuda": STALE_LIBCUDA, "triton": "3.5.0",
              "libcuda_unversioned": False, "fla": "0.5.2"},
             faults=(Fault("~/.triton a dangling link", dangling_triton_home),
                     Fault("FLA's detection broken", fla_detection_broken,
                           frozenset({"flash-linear-attention"}))),
             names={"cc_env_invalid": ("CC",),
                    "ldcache_stale_libcuda_entry": ("{lib}",),
                    "libcuda_unversioned_missing": ("{lib}/libcuda.so",),
                    "path_dangling_link": ("{root}/home/.triton",)}),
    Scenario("ldcache_gone_then_gcc_without_cc1_and_a_loop",
             ("ld_so_cache_missing", "compiler_incomplete", "path_link_loop"),
             faults=(Fault("ldconfig without its cache", ldconfig_without_cache,
                           frozenset({"ld.so.cache"})),
                     gcc_saying("gcc: fatal error: cannot execute 'cc1': execvp: No such file "
                                "or directory\ncompilation terminated.", "cpp"),
                     Fault("TRITON_HOME's .triton a loop of links", triton_home_loop)),
             names={"compiler_incomplete": ("cpp",),
                    "path_link_loop": ("{root}/th/.triton",)}),
    Scenario("ldcache_without_libcuda_then_crt_then_flags",
             ("libcuda_not_in_ldcache", "libc_crt_missing", "cc_rejects_flags"),
             {"ldcache_has_libcuda": False},
             faults=(gcc_saying("/usr/bin/ld: cannot find crti.o: No such file or directory\n"
                                "collect2: error: ld returned 1 exit status", "libc6-dev"),
                     cc_wrapper('exec gcc -march=fleetcheck "$@"')),
             names={"libcuda_not_in_ldcache": ("{lib}",), "libc_crt_missing": ("libc6-dev",)}),
    # Caches and temp dirs: full file systems (a private mount namespace), a file in the way.
    Scenario("no_compiler_then_full_cache_and_tmp_few_files",
             ("no_c_compiler", "cache_dir_full", "tmp_dir_unusable", "open_files_limit"),
             {"compiler": False},
             faults=(full_fs("full-cache"), full_fs("full-tmp"),
                     Fault("the workload's dirs on them", dirs_on_full_fs), limited("n", 12))),
    Scenario("triton_home_a_file_and_no_inode", ("cache_dir_unwritable", "path_not_a_dir",
                                                 "fs_out_of_inodes"),
             faults=(Fault("~/.triton a file", triton_home_a_file),
                     full_fs("no-inodes", inodes=True),
                     Fault("TMPDIR on it", tmp_on_no_inodes))),
    # A warm cache that hides a missing compiler, FLA without einops, and the GPUs' state.
    Scenario("warm_cache_fla_and_the_gpus_state",
             ("stale_cache_masks_compiler", "fla_import_fails", "gpu_memory_in_use",
              "gpu_foreign_processes", "gpu_memory_health", "gpu_persistence_mode",
              "gpu_xid_events"),
             {"compiler": False, "warm_cache": True, "gpus": 2,
              "env": gpu_state_env("133120,0,0,0,0,4000000:30720", "0,1,1,0,2")},
             faults=(Fault("FLA without einops", fla_without_einops),
                     Fault("a critical Xid", xid_in_kernel_log, frozenset({"reboot"}))),
             names={"gpu_memory_in_use": ("4000000",), "fla_import_fails": ("einops",)}),
    # The workload run as its own user: its real cache's entries, an include dir it may not
    # read.
    Scenario("cache_entries_and_a_root_only_include_dir",
             ("cache_entry_foreign_owner", "cache_entry_unreadable", "cache_entry_corrupt",
              "include_dir_unreadable"),
             faults=(Fault("the workload's own user", as_workload_user),
                     Fault("damaged entries", damaged_cache_entries),
                     Fault("a root-only include dir", root_only_include),
                     cc_wrapper('exec gcc -I{root}/root-home/include "$@"')),
             names={"include_dir_unreadable": ("{root}/root-home",)}),
    # AMD: Triton's HIP runtime lookup.
    Scenario("amd_libhip_path_then_no_libhip", ("libhip_path_invalid", "libamdhip64_not_found"),
             {"mode": "no-libhip", "env": {"TRITON_LIBHIP_PATH": "/opt/rocm-6.4/lib/x.so"}},
             amd=True, names={"libhip_path_invalid": ("TRITON_LIBHIP_PATH",)}),
    Scenario("amd_other_rocm", ("libamdhip64_other_rocm",), {"mode": "system-rocm"}, amd=True,
             names={"libamdhip64_other_rocm": ("TRITON_LIBHIP_PATH",)}),
)


# ---- causes a fake node cannot show, each with why ----

#: What each cause needs that a fake node does not have, or why it is never a cause of its own.
EXCLUDED: dict[str, str] = {
    "gpu_present": "a node without a GPU is the verdict `no-gpu`, a warning with no fix: the "
                   "GPU itself is what is missing, nothing on the node to change",
    "triton_2x": "no longer a failure: Triton 2.x builds and runs kernels itself, so the check "
                 "passes (checks/triton.py); FLA's and vLLM's own checks name their fallback",
    "triton_backends": "its own failure (`import triton.backends` fails) needs a Triton whose "
                       "own start imports triton.backends; the stub's driver is imported "
                       "directly, so a broken backends package leaves the workload running. "
                       "The causes the check names are proven: triton_no_backends, "
                       "triton_backends_conflict, triton_default_backend",
    "compiler_killed": "cc1 killed by the kernel (the OOM killer under the job's memory.max) "
                       "needs a memory cgroup of the test's own; a wrapper that SIGKILLs cc1 "
                       "shows the text with no limit a fix could raise, and under `ulimit -v` "
                       "cc1 fails to load before it runs out (that is address_space_limit)",
    "triton_target": "the step itself, named only where no message, errno or object names a "
                     "cause ('no known cause matches'): no state of the node for a fix to change "
                     "(what wrongly fell into it, issue 41 (b), is a scenario here)",
    "triton_own_path": "the workload's own step, named only where no message, errno or object "
                       "names a cause: no state of the node for a fix to change",
    "triton_kernel": "the --deep kernel, named only where no message names a cause: no state "
                     "of the node for a fix to change (issue 41 (b), a kernel failing in an "
                     "old TRITON_PTXAS_PATH, is the scenario ptxas_override_does_not_know_the_gpu)",
    "glibc_too_old": "needs a Triton module linked against a newer glibc than the machine's; "
                     "the only compiler here links against the machine's own",
    "shared_library_missing": "needs a module Triton loads that links a library besides "
                              "libcuda; the stub's modules link only libcuda.so.1, whose "
                              "absence is zero_active_drivers (proven)",
    "memory_cgroup_limit": "needs a cgroup v2 memory.max of the probe's own (a delegated memory "
                           "controller), which a test on this machine cannot make",
    "process_limit": "RLIMIT_NPROC does not bind root, and a low one for the workload's user "
                     "counts every process of that uid on the machine (the suite's other "
                     "workers); pids.max needs a cgroup of the test's own",
    "file_table_limit": "ENFILE is the whole system's open-file table (fs.file-max): no test "
                        "may fill it",
    "process_limits": "ENFILE, or an ENOMEM no limit of the job explains: the machine's state, "
                      "which a fake node cannot set up",
    "path_missing": "Triton creates every missing dir of its cache (os.makedirs), and tempfile "
                    "and gcc fall back from a missing TMPDIR: a missing path is the root of no "
                    "node a test can build (a missing /sbin/ldconfig is ldconfig_binary_missing;"
                    " a name too long for the file system is path_name_too_long)",
    "path_foreign_owner": "a dir of the cache's or TMPDIR's path that another user owns is the "
                          "dir's own cause (cache_dir_unwritable, tmp_dir_unusable: their "
                          "fixes are proven), and an entry below the cache is "
                          "cache_entry_foreign_owner (proven, as the workload's user)",
    "path_permission_denied": "a dir of the cache's or TMPDIR's path that its own user may not "
                              "use is the dir's own cause (cache_dir_unwritable, "
                              "tmp_dir_unusable), and an entry below the cache is "
                              "cache_entry_unreadable (proven, as the workload's user)",
    "path_read_only": "a read-only file system is the dir's own cause first (docs/checks.md): "
                      "cache_dir_unwritable for the cache, tmp_dir_unusable for TMPDIR; Triton "
                      "writes nowhere else",
    "path_noexec": "Triton loads its modules only from its cache, whose noexec mount is "
                   "cache_dir_noexec (proven): no other mount a library of its is loaded from",
    "disk_full": "ENOSPC outside the workload's cache and temp dirs: Triton's build writes "
                 "nowhere else (those are cache_dir_full and tmp_dir_unusable, proven)",
    "quota_exceeded": "EDQUOT needs disk quotas on a file system (a quota-enabled mount, "
                      "quotaon): not a test's to set up",
    "loader_map_failed": "`failed to map segment` with no noexec mount and no address-space "
                         "limit behind it (those are cache_dir_noexec and address_space_limit, "
                         "proven): the loader maps every well-formed library a test can build",
    "os_error": "an errno no record names: which errnos those are changes as records are "
                "added, so no fixed fake node shows one for long",
}


# ---- the proof ----

def findings(doc: dict[str, Any], wanted: set[str]) -> list[tuple[str, str, str]]:
    """(cause, fix, summary) of the root cause, then of every wanted cause whose own check
    fails or warns in this document; else of the first failing or warning check."""
    found: dict[str, tuple[str, str]] = {}
    triton, checks = doc["triton"], doc["checks"]
    if triton["cause"]:
        cause = triton["cause"]
        fix = triton["fix"]
        for vendor in (None, "amd"):
            label = cause_label(cause, vendor) + ": "
            if fix.startswith(label):
                fix = fix[len(label):]
                break
        own = next((c for c in checks if (c["evidence"] or {}).get("matches") == cause
                    or c["id"] == cause), None)
        found[cause] = (fix, own["summary"] if own else doc["reason"])
    for check in checks:
        if check["status"] not in ("fail", "warn"):
            continue
        cause = (check["evidence"] or {}).get("matches") or check["id"]
        if cause in wanted and cause not in found and not (
                check["id"] in STEPS and cause == check["id"]):
            found[cause] = (check["fix"], check["summary"])
    if not found:
        for check in checks:
            if check["status"] in ("fail", "warn"):
                cause = (check["evidence"] or {}).get("matches") or check["id"]
                found[cause] = (check["fix"], check["summary"])
                break
    return [(cause, fix, summary) for cause, (fix, summary) in found.items()]


#: The records' order: the causal order of the checks, then the causes named from a message.
ORDER = {cause.id: index for index, cause in enumerate(CAUSES)}


def still_there(doc: dict[str, Any], cause: str) -> str | None:
    """How the document still shows `cause` (None: it is gone). Its check failing again under
    a root cause that comes before it (the next cause, which it follows from) is not it."""
    root = doc["triton"]["cause"]
    if root == cause:
        return f"still the verdict's cause: {doc['triton']['fix']}"
    if root and ORDER.get(root, len(ORDER)) < ORDER.get(cause, len(ORDER)):
        return None
    for check in doc["checks"]:
        if check["status"] in ("fail", "warn") and (
                (check["evidence"] or {}).get("matches") or check["id"]) == cause:
            return f"{check['id']} still {check['status']}s: {check['summary']}"
    return None


def expand(text: str, world: World) -> str:
    assert world.node is not None
    return text.format(root=world.root, lib=world.root / "lib", python=world.node.python,
                       checkout=world.root / "src" / "triton" / "python")


def healthy(doc: dict[str, Any]) -> bool:
    return doc["triton"]["verdict"] == "gpu" and doc["status"] == "ok"


def prove(scenario: Scenario, root: Path) -> tuple[list[str], list[str]]:
    """Run the scenario: what went wrong, one line each (empty: every fix fixed), and what
    each round found and did."""
    world = World(root=root, kwargs=dict(scenario.kwargs), faults=list(scenario.faults),
                  amd=scenario.amd)
    try:
        world.build()
        return proven(scenario, world)
    finally:
        world.clean()


def proven(scenario: Scenario, world: World) -> tuple[list[str], list[str]]:
    problems: list[str] = []
    trace: list[str] = []
    shown: set[str] = set()
    failed: set[str] = set()
    wanted = set(scenario.proves)
    rounds = len(scenario.proves) + 3
    doc = world.probe(*scenario.args)
    for number in range(rounds):
        if healthy(doc):
            break
        applied: list[tuple[str, str]] = []
        new_ops: list[Op] = []
        touched: set[str] = set()
        done: dict[str, str] = {}
        rebuild = False
        found = [f for f in findings(doc, wanted - shown - failed) if f[0] not in failed]
        for index, (cause, fix, summary) in enumerate(found):
            try:
                plan = Interpreter(world, cause, fix, summary).plan()
            except Unmapped as exc:
                problems.append(f"{cause}: the fix names nothing the test can apply ({exc}): "
                                f"{fix!r}")
                continue
            if plan.signature() in done:
                # The same fix as another finding's of this round: proven with it.
                applied.append((cause, fix))
                shown.add(cause)
                trace.append(f"round {number + 1}: {cause}: {fix!r} -> the same as "
                             f"{done[plan.signature()]}'s")
                continue
            if plan.touches() & touched:
                # Another fix of this round changes the same thing: this one waits for the
                # next round, so that each is proven by itself.
                continue
            touched |= plan.touches()
            done[plan.signature()] = cause
            first = number == 0 and index == 0
            if first and cause in scenario.wrong_causes:
                problems.append(f"{cause} is not this node's cause ({summary}): fix {fix!r}")
            # A GPU's state is never a verdict's cause: its check's line (summary, then fix)
            # is what names the object; a verdict's fix must name it itself.
            said = summary + " " + fix if cause in GPU_STATE_IDS else fix
            for name in scenario.names.get(cause, ()) + (
                    scenario.names.get("*", ()) if first else ()):
                either = [expand(n.strip(), world) for n in name.split(" | ")]
                if not any(n in said for n in either):
                    problems.append(f"{cause}: the fix does not name {' or '.join(either)}: "
                                    f"{fix!r}")
            rebuild = rebuild or bool(plan.kwargs) or any(
                plan.undoes(f, world.root) for f in world.faults)
            world.kwargs.update(plan.kwargs)
            world.faults = [f for f in world.faults if not plan.undoes(f, world.root)]
            world.ops += plan.ops
            new_ops += plan.ops
            applied.append((cause, fix))
            shown.add(cause)
            trace.append(f"round {number + 1}: {cause}: {fix!r} -> "
                         + "; ".join(plan.did + [op.what for op in plan.ops]))
        if not applied:
            if not failed:
                problems.append(f"not gpu, and no fix to apply: {doc['reason']}")
            break
        try:
            if rebuild:
                world.build()
            else:
                for op in new_ops:
                    world.do(op)
        except FixFailed as exc:
            problems.append("doing the fix of " + " and ".join(c for c, _ in applied)
                            + f" fails: {exc}")
            break
        doc = world.probe(*scenario.args)
        for cause, fix in applied:
            left = still_there(doc, cause)
            if left:
                # Recorded; the scenario goes on with its other causes.
                problems.append(f"{cause}: the fix {fix!r} did not fix: {left}")
                failed.add(cause)
    if not problems and not healthy(doc):
        problems.append(f"not gpu after {rounds} rounds: {doc['status']}: {doc['reason']}")
    if not problems and wanted - shown:
        problems.append(f"never shown: {sorted(wanted - shown)}")
    return problems, trace


@pytest.mark.parametrize("scenario", SCENARIOS, ids=[s.id for s in SCENARIOS])
def test_the_fix_fixes(workload_base: Path, scenario: Scenario) -> None:  # noqa: F811
    problems, trace = prove(scenario, workload_base / "node")
    assert not problems, "\n".join([*problems, "rounds:", *trace])


def test_every_cause_is_proven_or_excluded() -> None:
    proven = {cause for scenario in SCENARIOS for cause in scenario.proves}
    causes = {cause.id for cause in CAUSES}
    assert not proven & set(EXCLUDED), sorted(proven & set(EXCLUDED))
    assert not (proven | set(EXCLUDED)) - causes, sorted((proven | set(EXCLUDED)) - causes)
    assert not causes - proven - set(EXCLUDED), (
        "causes without a proven fix (a scenario here) or a reason it cannot be shown "
        f"(EXCLUDED): {sorted(causes - proven - set(EXCLUDED))}")
    assert all(len(reason) > 40 for reason in EXCLUDED.values())

