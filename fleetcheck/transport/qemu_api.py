"""QEMU VMs of a host without SSH: the Proxmox API's agent/exec and agent/exec-status.

Owns the API variant of the guest-agent transport: `POST /nodes/{node}/qemu/{vmid}/agent/exec`
(`command` array, `input-data` at most 64 KiB) then `GET .../agent/exec-status?pid=` until
the command has exited (the agent forgets the pid after its first "exited" answer, so it is
never asked again). A probe larger than 64 KiB goes as a compressed bootstrap: the guest's
python reads `base64(zlib(probe))` on stdin and runs it, or `base85(xz(probe))` when zlib's
does not fit (the third round's probe: 77 KB in base64 of zlib, 62 KB in base85 of xz). When
even that is over the limit (the fourth round's probe), the packed text goes in pieces: one
exec per piece stores it in a private dir of the guest's temp dir (`tempfile.mkdtemp`, mode
0700), and the last exec, with the last piece as its input, reads them, removes the dir before
anything else runs, and runs the script; a piece that fails to arrive removes the dir too, so
nothing is left in the guest either way. The token needs
`VM.GuestAgent.Unrestricted` on the VM (PVE 9; `VM.Monitor` before).
"""

from __future__ import annotations

import asyncio
import base64
import contextlib
import functools
import lzma
import re
import time
import zlib
from collections.abc import AsyncIterator
from dataclasses import dataclass
from typing import Any

from fleetcheck.budget import BudgetFor, NodeBudget
from fleetcheck.failures import ACCESS_DENIED, UNREACHABLE, Refusal
from fleetcheck.inventory_data.errors import DiscoveryError
from fleetcheck.inventory_data.model import ApiOptions
from fleetcheck.inventory_data.pveapi import api_client, call_api, read_token_secret
from fleetcheck.transport.interface import (
    CommandResult,
    RunCommand,
    Transport,
    TransportError,
)
from fleetcheck.transport.packing import RUN_AS_STDIN
from fleetcheck.transport.qemu import VmWording, guest_command, result_from_status

#: qemu-server API2/Qemu/Agent.pm: `input-data` has `maxLength => 64 * 1024`.
API_INPUT_LIMIT = 64 * 1024
#: Seconds between exec-status polls: short first (a quick command), then once a second
#: as qm does.
POLL_FIRST, POLL_MAX = 0.1, 1.0
AGENT_PERMISSION = ("it needs VM.GuestAgent.Unrestricted on /vms/VMID (PVE 9) or VM.Monitor "
                    "(PVE 8 and older)")
#: Reads base64(zlib(script)) from stdin and runs it as `python - ARGS` would (any Python).
BOOTSTRAP = ("import base64,sys,zlib;"
             "s=zlib.decompress(base64.b64decode(sys.stdin.buffer.read()));" + RUN_AS_STDIN)
#: The same with base85(xz(script)): a sixth smaller; needs the guest Python's lzma module.
BOOTSTRAP_XZ = ("import base64,lzma,sys;"
                "s=lzma.decompress(base64.b85decode(sys.stdin.buffer.read()));" + RUN_AS_STDIN)
#: The packings, in the order tried: the first whose text fits the API's input-data is sent.
PACKINGS = (
    (BOOTSTRAP, lambda script: base64.b64encode(zlib.compress(script, 9))),
    (BOOTSTRAP_XZ, lambda script: base64.b85encode(
        lzma.compress(script, preset=9 | lzma.PRESET_EXTREME))),
)
#: The first piece of a script sent in pieces: stored in a new private dir, whose path it prints.
STORE_FIRST = ("import os,sys,tempfile;d=tempfile.mkdtemp(prefix='fleetcheck-probe-');"
               "open(os.path.join(d,'0'),'wb').write(sys.stdin.buffer.read());"
               "sys.stdout.write(d)")
#: Each later piece but the last: `-c STORE_NEXT DIR INDEX`.
STORE_NEXT = ("import os,sys;"
              "open(os.path.join(sys.argv[1],sys.argv[2]),'wb').write(sys.stdin.buffer.read())")
#: The last piece, on stdin, after the stored ones (`-c BOOTSTRAP_PIECES DIR ARGS`): the dir is
#: removed before the script runs.
BOOTSTRAP_PIECES = ("import base64,lzma,os,shutil,sys;d=sys.argv.pop(1);"
                    "p=[open(os.path.join(d,str(i)),'rb').read()"
                    " for i in range(len(os.listdir(d)))];"
                    "shutil.rmtree(d);"
                    "s=lzma.decompress(base64.b85decode(b''.join(p)+sys.stdin.buffer.read()));"
                    + RUN_AS_STDIN)
