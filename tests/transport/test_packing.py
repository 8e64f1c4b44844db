"""transport/packing.py: a large probe travels compressed behind a bootstrap that runs it as
`python -` would, compressed once per run; the transports that cross a network get it, and the
local machine (the bootstrap lets the script's parse tree go before it runs)."""

from __future__ import annotations

import asyncio
import shlex
import subprocess
import sys
import zlib
from pathlib import Path

import pytest

from fleetcheck.audit import probe_target
from fleetcheck.inventory_data.model import HostSpec, Target
from fleetcheck.transport.factory import TransportFactory
from fleetcheck.transport.interface import CommandResult, Transport
from fleetcheck.transport.local import LocalTransport
from fleetcheck.transport.packing import PACK_ABOVE, ZLIB_BOOTSTRAP, packed_launch
from fleetcheck.transport.sshlib import asyncssh
from tests.transport.sshserver import FakeHost

pytestmark = pytest.mark.timeout(60)

#: A script that says how it was run, padded past PACK_ABOVE with text that compresses as
#: source does not (random-ish comment lines), so that it is packed.
SELF_REPORT = (
    b"import sys\n"
    b"class Mine: pass\n"
    b"print(repr(sys.argv), __name__, globals().get('__file__'), Mine.__module__,\n"
    b"      sys.modules['__main__'].__dict__ is globals(),\n"
    b"      sys._getframe().f_code.co_filename, sys.stdin.read() == '')\n"
    + b"".join(b"# %d %x\n" % (n, n * 2654435761 % 2**32) for n in range(6000)))


def test_small_scripts_and_argv_without_a_dash_go_as_they_are() -> None:
    argv = ["python3", "-", "--deadline", "55"]
    assert packed_launch(argv, b"print(1)\n") == (argv, b"print(1)\n")
    script = b"#" * (PACK_ABOVE + 1)
    assert packed_launch(["python3", "x.py"], script) == (["python3", "x.py"], script)


def test_a_large_script_is_packed_once_for_every_node() -> None:
    argv = ["env", "A=1", "python3", "-", "--deadline", "55", "--deep"]
    launched, data = packed_launch(argv, SELF_REPORT)
    assert launched == ["env", "A=1", "python3", "-c", ZLIB_BOOTSTRAP, "--deadline", "55",
                        "--deep"]
    assert zlib.decompress(data) == SELF_REPORT
    assert len(data) < len(SELF_REPORT) / 2
    # The same bytes object for the next node: compressed once per script, not once per node.
    assert packed_launch(["python3", "-"], SELF_REPORT)[1] is data


def test_the_bootstrap_runs_the_script_as_python_dash_does() -> None:
    plain = subprocess.run([sys.executable, "-", "--deadline", "9"], input=SELF_REPORT,
                           capture_output=True, timeout=30, check=True)
    argv, data = packed_launch([sys.executable, "-", "--deadline", "9"], SELF_REPORT)
    packed = subprocess.run(argv, input=data, capture_output=True, timeout=30, check=True)
    assert packed.stdout == plain.stdout
    assert plain.stdout.decode().split() == ["['-',", "'--deadline',", "'9']", "__main__",
                                             "<stdin>", "__main__", "True", "<stdin>", "True"]


def test_the_local_machine_gets_the_bootstrap_which_frees_the_parse_tree_first() -> None:
    """`python -` keeps the whole script's parse tree until the script ends (13 MiB of the
    probe's interpreter beside the workload's under a job's memory limit, on an H100); the
    bootstrap compiles, drops the source and runs. A script of 20,000 statements reports its
    own anonymous memory, heap trimmed, at its end: run as `python -` and through the
    bootstrap."""
    assert LocalTransport().packs_probe()
    script = b"".join(b"v%d = [%d, 'x%d', (%d, %d)]\n" % (n, n, n, n, n + 1)
                      for n in range(20000)) + (
        b"import ctypes\nctypes.CDLL(None).malloc_trim(0)\n"
        b"print([l.split()[1] for l in open('/proc/self/status') if l.startswith('RssAnon')]"
        b"[0])\n")
    plain = subprocess.run([sys.executable, "-"], input=script, capture_output=True,
                           timeout=60, check=True)
    argv, data = packed_launch([sys.executable, "-"], script)
    packed = subprocess.run(argv, input=data, capture_output=True, timeout=60, check=True)
    held, freed = int(plain.stdout), int(packed.stdout)
    assert freed * 2 < held, (held, freed)


class Recording(Transport):
    """A transport that records each command and its input, and packs where told to."""

    def __init__(self, packs: bool) -> None:
        self.packs = packs
        self.calls: list[tuple[list[str], bytes | None]] = []

    async def run(self, argv: list[str], *, input: bytes | None = None,
                  timeout: float) -> CommandResult:
        self.calls.append((argv, input))
        return CommandResult(1, b"", b"nothing here")

    def packs_probe(self) -> bool:
        return self.packs


def target(host: HostSpec, env: dict[str, str] | None = None) -> Target:
    return Target(host=host, vmid=None, name=host.name, python="python3", env=env or {},
                  labels=(), timeout=30)


@pytest.mark.parametrize("packs", [False, True])
def test_the_audit_packs_the_probe_only_where_the_transport_says(packs: bool) -> None:
    transport = Recording(packs)
    host = HostSpec(name="n1", address=None, transport="local")
    asyncio.run(probe_target(target(host, {"CC": "gcc"}), transport, probe=SELF_REPORT))
    [(argv, data)] = transport.calls
    assert argv[:2] == ["env", "CC=gcc"]
    if packs:
        assert argv[2:5] == ["python3", "-c", ZLIB_BOOTSTRAP]
        assert data is not None and zlib.decompress(data) == SELF_REPORT
    else:
        assert (argv[2:4], data) == (["python3", "-"], SELF_REPORT)


def test_over_ssh_the_probe_and_the_commands_through_it_are_packed(tmp_path: Path) -> None:
    got: list[bytes] = []

    async def handler(proc: asyncssh.SSHServerProcess[bytes]) -> None:
        got.append(await proc.stdin.read())
        proc.exit(1)

    fake = FakeHost(tmp_path, handler)

    async def main() -> tuple[bool, bool]:
        async with fake as host:
            factory = TransportFactory()
            transport = factory.for_host(host)
            try:
                await probe_target(target(host), transport, probe=SELF_REPORT)
                # A container's probe, through `pct exec` on the host's connection.
                container = Target(host=host, vmid=101, name="101", python="python3", env={},
                                   labels=(), timeout=30)
                nested = factory.for_target(container, transport)
                await probe_target(container, nested, probe=SELF_REPORT)
            finally:
                await transport.close()
            return transport.packs_probe(), nested.packs_probe()

    assert asyncio.run(main()) == (True, True)
    assert len(fake.commands) == 2
    host_words, container_words = (shlex.split(line) for line in fake.commands)
    at = host_words.index("python3")
    assert host_words[at:at + 4] == ["python3", "-c", ZLIB_BOOTSTRAP, "--deadline"]
    at = container_words.index("pct")
    assert container_words[at:at + 9] == ["pct", "exec", "101", "--keep-env", "0", "--",
                                          "python3", "-c", ZLIB_BOOTSTRAP]
    assert [zlib.decompress(data) for data in got] == [SELF_REPORT, SELF_REPORT]
