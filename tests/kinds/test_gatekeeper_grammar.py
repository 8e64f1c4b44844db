"""The host gatekeeper's grammar of the node kinds, composed from each kind's module
(`kinds.gatekeeper_chains`) and written into the script by `fleetcheck host-setup`: the same
language the script accepted when it wrote the shipped kinds' commands out itself, and the
chains of the kinds above it for a kind added inside another."""

from __future__ import annotations

import ast
import re
from collections.abc import Iterator, Mapping
from typing import Any, ClassVar

import pytest

from fleetcheck import kinds
from fleetcheck.host_setup import script_module, script_source, script_with
from fleetcheck.kinds.base import GatekeeperWrapper
from fleetcheck.kinds.oci import OciKind
from fleetcheck.probe import probe_argv
from fleetcheck.transport.gatekeeper_refusal import shipped_script
from fleetcheck.transport.packing import ZLIB_BOOTSTRAP
from fleetcheck.transport.pct import pct_exec_argv
from fleetcheck.transport.qemu import qm_exec_argv
from fleetcheck.transport.ssh import remote_command
from tests.gatekeeper.audit_requests import ACCEPTED

# ---------------------------------------------------------------------------------------------
# The grammar of fleetcheck/data/gatekeeper.py before the kinds declared theirs (fleetcheck
# b1846f5), as data: the script's WORDS, FRAGMENTS and INNER_SHAPES then, copied as they were.

BEFORE_WORDS = {
    # pve-vmid: 100 .. 999999999.
    "VMID": r"[1-9][0-9]{2,8}",
    "INT": r"[0-9]{1,6}",
    # remote_command's "%g" of a float: 30, 12.5, 1e+06.
    "SECONDS": r"[0-9]{1,9}(\.[0-9]{1,6})?(e\+?[0-9]{1,2})?",
    "RUNTAG": r"FLEETCHECK_RUN=[0-9a-f]{1,64}",
    "KILLTAG": r"FLEETCHECK_RU\[N\]=[0-9a-f]{1,64}",
    # NAME=VALUE without control characters; the name is checked against DENIED_ENV too.
    "ASSIGN": r"[A-Za-z_][A-Za-z0-9_]{0,127}=[^\x00-\x1f\x7f]{0,4096}",
    # A CPython interpreter, by name or absolute path: python, python3, python3.12, with no
    # `..`, no `=` (env would take it for an assignment) and no option-like start.
    "PYTHON": r"(/[A-Za-z0-9_+][A-Za-z0-9_.+-]*)*/?python(3(\.[0-9]{1,2})?)?",
    # A PVE node name (pve-node): a hostname label.
    "NODEPATH": r"/nodes/[A-Za-z0-9]([A-Za-z0-9-]{0,61}[A-Za-z0-9])?/(lxc|qemu)",
    # docker/podman container name or id ([a-zA-Z0-9][a-zA-Z0-9_.-]+ in moby's names.go).
    "OCINAME": r"[a-zA-Z0-9][a-zA-Z0-9_.-]{0,254}",
    # --user: name or uid, optional :group or :gid.
    "OCIUSER": r"[A-Za-z0-9_][A-Za-z0-9_.-]{0,31}(:[A-Za-z0-9_][A-Za-z0-9_.-]{0,31})?",
}

#: The probe on stdin: its source after `-`, or (issue #43) zlib-compressed behind the one
#: bootstrap `-c` may run (fleetcheck/transport/packing.py).
STDIN_PROBE = ("one", [["-", ("stdin", "probe")], ["-c", ZLIB_BOOTSTRAP, ("stdin", "probe-zlib")]])