#: Removes the dir of pieces when one of them failed to arrive.
REMOVE_PIECES = "import shutil,sys;shutil.rmtree(sys.argv[1],True)"
#: What STORE_FIRST may print: an absolute path whose last component is its own.
_PIECES_DIR = re.compile(r"/(?:[^\x00]*/)?fleetcheck-probe-[A-Za-z0-9_]+")
#: Pieces at most: 4 of 64 KiB is four times the fourth round's packed probe.
MAX_PIECES = 4


@dataclass(frozen=True)
class PackedScript:
    """A script on stdin as the API can take it: `argv` with `data` as its input-data, after
    `pieces` were stored in the guest one exec each (none when the packed script fits)."""

    interpreter: list[str]
    argv: list[str]
    data: str
    pieces: tuple[str, ...] = ()


def pack_script(argv: list[str], script: bytes) -> PackedScript:
    """`PYTHON - ARGS` with `script` on stdin -> `PYTHON -c BOOTSTRAP ARGS`, compressed input.

    Used when `script` exceeds the API's 64 KiB `input-data`; raises TransportError when
    argv has no `-` (a script on stdin) to replace or the script is too big even in pieces.
    """
    if "-" not in argv:
        raise TransportError("input larger than the API's 64 KiB input-data", kind="error")
    index = argv.index("-")
    interpreter, args = argv[:index], argv[index + 1:]
    bootstrap, packed = _packing(script)
    if bootstrap:
        return PackedScript(interpreter, [*interpreter, "-c", bootstrap, *args], packed)
    chunks = [packed[at:at + API_INPUT_LIMIT] for at in range(0, len(packed), API_INPUT_LIMIT)]
    if len(chunks) > MAX_PIECES:
        raise TransportError(
            f"probe too large for the API's 64 KiB input-data even in {MAX_PIECES} pieces "
            f"({len(packed)} characters packed)", kind="error")
    # The dir of pieces goes after BOOTSTRAP_PIECES once the guest has made it (_run_in_pieces).
    return PackedScript(interpreter, [*interpreter, "-c", BOOTSTRAP_PIECES, *args],
                        chunks[-1], tuple(chunks[:-1]))


@functools.lru_cache(maxsize=4)
def _packing(script: bytes) -> tuple[str, str]:
    """(bootstrap, text) of the first packing that fits the API's input-data, else ("", the
    last packing's text) to send in pieces: once per script, not once per VM (xz's extreme
    preset takes a fifth of a second of CPU for the fifth round's probe)."""
    packed = ""
    for bootstrap, pack in PACKINGS:
        packed = pack(script).decode("ascii")
        if len(packed) <= API_INPUT_LIMIT:
            return bootstrap, packed
    return "", packed


class ApiAgent:
    """One host's Proxmox API client, shared by the VMs on it, at most `slots` calls at once."""

    def __init__(self, api: ApiOptions, host_name: str, *, slots: int = 8) -> None:
        self.api = api
        self.host_name = host_name
        self.node = api.node or host_name
        self._client: Any = None
        self._secret = ""
        self.slots = asyncio.Semaphore(max(1, slots))

    async def call(self, request: Any) -> Any:
        """Run `request(client)` (blocking proxmoxer calls) in a worker thread."""
        try:
            if self._client is None:
                self._secret = read_token_secret(self.api, self.host_name)
                self._client = await asyncio.to_thread(
                    api_client, self.api, self._secret, self.host_name)
            client = self._client
            return await asyncio.to_thread(
                call_api, self.api, self._secret, self.host_name,
                lambda: request(client), AGENT_PERMISSION)
        except DiscoveryError as exc:
            # A refused token or an unreachable API is "unreachable"; an answer is "error".
            kind = "unreachable" if exc.cause == UNREACHABLE else "error"
            raise TransportError(str(exc), kind=kind, cause=exc.cause) from None


