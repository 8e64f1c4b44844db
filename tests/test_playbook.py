"""Playbook loading: built-ins, the default, and one exact message per kind of mistake."""

from __future__ import annotations

import dataclasses
import filecmp
from pathlib import Path

import pytest

from fleetcheck.judgement.gpustate import GpuPolicy
from fleetcheck.judgement.policy import DEFAULT_POLICY
from fleetcheck.playbook import PlaybookError, builtin_playbooks, load_playbook

REPO = Path(__file__).resolve().parents[1]


def write(tmp_path: Path, text: str, name: str = "pb.yaml") -> str:
    path = tmp_path / name
    path.write_text(text, encoding="utf-8")
    return str(path)


def error_of(tmp_path: Path, text: str) -> str:
    path = write(tmp_path, text)
    with pytest.raises(PlaybookError) as caught:
        load_playbook(path)
    return str(caught.value).replace(path, "FILE")


def test_top_level_playbooks_are_the_packaged_builtins() -> None:
    packaged = REPO / "fleetcheck" / "playbooks"
    user_facing = REPO / "playbooks"
    names = sorted(p.name for p in packaged.glob("*.yaml"))
    assert names == sorted(p.name for p in user_facing.glob("*.yaml"))
    assert names == [f"{name}.yaml" for name in builtin_playbooks()]
    match, mismatch, errors = filecmp.cmpfiles(packaged, user_facing, names, shallow=False)
    assert (match, mismatch, errors) == (names, [], [])


def test_no_playbook_is_the_default_policy_and_default_yaml_says_the_same() -> None:
    assert load_playbook(None) is DEFAULT_POLICY
    assert dataclasses.replace(load_playbook("default"), source="") == DEFAULT_POLICY


def test_pre_training_requires_gpu_deep_and_equal_versions() -> None:
    policy = load_playbook("pre-training")
    assert policy.name == "pre-training"
    assert policy.source == "builtin:pre-training"
    assert policy.deep is True
    assert policy.min_gpus == 1
    assert policy.failing_verdicts == {"cpu-fallback", "no-gpu", "not-installed"}
    assert policy.consistent == ("driver", "cuda", "torch", "triton", "python")
    assert policy.consistent_warn == ("fla", "gpu_model")


def test_gpu_state_keys_of_the_builtins() -> None:
    # What sites' pre-job checkers do: a gate fails a GPU held by another process or waiting
    # for a memory repair; an audit (default, nightly) only warns on the held one.
    assert {name: load_playbook(name).gpu for name in builtin_playbooks()} == {
        "default": GpuPolicy(None, "warn", "fail"),
        "nightly": GpuPolicy(None, "warn", "fail"),
        "pre-training": GpuPolicy(0.05, "fail", "fail"),
        "quick": GpuPolicy(0.05, "fail", "fail"),
    }


def test_gpu_state_keys_from_a_file(tmp_path: Path) -> None:
    policy = load_playbook(write(tmp_path, "max_gpu_memory_used: 0.5\nforeign_processes: "
                                           "ignore\nmemory_health: warn\n"))
    assert policy.gpu == GpuPolicy(0.5, "ignore", "warn")
    assert load_playbook(write(tmp_path, "max_gpu_memory_used: null\n")).gpu == GpuPolicy()
    assert load_playbook(write(tmp_path, "max_gpu_memory_used: 0\n")).gpu.max_memory_used == 0


def test_nightly_runs_everything_and_only_warns_on_differences() -> None:
    policy = load_playbook("nightly")
    assert (policy.deep, policy.consistent, policy.failing_verdicts) == (
        True, (), frozenset({"cpu-fallback"}))
    assert "driver" in policy.consistent_warn


def test_a_file_path_wins_and_its_stem_names_the_policy(tmp_path: Path) -> None:
    path = write(tmp_path, "min_gpus: 8\nchecks:\n  warn_only: [fla_fallback_hidden]\n",
                 "eight.yaml")
    policy = load_playbook(path)
    assert (policy.name, policy.min_gpus, policy.warn_only, policy.source) == (
        "eight", 8, frozenset({"fla_fallback_hidden"}), path)
    assert policy.failing_verdicts == frozenset({"cpu-fallback"})


def test_name_key_overrides_the_stem(tmp_path: Path) -> None:
    assert load_playbook(write(tmp_path, "name: big-run\n")).name == "big-run"