BEFORE_FRAGMENTS = {
    # What the probe is run as: `[env NAME=VALUE...] PYTHON - [--deadline N] [--deep]
    # [--python PATH]` (fleetcheck.probe.probe_argv; the env comes from the inventory).
    "probe": [
        ("opt", ["env", ("WORD", "ASSIGN"), ("rep", [("WORD", "ASSIGN")])]),
        ("WORD", "PYTHON"), STDIN_PROBE,
        ("opt", ["--deadline", ("WORD", "SECONDS")]),
        ("opt", ["--deep"]),
        ("opt", ["--python", ("WORD", "PYTHON")]),
    ],
    "sudo": [("opt", ["sudo", "-n"])],
    "in_ct": ["pct", "exec", ("WORD", "VMID"), "--keep-env", "0", "--"],
    "oci": [("one", [["docker"], ["podman"]])],
    # docker|podman exec -i [--user U] [--env NAME=VALUE]... NAME PYTHON - ARGS
    "oci_probe": [
        ("ref", "oci"), "exec", "-i",
        ("opt", ["--user", ("WORD", "OCIUSER")]),
        ("rep", ["--env", ("WORD", "ASSIGN")]),
        ("WORD", "OCINAME"),
        ("WORD", "PYTHON"), STDIN_PROBE,
        ("opt", ["--deadline", ("WORD", "SECONDS")]),
        ("opt", ["--deep"]),
        ("opt", ["--python", ("WORD", "PYTHON")]),
    ],
    # docker ps -a --format '{{json .}}' (one object a line) | podman ps -a --format json (an
    # array: podman 4.3 prints `{{json .}}` as one too); -a: stopped ones are reported skipped.
    "oci_list": [("one", [["docker", "ps", "-a", "--format", "{{json .}}"],
                          ["podman", "ps", "-a", "--format", "json"]])],
    # docker|podman inspect --format {{.State.Status}} NAME: the one field asked after an
    # exec killed without a word (fleetcheck.transport.oci); never the whole document, which
    # holds the container's environment.
    "oci_status": [("ref", "oci"), "inspect", "--format", "{{.State.Status}}",
                   ("WORD", "OCINAME")],
    # qm guest exec VMID --pass-stdin 1 --timeout N -- timeout -k K T (a Docker/Podman
    # command as the guest command: the VM bounds it itself, the agent cannot kill).
    "in_vm": ["qm", "guest", "exec", ("WORD", "VMID"), "--pass-stdin", "1",
              "--timeout", ("WORD", "INT"), "--",
              "timeout", "-k", ("WORD", "INT"), ("WORD", "SECONDS")],
}

BEFORE_INNER_SHAPES = {
    "pct list": [("ref", "sudo"), "pct", "list"],
    "qm list": [("ref", "sudo"), "qm", "list"],
    "pvesh get": [("ref", "sudo"), "pvesh", "get", ("WORD", "NODEPATH"),
                  "--output-format", "json"],
    "host probe": [("ref", "probe")],
    "pct exec probe": [("ref", "sudo"), ("ref", "in_ct"), ("ref", "probe")],
    "qm guest exec probe": [
        ("ref", "sudo"), "qm", "guest", "exec", ("WORD", "VMID"), "--pass-stdin", "1",
        "--timeout", ("WORD", "INT"), "--",
        "timeout", "-k", ("WORD", "INT"), ("WORD", "SECONDS"), ("ref", "probe"),
    ],
    "oci probe": [("ref", "sudo"), ("ref", "oci_probe")],
    "pct exec oci probe": [("ref", "sudo"), ("ref", "in_ct"), ("ref", "oci_probe")],
    "oci list": [("ref", "sudo"), ("ref", "oci_list")],
    # After a probe killed without a word: did the container stop under it?
    "pct status": [("ref", "sudo"), "pct", "status", ("WORD", "VMID")],
    "oci status": [("ref", "sudo"), ("ref", "oci_status")],
    "pct exec oci status": [("ref", "sudo"), ("ref", "in_ct"), ("ref", "oci_status")],
    "qm guest exec oci status": [("ref", "sudo"), ("ref", "in_vm"), ("ref", "oci_status")],
    "pct exec oci list": [("ref", "sudo"), ("ref", "in_ct"), ("ref", "oci_list")],
    "qm guest exec oci probe": [("ref", "sudo"), ("ref", "in_vm"), ("ref", "oci_probe")],
    "qm guest exec oci list": [("ref", "sudo"), ("ref", "in_vm"), ("ref", "oci_list")],
}


