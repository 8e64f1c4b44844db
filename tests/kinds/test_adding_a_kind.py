"""A node kind added on the registry alone: one module (this file's `WidgetKind`) and one
registry line (set by the fixture), nothing else in fleetcheck changed.

"Widgets" run on a host and are reached with a tool of their own, `widgetctl exec NAME --
ARGV`, listed with `widgetctl ls` (a stand-in script on PATH). The inventory declares them
under the host key the kind names (`widgets:`); the loader, `--limit`, the scheduler,
`fleetcheck inventory`, the refusals' ids and the gatekeeper treat them as any other kind.
"""

from __future__ import annotations

import asyncio
import json
import os
import re
import shlex
from collections.abc import Iterator, Mapping, Sequence
from pathlib import Path
from typing import Any, ClassVar

import pytest

from fleetcheck import failures, kinds
from fleetcheck.audit import node_from_result, run_audit
from fleetcheck.budget import LISTING_TIMEOUT, BudgetFor
from fleetcheck.failures import Refusal
from fleetcheck.host_setup import HostSetup, script_module, script_with
from fleetcheck.inventory import InventoryError, check_limit, parse_inventory
from fleetcheck.inventory.graph import inventory_to_json, render_inventory_graph
from fleetcheck.inventory.load import schema_keys
from fleetcheck.inventory_data.model import ALL_CONTAINERS, HostSpec, SkippedTarget, Target
from fleetcheck.inventory_data.patterns import may_select_inside
from fleetcheck.judgement.policy import DEFAULT_POLICY
from fleetcheck.kinds.base import NOT_MINE, Discovery, IdShape, NodeKind, Nodes, NotMine
from fleetcheck.probe import probe_argv
from fleetcheck.report.content import NodeResult
from fleetcheck.transport.interface import CommandResult, NestedTransport, Transport
from fleetcheck.transport.ssh import SshTransport, remote_command
from tests.nodeenv import make_node

pytestmark = pytest.mark.timeout(120)

_NAME = re.compile(r"^[a-z][a-z0-9-]{0,30}$")


def widgetctl_exec(name: str, argv: list[str]) -> list[str]:
    return ["widgetctl", "exec", name, "--", *argv]


class WidgetTransport(NestedTransport):
    def __init__(self, outer: Transport, name: str) -> None:
        super().__init__(outer)
        self.name = name

    def wrap(self, argv: list[str]) -> list[str]:
        return widgetctl_exec(self.name, argv)

    def explain_own(self, result: CommandResult) -> Refusal | None:
        if b"widgetctl: no such widget" in result.stderr:
            return Refusal("error", f"no widget {self.name}", failures.NO_SUCH_NODE)
        return None


class WidgetIds(IdShape):
    words = "HOST/widget:NAME"
    rank = 9

    def problem(self, hosts: Sequence[HostSpec], rest: str) -> str | NotMine | None:
        if not rest.startswith("widget:"):
            return NOT_MINE
        names = []
        for host in hosts:
            declared = host.declarations.get("widgets")
            if declared == ALL_CONTAINERS:
                return None
            names += [f"widget:{name}" for name in declared or ()]
        if any(re.fullmatch(rest.replace("*", ".*"), name) for name in names):
            return None
        return f"no such widget (widgets: {', '.join(names) or 'none'})"

    def may_select(self, kind: NodeKind, parent: Target, patterns: Sequence[str],
                   groups: Mapping[str, Sequence[str]]) -> bool:
        return may_select_inside(parent.id, kind.name, patterns, groups)


class WidgetKind(NodeKind):
    name = "widget"
    runs_in = ("host",)
    depth = 1
    id_shape = WidgetIds()
    inventory_key = "widgets"
    # What a host's gatekeeper must allow of widgetctl: the probe inside a widget, the listing.
    gatekeeper_words: ClassVar[Mapping[str, str]] = {"WIDGET": r"[a-z][a-z0-9-]{0,30}"}
    gatekeeper_shapes: ClassVar[Mapping[str, list[Any]]] = {
        "widget probe": [("ref", "sudo"), "widgetctl", "exec", ("WORD", "WIDGET"), "--",
                         ("ref", "probe")],
        "widget list": [("ref", "sudo"), "widgetctl", "ls"],
    }

    def schema_keys(self) -> tuple[str, ...]:
        return ("[]",)

    def read_declaration(self, reader: Any, value: Any, path: tuple[Any, ...],
                         transport: str) -> Any:
        if value == ALL_CONTAINERS:
            return ALL_CONTAINERS
        if not isinstance(value, list):
            raise reader.fail(path, "must be 'all' or a list of widget names")
        names = tuple(reader.string(item, (*path, index)) for index, item in enumerate(value))
        for index, name in enumerate(names):
            if not _NAME.match(name):
                raise reader.fail((*path, index), f"not a widget name: {name!r}")
        return names

    def declared(self, parent: Target) -> str | Sequence[Any] | None:
        return parent.host.declarations.get("widgets")

    async def discover(self, parent: Target, transport: Transport, context: Discovery
                       ) -> Sequence[Any]:
        result = await transport.run(["widgetctl", "ls"], timeout=LISTING_TIMEOUT)
        return [tuple(line.split()) for line in result.stdout.decode().splitlines()]

    def expand(self, parent: Target, listing: Sequence[Any] | None) -> Nodes:
        declared = self.declared(parent)
        found = dict(listing or ()) if declared == ALL_CONTAINERS \
            else dict.fromkeys(declared or (), "running")
        host = parent.host
        nodes: Nodes = []
        for name, state in found.items():
            if state != "running":
                nodes.append(SkippedTarget(host, None, name, f"widget {state}", host.labels,
                                           kind=self.name, runtime=self.name, container=name))
            else:
                nodes.append(Target(host=host, vmid=None, name=name, python=host.python,
                                    env=dict(host.env), labels=host.labels, timeout=host.timeout,
                                    kind=self.name, runtime=self.name, container=name))
        return nodes

    def transport(self, target: Target, outer: Transport, budget: BudgetFor) -> Transport:
        assert target.container is not None
        return WidgetTransport(outer, target.container)

    def inside(self, target: Target) -> str:
        return f"in widget {target.container}"

    def where_it_runs(self, node: NodeResult) -> str:
        return f"inside widget {node.name} on {node.host}, through `widgetctl exec`"

    def graph_rows(self, host: HostSpec, known: Sequence[Target]) -> list[str]:
        if host.declarations.get("widgets") != ALL_CONTAINERS:
            return []
        return [f"{host.name}/widget:*  all running: discovered at audit time via widgetctl ls"]


