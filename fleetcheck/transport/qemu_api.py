"""QEMU VMs of a host without SSH: the Proxmox API's agent/exec and agent/exec-status.

Owns the API variant of the guest-agent transport: `POST /nodes/{node}/qemu/{vmid}/agent/exec`
(`command` array, `input-data` at most 64 KiB) then `GET .../agent/exec-status?pid=` until
the command has exited (the agent forgets the pid after its first "exited" answer, so it is
never asked again). A probe larger than 64 KiB goes as a compressed bootstrap: the guest's
python reads `base64(zlib(probe))` on stdin and runs it, or `base85(xz(probe))` when zlib's
does not fit (the third round's probe: 77 KB in base64 of zlib, 62 KB in base85 of xz).
The token needs
`VM.GuestAgent.Unrestricted` on the VM (PVE 9; `VM.Monitor` before).
"""

from __future__ import annotations

import asyncio
import base64
import contextlib
import lzma
import time
import zlib
from collections.abc import AsyncIterator
from typing import Any

from fleetcheck.budget import BudgetFor, NodeBudget
from fleetcheck.failures import ACCESS_DENIED, UNREACHABLE, Refusal
from fleetcheck.spec.errors import DiscoveryError
from fleetcheck.spec.model import ApiOptions
from fleetcheck.spec.pveapi import api_client, call_api, read_token_secret
from fleetcheck.transport.interface import (
    CommandResult,
    RunCommand,
    Transport,
    TransportError,
)
from fleetcheck.transport.qemu import VmWording, guest_command, result_from_status

#: qemu-server API2/Qemu/Agent.pm: `input-data` has `maxLength => 64 * 1024`.
API_INPUT_LIMIT = 64 * 1024
#: Seconds between exec-status polls: short first (a quick command), then once a second
#: as qm does.
POLL_FIRST, POLL_MAX = 0.1, 1.0
AGENT_PERMISSION = ("it needs VM.GuestAgent.Unrestricted on /vms/VMID (PVE 9) or VM.Monitor "
                    "(PVE 8 and older)")
_RUN = ("sys.argv[0]='-';"
        "exec(compile(s,'<stdin>','exec'),{'__name__':'__main__','__builtins__':__builtins__})")
#: Reads base64(zlib(script)) from stdin and runs it as `python - ARGS` would (any Python).
BOOTSTRAP = ("import base64,sys,zlib;"
             "s=zlib.decompress(base64.b64decode(sys.stdin.buffer.read()));" + _RUN)
#: The same with base85(xz(script)): a sixth smaller; needs the guest Python's lzma module.
BOOTSTRAP_XZ = ("import base64,lzma,sys;"
                "s=lzma.decompress(base64.b85decode(sys.stdin.buffer.read()));" + _RUN)
#: The packings, in the order tried: the first whose text fits the API's input-data is sent.
PACKINGS = (
    (BOOTSTRAP, lambda script: base64.b64encode(zlib.compress(script, 9))),
    (BOOTSTRAP_XZ, lambda script: base64.b85encode(
        lzma.compress(script, preset=9 | lzma.PRESET_EXTREME))),
)


def bootstrap_argv(argv: list[str], script: bytes) -> tuple[list[str], str]:
    """`PYTHON - ARGS` with `script` on stdin -> `PYTHON -c BOOTSTRAP ARGS`, compressed input.

    Used when `script` exceeds the API's 64 KiB `input-data`; raises TransportError when
    argv has no `-` (a script on stdin) to replace or the compressed script is still too big.
    """
    if "-" not in argv:
        raise TransportError("input larger than the API's 64 KiB input-data", kind="error")
    index = argv.index("-")
    sizes = []
    for bootstrap, pack in PACKINGS:
        packed = pack(script).decode("ascii")
        if len(packed) <= API_INPUT_LIMIT:
            return [*argv[:index], "-c", bootstrap, *argv[index + 1:]], packed
        sizes.append(str(len(packed)))
    raise TransportError(
        f"probe too large for the API's 64 KiB input-data even compressed ({', '.join(sizes)})",
        kind="error")


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
                argv, data = bootstrap_argv(argv, input)
            else:
                data = input.decode("utf-8")
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
