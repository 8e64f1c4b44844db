"""The workload's own path: its cache and temp dir judged where it runs, never a false `gpu`.

A real full file system (tmpfs in a private mount namespace) under the workload's Triton cache
or its TMPDIR, while the probe's own fresh cache works: the issue's headline case. The probe
builds in throw-away subdirectories of those dirs and leaves nothing behind.
"""

from __future__ import annotations

import os
import shutil
import subprocess
from pathlib import Path
from typing import Any

import pytest

from tests.nodeenv import make_node, private_tmpfs_prefix, run_probe


def checks(doc: dict[str, Any]) -> dict[str, dict[str, Any]]:
    return {check["id"]: check for check in doc["checks"]}


def leftovers(*places: Path) -> list[str]:
    """Anything the probe's throw-away subdirectories left in these dirs."""
    found = []
    for place in places:
        if place.is_dir():
            found += [str(p) for p in place.iterdir() if p.name.startswith(".fleetcheck-probe")]
    return found


def full_prefix(where: Path, free_kib: int = 0) -> list[str]:
    prefix = private_tmpfs_prefix(where, free_kib)
    if prefix is None:
        pytest.skip("cannot mount a tmpfs in a private mount namespace here (unshare -m)")
    return prefix


def test_a_full_workload_cache_is_never_gpu(tmp_path: Path) -> None:
    full = tmp_path / "full"
    node = make_node(tmp_path / "node", fla="0.6.0", env={"TRITON_CACHE_DIR": str(full / "cache")})
    rc, doc, stderr = run_probe(node, prefix=full_prefix(full))
    by_id = checks(doc)
    assert (rc, doc["triton"]["verdict"], doc["triton"]["cause"]) == (1, "cpu-fallback",
                                                                      "cache_dir_full")
    # The fresh-cache attempt is made where the workload's own fresh cache would be (beside
    # its entries): it fails there too, naming the same full cache, never the probe's dirs.
    assert by_id["triton_target"]["status"] == "fail"
    assert by_id["triton_target"]["evidence"]["matches"] == "cache_dir_full"
    assert by_id["triton_own_path"]["status"] == "fail"
    assert by_id["triton_own_path"]["evidence"]["matches"] == "cache_dir_full"
    assert by_id["cache_dir_full"]["summary"].startswith(
        f"Triton cache {full / 'cache'} is full: the workload's own build fails (OSError: "
        "[Errno 28] No space left on device)")
    # Which dir the bare OSError came from: the same write, done again, fails there.
    assert by_id["triton_own_path"]["evidence"]["reproduced"]["errno"] == "ENOSPC"
    assert doc["facts"]["frameworks"]["fla"]["outcome"] == "cpu-fallback"
    assert "free space" in doc["triton"]["fix"]
    assert stderr == ""


def test_a_full_workload_tmpdir_is_named_from_the_compilers_message(tmp_path: Path) -> None:
    full = tmp_path / "full"
    node = make_node(tmp_path / "node", env={"TMPDIR": str(full)})
    rc, doc, _ = run_probe(node, prefix=full_prefix(full))
    by_id = checks(doc)
    assert (rc, doc["triton"]["cause"]) == (1, "tmp_dir_unusable")
    own = by_id["triton_own_path"]["evidence"]
    # gcc's own words, read from its stderr (Triton sends only its stdout away).
    assert "No space left on device" in own["message"]
    assert own["message"] in own["compiler_stderr"]
    assert own["compiler_argv"][0] == str(node.bindir / "gcc")
    assert by_id["tmp_dir_unusable"]["status"] == "fail"
    assert by_id["triton_target"]["status"] == "pass"


def test_little_space_left_in_the_cache_is_a_warning(tmp_path: Path) -> None:
    full = tmp_path / "full"
    node = make_node(tmp_path / "node", env={"TRITON_CACHE_DIR": str(full / "cache")})
    rc, doc, _ = run_probe(node, prefix=full_prefix(full, free_kib=128))
    by_id = checks(doc)
    assert (rc, doc["status"], doc["triton"]["verdict"]) == (0, "warn", "gpu")
    assert by_id["cache_dir_full"]["status"] == "warn"
    assert by_id["triton_own_path"]["status"] == "pass"