def before_shapes() -> dict[str, list[Any]]:
    """The script's SHAPES then: each inner shape under the audit's timeout, and the clean-up."""
    wrapper = ["timeout", "-k", ("WORD", "INT"), ("WORD", "SECONDS"),
               ("opt", ["env", ("WORD", "RUNTAG")])]
    return {**{name: wrapper + shape for name, shape in BEFORE_INNER_SHAPES.items()},
            "cleanup": ["pkill", "-TERM", "-f", "--", ("WORD", "KILLTAG")]}


def flat(items: list[Any], fragments: Mapping[str, list[Any]]) -> list[Any]:
    """`items` as the matcher reads them: every ("ref", NAME) replaced by the fragment's items
    (recursively), tuples as lists."""
    out: list[Any] = []
    for item in items:
        if isinstance(item, str):
            out.append(item)
            continue
        kind, arg = item
        if kind == "ref":
            out += flat(fragments[arg], fragments)
        elif kind in ("opt", "rep"):
            out.append([kind, flat(arg, fragments)])
        elif kind == "one":
            out.append([kind, [flat(alternative, fragments) for alternative in arg]])
        else:
            out.append([kind, arg])
    return out


def language(shapes: Mapping[str, list[Any]], fragments: Mapping[str, list[Any]]
             ) -> dict[str, list[Any]]:
    return {name: flat(shape, fragments) for name, shape in shapes.items()}


def test_the_installed_script_accepts_exactly_what_it_accepted_before() -> None:
    installed = script_module()  # as `fleetcheck host-setup` installs it
    assert {**installed.WORDS, **installed.KIND_WORDS} == BEFORE_WORDS
    after = language(installed.SHAPES, installed.FRAGMENTS)
    assert after == language(before_shapes(), BEFORE_FRAGMENTS)
    # Shape by shape and word class by word class the same, by the same names (the log's):
    # nothing more, nothing less. The order the shapes are tried in changed; no request the
    # audit sends matches two of them, so no request is named otherwise.
    for request, _runs_probe in ACCEPTED:
        words = installed.shlex.split(request)
        matching = [name for name, shape in installed.SHAPES.items()
                    if any(end == len(words) for end, _ in installed._match(shape, words, 0,
                                                                             False))]
        assert len(matching) == 1, (request, matching)


def test_the_installed_script_is_still_python_3_6() -> None:
    # PVE 7 ships 3.9; the script promises 3.6. The kinds' grammar is written in as literals.
    ast.parse(script_source(), feature_version=(3, 6))


def test_the_shipped_file_holds_only_the_hosts_own_shapes() -> None:
    shipped = shipped_script()
    assert (shipped.KIND_WORDS, shipped.KIND_SHAPES) == ({}, {})
    assert set(shipped.SHAPES) == {"host probe", "cleanup"}
    # Without the kinds' grammar written in, a kind's command is refused.
    with pytest.raises(shipped.Refused):
        shipped.parse_request(remote_command(["pct", "list"], 30))
    assert shipped.parse_request(remote_command(probe_argv("python3", deep=False, deadline=25),
                                                30))[1:] == ("host probe", True)


class BoxKind(OciKind):
    """A kind run inside LXC containers and VMs by `boxctl run BOX --`, listed by `boxctl ls`:
    only its own words, wrapper and command (the rest is the OCI kind's, unused here)."""

    runs_in = ("lxc", "qemu")
    gatekeeper_words: ClassVar[Mapping[str, str]] = {"BOX": r"[a-z][a-z0-9]{0,15}"}
    gatekeeper_wrapper = GatekeeperWrapper("box", ["boxctl", "run", ("WORD", "BOX"), "--"])
    gatekeeper_commands: ClassVar[Mapping[str, list[Any]]] = {"box list": ["boxctl", "ls"]}


BOX = BoxKind("box")


@pytest.fixture
def box(monkeypatch: pytest.MonkeyPatch) -> Iterator[None]:
    monkeypatch.setitem(kinds.KINDS, "box", f"{__name__}:BOX")
    yield


def box_run(argv: list[str]) -> list[str]:
    return ["boxctl", "run", "b1", "--", *argv]


def in_vm(argv: list[str]) -> list[str]:
    return qm_exec_argv(300, ["timeout", "-k", "2", "26", *argv], 29, sudo=True)


