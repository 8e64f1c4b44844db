"""kubectl's refusals read into a node's status and reason (`kubectl_failure`), from its texts."""

from __future__ import annotations

import pytest

from fleetcheck.transport.interface import CommandResult
from fleetcheck.transport.kubectl import kubectl_failure, without_exit_trailer


def result(stderr: str, code: int = 1) -> CommandResult:
    return CommandResult(code, b"", stderr.encode())


@pytest.mark.parametrize(
    ("stderr", "code", "expected"),
    [
        ('Error from server (NotFound): pods "trainer-0" not found', 1,
         ("error", 'pod training/trainer-0 not found (kubectl: Error from server (NotFound): '
                   'pods "trainer-0" not found)')),
        ("error: cannot exec into a container in a completed pod; current phase is Failed", 1,
         ("skipped", "pod Failed")),
        ('error: unable to upgrade connection: container not found ("main")', 1,
         ("error", 'container main not found in pod training/trainer-0 (kubectl: error: unable '
                   'to upgrade connection: container not found ("main"))')),
        ("kubectl: not found", 127,
         ("error", "kubectl not found on the machine that reaches the cluster")),
        ("E1202 01:40:10.345295 14905 memcache.go:265] couldn't get current server API group "
         "list\nUnable to connect to the server: dial tcp 10.0.0.1:6443: i/o timeout", 1,
         ("unreachable", "Kubernetes API unreachable (kubectl: Unable to connect to the "
                         "server: dial tcp 10.0.0.1:6443: i/o timeout)")),
        ("command terminated with exit code 3", 3, None),
    ],
)
def test_kubectl_texts(stderr: str, code: int, expected: tuple[str, str] | None) -> None:
    assert kubectl_failure(result(stderr, code), "pod training/trainer-0") == expected


@pytest.mark.parametrize(("stderr", "code", "left"), [
    # kubectl's line after the pod's command exited N: taken off, the command's own stays.
    (b"SyntaxError: boom\ncommand terminated with exit code 1\n", 1, b"SyntaxError: boom\n"),
    (b"command terminated with exit code 3\n", 3, b""),
    # Another code than the result's, a line the command itself ended with, or success: kept.
    (b"x\ncommand terminated with exit code 2\n", 1,
     b"x\ncommand terminated with exit code 2\n"),
    (b"my command terminated with exit code 1\n", 1, b"my command terminated with exit code 1\n"),
    (b"command terminated with exit code 0\n", 0, b"command terminated with exit code 0\n"),
])
def test_kubectls_exit_line_is_not_the_commands(stderr: bytes, code: int, left: bytes) -> None:
    assert without_exit_trailer(CommandResult(code, b"", stderr)).stderr == left