def test_the_probe_leaves_nothing_in_the_workloads_dirs(tmp_path: Path) -> None:
    node = make_node(tmp_path / "node", fla="0.6.0")
    tmpdir = tmp_path / "job-tmp"
    tmpdir.mkdir()
    node.env["TMPDIR"] = str(tmpdir)
    assert not (node.home / ".triton").exists()
    assert not (node.home / ".nv").exists()
    rc, doc, _ = run_probe(node)
    own = checks(doc)["triton_own_path"]
    assert (rc, own["status"]) == (0, "pass")
    assert own["evidence"]["cache_dir"] == str(node.home / ".triton" / "cache")
    assert own["evidence"]["gcc_tmp"] == str(tmpdir)
    # The cache dir it had to create, as Triton would, is gone again, and so is the one the
    # CUDA driver made at cuInit (~/.nv/ComputeCache); the temp dir is empty.
    assert not (node.home / ".triton").exists()
    assert not (node.home / ".nv").exists()
    assert list(tmpdir.iterdir()) == []
    assert leftovers(tmpdir) == []
    # /tmp is shared with every probe running on this machine: only this probe's own
    # throw-away name (the last part of its probe_cache) counts there.
    name = Path(own["evidence"]["probe_cache"]).name
    assert name.startswith(".fleetcheck-probe-")
    assert [path for path in leftovers(Path("/tmp")) if Path(path).name == name] == []


def test_an_unusable_tmpdir_python_and_gcc_disagree_on_is_named(tmp_path: Path) -> None:
    node = make_node(tmp_path / "node", env={"TMPDIR": str(tmp_path / "no-such-dir")})
    _, doc, _ = run_probe(node)
    check = checks(doc)["tmp_dir_unusable"]
    # Both tempfile and gcc fall back to /tmp here: a warning that TMPDIR is ignored.
    assert check["status"] == "warn"
    assert check["summary"].startswith(f"TMPDIR={tmp_path / 'no-such-dir'} is not usable")


def unquote(text: str) -> str:
    return text.replace("‘", "'").replace("’", "'")


def wrapper_cc(tmp_path: Path, body: str) -> str:
    """A CC that exists and runs the real gcc, as a site's wrapper would."""
    path = tmp_path / "cc-wrapper"
    path.write_text("#!/bin/sh\n" + body + "\n")
    path.chmod(0o755)
    return str(path)


@pytest.mark.parametrize(("body", "cause", "words"), [
    (f'exec {shutil.which("gcc")} -march=fleetcheck "$@"', "cc_rejects_flags",
     "bad value 'fleetcheck' for '-march=' switch"),
    (f'exec {shutil.which("gcc")} -mfleetcheck "$@"', "cc_rejects_flags",
     "unrecognized command-line option '-mfleetcheck'"),
], ids=["bad-march", "unknown-option"])
def test_a_compiler_that_exists_but_fails_is_named(tmp_path: Path, body: str, cause: str,
                                                   words: str) -> None:
    node = make_node(tmp_path / "node", cc_env=wrapper_cc(tmp_path, body))
    rc, doc, _ = run_probe(node)
    target = checks(doc)["triton_target"]
    assert (rc, doc["triton"]["cause"]) == (1, cause)
    # gcc quotes with ‘’ in the node's UTF-8 locale.
    assert words in unquote(target["evidence"]["message"])
    assert words in unquote(target["summary"])
    assert doc["triton"]["fix"].startswith(
        "the C compiler rejects Triton's flags: set CC to gcc or clang")


def test_a_killed_compiler_is_named(tmp_path: Path) -> None:
    # cc1 killed by the kernel, as under a container's memory limit (SIGKILL from outside).
    gcc = shutil.which("gcc")
    killer = tmp_path / "killed"
    killer.mkdir()
    (killer / "cc1").write_text("#!/bin/sh\nkill -9 $$\n")
    (killer / "cc1").chmod(0o755)
    node = make_node(tmp_path / "node",
                     cc_env=wrapper_cc(tmp_path, f'exec {gcc} -B{killer}/ "$@"'))
    rc, doc, _ = run_probe(node)
    assert (rc, doc["triton"]["cause"]) == (1, "compiler_killed")
    assert "Killed signal terminated program cc1" in checks(doc)["triton_target"]["summary"]


@pytest.mark.parametrize(("env", "status", "verdict"), [
    ({"TRITON_INTERPRET": "1"}, "fail", "cpu-fallback"),
    ({"TRITON_INTERPRET": "On"}, "fail", "cpu-fallback"),
    ({"TRITON_INTERPRET": "0"}, "pass", "gpu"),
    ({"TORCH_COMPILE_DISABLE": "1"}, "warn", "gpu"),
    ({"CUDA_LAUNCH_BLOCKING": "1", "TRITON_ALWAYS_COMPILE": "true"}, "warn", "gpu"),
    ({"VLLM_TARGET_DEVICE": "cpu"}, "pass", "gpu"),  # vLLM is not installed on this node
], ids=["interpret", "interpret-on", "interpret-off", "compile-disabled", "slow",
        "vllm-absent"])