WIDGET = WidgetKind()

WIDGETCTL = r"""#!/bin/sh
# widgetctl: `ls` lists the widgets, `exec NAME -- ARGV` runs ARGV in one (here: on this host).
case "$1" in
ls) printf 'alpha running\nbeta stopped\n' ;;
exec)
    name=$2; shift 3
    case "$name" in alpha|beta) ;; *) echo "widgetctl: no such widget: $name" >&2; exit 3 ;; esac
    exec "$@" ;;
*) echo "widgetctl: unknown command $1" >&2; exit 2 ;;
esac
"""


@pytest.fixture
def widgets(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Iterator[Path]:
    """The one registry line, and widgetctl on PATH."""
    monkeypatch.setitem(kinds.KINDS, "widget", f"{__name__}:WIDGET")
    bindir = tmp_path / "bin"
    bindir.mkdir()
    (bindir / "widgetctl").write_text(WIDGETCTL)
    (bindir / "widgetctl").chmod(0o755)
    monkeypatch.setenv("PATH", f"{bindir}{os.pathsep}{os.environ['PATH']}")
    yield tmp_path


_NODES: dict[Path, Any] = {}


def inventory_text(tmp_path: Path, widgets: str) -> str:
    """A local host with `widgets: WIDGETS`, the widgets healthy nodes (tests/nodeenv.py)."""
    if tmp_path not in _NODES:
        _NODES[tmp_path] = make_node(tmp_path / "node")
    node = _NODES[tmp_path]
    return ("hosts:\n  here:\n    transport: local\n    probe_host: false\n"
            f"    python: {json.dumps(node.python)}\n    env: {json.dumps(dict(node.env))}\n"
            f"    timeout: 60\n    widgets: {widgets}\n")


def rows(report: Any) -> list[tuple[str, str, str, str | None]]:
    return [(n.id, n.kind, n.status, n.triton.cause) for n in report.nodes]


def test_its_nodes_are_declared_listed_and_probed_through_its_own_tool(widgets: Path) -> None:
    inventory = parse_inventory(inventory_text(widgets, "all"), str(widgets / "inv.yaml"))
    assert inventory.hosts[0].declarations == {"widgets": ALL_CONTAINERS}
    report = asyncio.run(run_audit(inventory))
    assert rows(report) == [("here/widget:alpha", "widget", "ok", None),
                            ("here/widget:beta", "widget", "skipped", None)]
    alpha = report.nodes[0]
    assert (alpha.parent, alpha.reason) == ("here", "Triton gpu (cuda)")


def test_a_refusal_of_its_tool_is_a_node_with_its_cause_id(widgets: Path) -> None:
    inventory = parse_inventory(inventory_text(widgets, "[alpha, ghost]"),
                                str(widgets / "inv.yaml"))
    report = asyncio.run(run_audit(inventory))
    assert rows(report) == [("here/widget:alpha", "widget", "ok", None),
                            ("here/widget:ghost", "widget", "error", failures.NO_SUCH_NODE)]
    assert report.nodes[1].reason == "no widget ghost"


def test_limit_reads_its_ids_before_and_after_the_listing(widgets: Path) -> None:
    listed = parse_inventory(inventory_text(widgets, "[alpha, gamma]"),
                             str(widgets / "inv.yaml"))
    assert check_limit(listed, ["here/widget:alpha"]) == ["here/widget:alpha"]
    with pytest.raises(InventoryError) as caught:
        check_limit(listed, ["here/widget:nope"])
    assert str(caught.value) == ("--limit 'here/widget:nope': no such widget "
                                 "(widgets: widget:alpha, widget:gamma)")
    # A pattern in no kind's shape names every shape there is, this kind's too.
    with pytest.raises(InventoryError) as caught:
        check_limit(listed, ["here/abc"])
    assert str(caught.value).endswith("CLUSTER/NAMESPACE/POD, or HOST/widget:NAME")
    every = parse_inventory(inventory_text(widgets, "all"), str(widgets / "inv.yaml"))
    report = asyncio.run(run_audit(every, limit=["here/widget:beta"]))
    assert rows(report) == [("here/widget:beta", "widget", "skipped", None)]


def test_the_loader_takes_its_key_and_its_mistakes_from_the_kind(widgets: Path) -> None:
    assert {"hosts.*.widgets", "hosts.*.widgets[]"} <= set(schema_keys())
    path = str(widgets / "inv.yaml")
    with pytest.raises(InventoryError) as caught:
        parse_inventory(inventory_text(widgets, "[alpha, Bad_Name]"), path)
    assert str(caught.value) == f"{path}:8: hosts.here.widgets[1]: not a widget name: 'Bad_Name'"
    # A host that reaches its nodes only through the API's guest agent has no widgetctl.
    with pytest.raises(InventoryError) as caught:
        parse_inventory("hosts:\n  pve1:\n    transport: api\n    widgets: [alpha]\n"
                        "    api: {url: 'https://pve1:8006', user: a@pve, token_name: t,"
                        " token_env: T}\n", path)
    assert "hosts.pve1.widgets: needs SSH" in str(caught.value)


def test_fleetcheck_inventory_shows_its_nodes_and_declaration(widgets: Path) -> None:
    listed = parse_inventory(inventory_text(widgets, "[alpha]"), str(widgets / "inv.yaml"))
    assert "here/widget:alpha  python=" in render_inventory_graph(listed)
    host = inventory_to_json(listed)["hosts"][0]
    assert host["widgets"] == ["alpha"]
    assert [n["id"] for n in host["nodes"]] == ["here/widget:alpha"]
    every = parse_inventory(inventory_text(widgets, "all"), str(widgets / "inv.yaml"))
    assert "here/widget:*  all running: discovered at audit time via widgetctl ls" in \
        render_inventory_graph(every)


def test_the_gatekeeper_allows_what_its_module_says_and_refuses_the_rest(
    widgets: Path, tmp_path: Path
) -> None:
    probe = widgetctl_exec("alpha", ["env", "CUDA_VISIBLE_DEVICES=0",
                                     *probe_argv("python3", deep=False, deadline=50)])
    request = remote_command(probe, 60, "0123456789abcdef")
    # A host set up before the kind was registered: its script knows no widgetctl, and the
    # node says by its cause id that the gatekeeper refused it.
    shipped = script_module()
    with pytest.raises(shipped.Refused):
        shipped.parse_request(request)
    host = HostSpec(name="pve1", address="127.0.0.1", python="python3",
                    declarations={"widgets": ("alpha",)})
    target = next(t for t in kinds.expand(kinds.host_target(host)) if isinstance(t, Target))
    transport = kinds.open_transport(target, SshTransport(host))
    refused = CommandResult(returncode=shipped.EXIT_REFUSED, stdout=b"", stderr=(
        f"{shipped.NAME}: refused: not a command an audit sends: {request[:40]}\n").encode())
    node = node_from_result(target, transport, refused, DEFAULT_POLICY, 0.1)
    assert (node.id, node.status, node.triton.cause) == (
        "pve1/widget:alpha", "error", failures.GATEKEEPER_REFUSED)
    # `fleetcheck host-setup` with the kind registered writes its shapes into the script.
    grammar = kinds.gatekeeper_grammar()
    assert set(grammar[1]) == {"widget probe", "widget list"}
    installed = script_with(grammar)
    words, shape, runs_probe = installed.parse_request(request)
    assert (words, shape, runs_probe) == (shlex.split(request), "widget probe", True)
    listing = remote_command(["widgetctl", "ls"], 30, "0123456789abcdef")
    assert installed.parse_request(listing)[1] == "widget list"
    for other in (widgetctl_exec("alpha", ["sh", "-c", "id"]),
                  widgetctl_exec("Alpha;id", probe_argv("python3", deep=False, deadline=50)),
                  ["widgetctl", "rm", "alpha"]):
        with pytest.raises(installed.Refused):
            installed.parse_request(remote_command(other, 30))
    # The kinds' shapes are added to the script's own, not put in their place.
    assert installed.parse_request(remote_command(["pct", "list"], 30))[1] == \
        "pct list"
    setup = HostSetup(public_key="ssh-ed25519 AAAAC3NzaC1lZDI1NTE5AAAA test", grammar=grammar)
    assert "'widget probe'" in setup.installer()
    # Its whole shapes are written in beside the registry's composed chains, which stay as
    # they are (a host set up without the kind has exactly those).
    chains = script_module().KIND_SHAPES
    assert not set(chains) & set(grammar[1])
    assert installed.KIND_SHAPES == {**chains, **grammar[1]}