class QemuApiTransport(VmWording, Transport):
    """Runs commands in one VM through the Proxmox API's guest-agent endpoints."""

    def __init__(self, agent: ApiAgent, vmid: int, *, budget: BudgetFor = NodeBudget) -> None:
        self.agent = agent
        self.vmid = vmid
        self.host_name = agent.host_name
        self.budget = budget

    def explain_failure(self, result: CommandResult) -> Refusal | None:
        return self.explain_own(result)

    async def run(
        self, argv: list[str], *, input: bytes | None = None, timeout: float
    ) -> CommandResult:
        budget = self.budget(timeout)
        data: str | None = None
        if input:
            if len(input) > API_INPUT_LIMIT or not _is_text(input):
                packed = pack_script(argv, input)
                if packed.pieces:
                    return await self._run_in_pieces(packed, budget)
                argv, data = packed.argv, packed.data
            else:
                data = input.decode("utf-8")
        return await self._exec(argv, data, budget)

    async def _run_in_pieces(self, packed: PackedScript, budget: NodeBudget) -> CommandResult:
        """Store the pieces one exec each, then run the script with the last one (see above)."""
        python = packed.interpreter
        stored = await self._exec([*python, "-c", STORE_FIRST], packed.pieces[0], budget)
        where = stored.stdout.decode("utf-8", "replace")
        if stored.returncode != 0 or not _PIECES_DIR.fullmatch(where):
            return stored if stored.returncode != 0 else CommandResult(
                255, b"", f"storing the probe in the guest printed {where[:200]!r}".encode())
        for number, piece in enumerate(packed.pieces[1:], start=1):
            result = await self._exec([*python, "-c", STORE_NEXT, where, str(number)], piece,
                                      budget)
            if result.returncode != 0:
                await self._exec([*python, "-c", REMOVE_PIECES, where], None, budget)
                return result
        run = len(python) + 2  # after PYTHON -c BOOTSTRAP_PIECES
        return await self._exec([*packed.argv[:run], where, *packed.argv[run:]], packed.data,
                                budget)

    async def _exec(self, argv: list[str], data: str | None, budget: NodeBudget) -> CommandResult:
        """One agent/exec of `argv` with `data` as its input, waited for."""
        command = guest_command(argv, budget)
        vm = self.vmid
        node = self.agent.node
        params: dict[str, Any] = {"command": command}
        if data is not None:
            params["input-data"] = data
        try:
            started = await self.agent.call(
                lambda c: c.nodes(node).qemu(vm).agent.exec.post(**params))
        except TransportError as exc:
            return self._refused(exc)
        pid = started.get("pid") if isinstance(started, dict) else None
        if not isinstance(pid, int):
            raise TransportError(f"{self.where}: agent/exec answered no pid", kind="error")
        # Polled as long as qm would wait: the guest's own `timeout` has ended it by then.
        return await self._wait(pid, budget.guest_wait)

    async def _wait(self, pid: int, bound: float) -> CommandResult:
        """Poll exec-status until the command exited or `bound` seconds passed."""
        node, vm = self.agent.node, self.vmid
        deadline = time.monotonic() + bound
        delay = POLL_FIRST
        while True:
            try:
                status = await self.agent.call(
                    lambda c: c.nodes(node).qemu(vm).agent("exec-status").get(pid=pid))
            except TransportError as exc:
                return self._refused(exc)
            if isinstance(status, dict) and status.get("exited"):
                return result_from_status(status, self.where)
            if time.monotonic() + delay > deadline:
                return CommandResult(None, b"", b"", timed_out=True)
            await asyncio.sleep(delay)
            delay = min(POLL_MAX, delay * 2)

    def _refused(self, exc: TransportError) -> CommandResult:
        """The API's own refusals (500 with qemu-server's die text) read like qm's stderr."""
        if exc.cause in (UNREACHABLE, ACCESS_DENIED):
            raise exc
        return CommandResult(255, b"", str(exc).encode())

    @contextlib.asynccontextmanager
    async def session(self) -> AsyncIterator[RunCommand]:
        async with self.agent.slots:
            yield self.run


class ApiHostTransport(Transport):
    """A `transport: api` host: no SSH and no shell, only its VMs' agents through `agent`."""

    def __init__(self, api: ApiOptions, host_name: str, *, slots: int = 8) -> None:
        self.agent = ApiAgent(api, host_name, slots=slots)
        self.host_name = host_name

    async def run(
        self, argv: list[str], *, input: bytes | None = None, timeout: float
    ) -> CommandResult:
        raise TransportError(f"{self.host_name} has no SSH (transport: api): only its VMs are "
                             "reached, through the guest agent", kind="error")


def _is_text(data: bytes) -> bool:
    try:
        data.decode("utf-8")
    except UnicodeDecodeError:
        return False
    return True