def test_a_kind_inside_another_gets_the_chains_of_the_kinds_above_it(box: None) -> None:
    words, shapes = kinds.gatekeeper_chains()
    assert words["BOX"] == BoxKind.gatekeeper_words["BOX"]
    assert {name for name in shapes if "box" in name} == {
        "pct exec box probe", "pct exec box list", "qm guest exec box probe",
        "qm guest exec box list"}
    installed = script_with(({}, {}))
    probe = ["env", "A=1", *probe_argv("python3", deep=False, deadline=25)]
    for argv, name, runs_probe in [
        (pct_exec_argv(101, box_run(probe)), "pct exec box probe", True),
        (pct_exec_argv(101, ["boxctl", "ls"], sudo=True), "pct exec box list", False),
        (in_vm(box_run(probe)), "qm guest exec box probe", True),
        (in_vm(["boxctl", "ls"]), "qm guest exec box list", False),
    ]:
        assert installed.parse_request(remote_command(argv, 30))[1:] == (name, runs_probe)
    # Only where it runs, and only its own commands.
    for argv in (box_run(probe), ["boxctl", "ls"], pct_exec_argv(101, ["boxctl", "rm", "b1"]),
                 pct_exec_argv(101, box_run(["sh", "-c", "id"])),
                 pct_exec_argv(101, ["boxctl", "run", "B;1", "--", *probe])):
        with pytest.raises(installed.Refused):
            installed.parse_request(remote_command(argv, 30))


class Clashing(BoxKind):
    runs_in = ("host",)
    gatekeeper_commands: ClassVar[Mapping[str, list[Any]]] = {"pct list": ["pct", "ls"]}


CLASHING = Clashing("clashing")


def test_two_kinds_may_not_give_one_shape_two_grammars(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setitem(kinds.KINDS, "clashing", f"{__name__}:CLASHING")
    with pytest.raises(ValueError, match="two node kinds give the gatekeeper's shape 'pct list' "
                                         "differently"):
        kinds.gatekeeper_chains()


class Widening(BoxKind):
    """A kind that writes whole shapes (`gatekeeper_shapes`) over what is already there."""

    runs_in = ("host",)
    gatekeeper_wrapper = None
    gatekeeper_commands: ClassVar[Mapping[str, list[Any]]] = {}


WIDENING = Widening("widening")


@pytest.mark.parametrize(("words", "shapes", "problem"), [
    # A whole shape under a composed chain's name: `pct list` would take any words after it.
    ({}, {"pct list": [("ref", "sudo"), "pct", "list", ("rep", [("WORD", "BOX")])]},
     "two node kinds give the gatekeeper's shape 'pct list' differently"),
    # The script's own: the host's probe, its clean-up, its generic word classes.
    ({}, {"host probe": ["sh", "-c", ("WORD", "BOX")]},
     "a node kind gives the gatekeeper's own shape 'host probe'"),
    ({"PYTHON": r"[^ ]+"}, {}, "a node kind gives the gatekeeper's own word class 'PYTHON'"),
])
def test_whole_shapes_widen_nothing_already_there(
    monkeypatch: pytest.MonkeyPatch, words: dict[str, str], shapes: dict[str, list[Any]],
    problem: str
) -> None:
    monkeypatch.setattr(WIDENING, "gatekeeper_words", {**BoxKind.gatekeeper_words, **words})
    monkeypatch.setattr(WIDENING, "gatekeeper_shapes", shapes)
    monkeypatch.setitem(kinds.KINDS, "widening", f"{__name__}:WIDENING")
    with pytest.raises(ValueError, match=re.escape(problem)):
        script_source(kinds.gatekeeper_grammar())


def test_the_installed_script_is_the_registry_as_it_is_now(
    monkeypatch: pytest.MonkeyPatch
) -> None:
    # script_module() is read once per registry: a kind registered (by a test, here) or
    # gone again is not answered with the script of the registry it was first asked under.
    before = script_module()
    monkeypatch.setitem(kinds.KINDS, "box", f"{__name__}:BOX")
    assert "pct exec box probe" in script_module().SHAPES
    monkeypatch.delitem(kinds.KINDS, "box")
    assert script_module().SHAPES == before.SHAPES