def test_variables_that_move_or_slow_the_kernels(tmp_path: Path, env: dict[str, str],
                                                 status: str, verdict: str) -> None:
    node = make_node(tmp_path / "node", env=env)
    _, doc, _ = run_probe(node)
    check = checks(doc)["workload_env"]
    assert (check["status"], doc["triton"]["verdict"]) == (status, verdict)
    if status == "fail":
        assert doc["triton"]["cause"] == "workload_env"
        assert check["summary"].startswith("TRITON_INTERPRET=")
        assert "on the CPU" in check["summary"]
    for name in env if status != "pass" else ():
        assert name in check["summary"] + check["fix"]


def test_vllm_told_to_run_on_the_cpu_is_a_cause(tmp_path: Path) -> None:
    node = make_node(tmp_path / "node", vllm="0.33.0", env={"VLLM_TARGET_DEVICE": "cpu"})
    _, doc, _ = run_probe(node)
    assert (doc["triton"]["cause"], checks(doc)["workload_env"]["status"]) == (
        "workload_env", "fail")
    assert "vLLM selects its CPU platform" in doc["reason"]


def test_torch_compile_failing_before_triton_is_said(tmp_path: Path) -> None:
    node = make_node(tmp_path / "node", fla="0.6.0",
                     env={"TORCHINDUCTOR_CACHE_DIR": "/proc/fleetcheck-no"})
    rc, doc, _ = run_probe(node)
    check = checks(doc)["inductor_ready"]
    assert (rc, doc["status"], check["status"]) == (1, "fail", "fail")
    # Triton itself runs on the GPU: the verdict stays gpu, the node fails for torch.compile.
    assert doc["triton"]["verdict"] == "gpu"
    assert check["summary"].startswith("torch.compile fails before any kernel: inductor's cache "
                                       "dir /proc/fleetcheck-no: FileNotFoundError")
    inductor = doc["facts"]["frameworks"]["inductor"]
    assert inductor["outcome"] == "fails-before-triton"
    # import fla reaches torch._dynamo, whose import calls inductor's cache_dir() (H200).
    assert doc["facts"]["frameworks"]["fla"]["outcome"] == "import-fails"


def test_fla_meets_the_same_dirs_as_the_workload(tmp_path: Path) -> None:
    # The cache cannot be created (below a regular file): FLA's detection, run after the
    # workload's own attempt, meets the same failure (it used to run in the probe's fresh cache).
    node = make_node(tmp_path / "node", fla="0.6.0", cache="unwritable")
    _, doc, _ = run_probe(node)
    fla = doc["facts"]["frameworks"]["fla"]
    assert (doc["triton"]["cause"], fla["outcome"]) == ("cache_dir_unwritable", "cpu-fallback")
    assert "NotADirectoryError" in fla["detail"]


def test_interpreted_kernels_are_cpu_for_fla_and_inductor(tmp_path: Path) -> None:
    node = make_node(tmp_path / "node", fla="0.6.0", env={"TRITON_INTERPRET": "1"})
    _, doc, _ = run_probe(node)
    frameworks = doc["facts"]["frameworks"]
    assert (frameworks["fla"]["outcome"], frameworks["inductor"]["outcome"]) == ("cpu", "cpu")


@pytest.mark.skipif(os.geteuid() != 0 or not shutil.which("setpriv"),
                    reason="needs root and setpriv to run as a uid without a passwd entry")
def test_a_user_without_a_name_fails_torch_compile(tmp_path: Path) -> None:
    # The job runs as a uid that /etc/passwd does not know and with no USER/LOGNAME: inductor's
    # getpass.getuser() raises (KeyError: 'getpwuid(): uid not found: 4242', seen on the H200).
    root = Path(subprocess.run(["mktemp", "-d", "/tmp/fleetcheck-uid-XXXXXX"], check=True,
                               capture_output=True, text=True).stdout.strip())
    try:
        root.chmod(0o755)
        node = make_node(root / "node")
        subprocess.run(["chown", "-R", "4242:4242", str(root / "node")], check=True)
        env = {k: v for k, v in node.env.items() if k not in ("USER", "LOGNAME")}
        prefix = [str(shutil.which("setpriv")), "--reuid=4242", "--regid=4242",
                  "--clear-groups", str(shutil.which("env")), "-i",
                  *(f"{k}={v}" for k, v in env.items())]
        usable = subprocess.run([*prefix, node.python, "-c", "pass"], capture_output=True,
                                cwd=node.root)
        if usable.returncode != 0:
            pytest.skip("the test interpreter is not usable by another uid here")
        _, doc, _ = run_probe(node, prefix=prefix)
        check = checks(doc)["inductor_ready"]
        assert check["status"] == "fail", check
        assert "getpwuid(): uid not found: 4242" in check["summary"]
        assert "set USER" in check["fix"]
    finally:
        shutil.rmtree(root, ignore_errors=True)