@pytest.mark.parametrize(
    ("text", "message"),
    [
        ("deep: true\nmingpus: 8\n",
         "FILE:2: mingpus: unknown key (did you mean 'min_gpus'?)"),
        ("min_gpus: eight\n", "FILE:1: min_gpus: must be an integer, got 'eight'"),
        ("min_gpus: -1\n", "FILE:1: min_gpus: must be at least 0, got -1"),
        ("min_gpus: true\n", "FILE:1: min_gpus: must be an integer, got true"),
        ("deep: yes please\n", "FILE:1: deep: must be true or false, got 'yes please'"),
        ("checks:\n  warn_only:\n    - fla_fallback_hidden\n    - no_c_compilr\n",
         "FILE:4: checks.warn_only[1]: unknown check id 'no_c_compilr' "
         "(did you mean 'no_c_compiler'?)"),
        ("checks:\n  ignore: no_linker\n",
         "FILE:2: checks.ignore: must be a list of check ids, got 'no_linker'"),
        ("checks:\n  warn-only: []\n",
         "FILE:2: checks.warn-only: unknown key (did you mean 'warn_only'?)"),
        ("consistency:\n  fail: [driver, torhc]\n",
         "FILE:2: consistency.fail[1]: unknown fact 'torhc' (did you mean 'torch'?)"),
        ("consistency:\n  fail: [driver]\n  warn: [driver]\n",
         "FILE:3: consistency.warn: 'driver' is also listed under consistency.fail"),
        ("consistency: [driver]\n",
         "FILE:1: consistency: must be a mapping, got a list"),
        ("triton: [gpu, cpu-fallback]\n",
         "FILE:1: triton[1]: cpu-fallback cannot be accepted: "
         "it is the failure fleetcheck exists to catch"),
        ("triton: [gpu, unknown]\n",
         "FILE:1: triton[1]: unknown Triton verdict 'unknown'"),
        ("triton: [GPU]\n",
         "FILE:1: triton[0]: unknown Triton verdict 'GPU' (did you mean 'gpu'?)"),
        ("deep: true\ndeep: false\n",
         "FILE:2: deep: duplicate key 'deep' (first defined at line 1)"),
        ("deep: [true\n",
         "FILE:2:1: YAML syntax error: expected ',' or ']', but got '<stream end>'"),
        ("- deep\n", "FILE:1: must be a mapping, got a list"),
        ("", "FILE: empty playbook (expected a mapping of settings such as triton, min_gpus "
             "or checks)"),
        ("description: ''\n", "FILE:1: description: must not be empty"),
        ("name: 3\n", "FILE:1: name: must be a string, got 3"),
        ("max_gpu_memory_used: 5%\n",
         "FILE:1: max_gpu_memory_used: must be a share of each GPU's memory between 0 and 1 "
         "(0.05 for 5 %), or null, got '5%'"),
        ("max_gpu_memory_used: 5\n",
         "FILE:1: max_gpu_memory_used: must be a share of each GPU's memory between 0 and 1 "
         "(0.05 for 5 %), or null, got 5"),
        ("max_gpu_memory_used: true\n",
         "FILE:1: max_gpu_memory_used: must be a share of each GPU's memory between 0 and 1 "
         "(0.05 for 5 %), or null, got true"),
        ("foreign_processes: kill\n",
         "FILE:1: foreign_processes: must be one of fail, warn, ignore, got 'kill'"),
        ("memory_health: ignore\n",
         "FILE:1: memory_health: must be one of fail, warn, got 'ignore'"),
        ("foreign_process: fail\n",
         "FILE:1: foreign_process: unknown key (did you mean 'foreign_processes'?)"),
    ],
)
def test_mistakes_name_file_line_and_key(tmp_path: Path, text: str, message: str) -> None:
    assert error_of(tmp_path, text) == message


def test_unknown_bare_name_lists_the_builtins() -> None:
    with pytest.raises(PlaybookError) as caught:
        load_playbook("pre-trainig")
    assert str(caught.value) == (
        "pre-trainig: no such playbook file, nor a built-in playbook of that name "
        "(did you mean 'pre-training'?) (built-ins: default, nightly, pre-training, quick)"
    )


def test_missing_file_path(tmp_path: Path) -> None:
    missing = str(tmp_path / "nope.yaml")
    with pytest.raises(PlaybookError) as caught:
        load_playbook(missing)
    assert str(caught.value) == f"{missing}: playbook file not found"


def test_not_utf8(tmp_path: Path) -> None:
    path = tmp_path / "bin.yaml"
    path.write_bytes(b"deep: \xff\n")
    with pytest.raises(PlaybookError) as caught:
        load_playbook(str(path))
    assert str(caught.value) == f"{path}: not a UTF-8 text file"


def test_python_tags_are_refused_not_run(tmp_path: Path) -> None:
    message = error_of(tmp_path, "name: !!python/object/apply:os.system ['true']\n")
    assert message == ("FILE:1: name: YAML tag !!python/object/apply:os.system is not allowed "
                       "(plain data only)")
