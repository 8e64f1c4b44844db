"""The requests an audit sends a host's gatekeeper, built by fleetcheck's own code
(remote_command, pct_exec_argv, pct_list_argv, probe_argv): what its grammar must accept."""

from __future__ import annotations

import shlex
from typing import Any

from fleetcheck.inventory_data.model import HostSpec
from fleetcheck.kinds.lxc import pct_list_argv
from fleetcheck.probe import probe_argv
from fleetcheck.transport.packing import PACK_ABOVE, packed_launch
from fleetcheck.transport.pct import pct_exec_argv
from fleetcheck.transport.ssh import remote_command

TAG = "0123456789abcdef"


def wrapped(argv: list[str], tag: str = TAG) -> str:
    return remote_command(argv, 30, tag)


def probe(python: str = "python3", **kwargs: Any) -> list[str]:
    return probe_argv(python, deep=kwargs.pop("deep", False), deadline=25, **kwargs)


def packed(argv: list[str]) -> list[str]:
    """`argv` as the audit sends it over SSH with a probe too large to go as it is."""
    return packed_launch(argv, b"#" * (PACK_ABOVE + 1))[0]


ENV = ["env", "CUDA_VISIBLE_DEVICES=0", "PATH=/opt/venv/bin:/usr/bin", "NOTE=a b;c$(d)"]

#: (request, runs the probe): every shape an audit sends today and the ones #12 adds.
ACCEPTED = [
    (wrapped(pct_list_argv(HostSpec(name="h", address=None))), False),
    (wrapped(pct_list_argv(HostSpec(name="h", address=None, sudo=True))), False),
    (remote_command(["pct", "list"], 30, ""), False),
    (wrapped(probe()), True),
    (wrapped(probe("/opt/conda/bin/python3.11", deep=True, workload_python="/opt/x/python")),
     True),
    (wrapped([*ENV, *probe()]), True),
    (wrapped(pct_exec_argv(101, probe())), True),
    # The probe compressed behind its bootstrap (transport/packing.py), as every SSH audit
    # sends the shipped one.
    (wrapped(packed(probe())), True),
    (wrapped([*ENV, *packed(probe("/usr/bin/python3", deep=True))]), True),
    (wrapped(pct_exec_argv(101, packed(probe()), sudo=True)), True),
    (wrapped(["qm", "guest", "exec", "300", "--pass-stdin", "1", "--timeout", "29", "--",
              "timeout", "-k", "2", "26", "docker", "exec", "-i", "trainer",
              *packed(probe())]), True),
    (wrapped(pct_exec_argv(999999999, [*ENV, *probe("/usr/bin/python3")], sudo=True)), True),
    (wrapped(["qm", "list"]), False),
    (wrapped(["sudo", "-n", "qm", "list"]), False),
    (wrapped(["pvesh", "get", "/nodes/pve-1/lxc", "--output-format", "json"]), False),
    (wrapped(["pvesh", "get", "/nodes/pve1/qemu", "--output-format", "json"]), False),
    (wrapped(["sudo", "-n", "qm", "guest", "exec", "200", "--pass-stdin", "1", "--timeout", "40",
              "--", "timeout", "-k", "5", "30", *ENV, *probe()]), True),
    (wrapped(["docker", "exec", "-i", "--user", "1000:1000", "--env", "A=1", "--env", "B=2",
              "trainer-1", *probe()]), True),
    (wrapped(pct_exec_argv(101, ["podman", "exec", "-i", "web.app", *probe()], sudo=True)),
     True),
    (wrapped(["docker", "ps", "-a", "--format", "{{json .}}"]), False),
    (wrapped(pct_exec_argv(101, ["podman", "ps", "-a", "--format", "json"])), False),
    # Docker inside a VM: the runtime's command is the guest command of `qm guest exec`.
    (wrapped(["qm", "guest", "exec", "300", "--pass-stdin", "1", "--timeout", "29", "--",
              "timeout", "-k", "2", "26", "docker", "exec", "-i", "--env", "A=1", "trainer",
              *probe()]), True),
    (wrapped(["sudo", "-n", "qm", "guest", "exec", "300", "--pass-stdin", "1", "--timeout",
              "29", "--", "timeout", "-k", "2", "26", "podman", "ps", "-a", "--format",
              "json"]), False),
    (shlex.join(["pkill", "-TERM", "-f", "--", f"FLEETCHECK_RU[N]={TAG}"]), False),
    # Asked after a probe killed without a word (transport/pct.py, transport/oci.py).
    (wrapped(["sudo", "-n", "pct", "status", "101"]), False),
    (wrapped(["docker", "inspect", "--format", "{{.State.Status}}", "trainer-1"]), False),
    (wrapped(pct_exec_argv(101, ["podman", "inspect", "--format", "{{.State.Status}}",
                                 "web.app"], sudo=True)), False),
    (wrapped(["qm", "guest", "exec", "300", "--pass-stdin", "1", "--timeout", "29", "--",
              "timeout", "-k", "2", "26", "docker", "inspect", "--format", "{{.State.Status}}",
              "trainer"]), False),
]
