"""The check catalogue on the host: titles and report columns of the probe's checks, whose ids,
causal order, vendors, labels and fixes come from the probe's cause records
(fleetcheck/probe/parts/catalogue.py, the module the probe is built from).

Ids marked `catalogue=True` come from the failure catalogue (docs/checks.md lists them with
their error texts); the others are fleetcheck's own checks around them.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any

from fleetcheck.probe.parts.catalogue import CAUSES, CAUSES_BY_ID, cause_label, fill_fix


@dataclass(frozen=True)
class CheckInfo:
    id: str
    title: str
    column: str
    catalogue: bool = True
    #: "nvidia" or "amd" for a check of one vendor's stack only (the other's documents leave it
    #: out); None for the checks every GPU node's document holds.
    vendor: str | None = None
    #: The title on an AMD node, where the shared check answers for HIP (None: `title`).
    amd_title: str | None = None


#: How each check is shown (title, report column; whether it is a catalogue row, the AMD
#: title); the ids, their causal order and vendors come from the cause records.
_SHOWN: dict[str, tuple[str, str, bool, str | None]] = {
    "gpu_present": ("NVIDIA GPU present", "gpus", False, "AMD GPU present"),
    "dev_nodes_missing": ("/dev/nvidia* nodes usable", "gpus", True,
                          "/dev/kfd and /dev/dri render nodes usable"),
    "cgroup_devices_revoked": ("GPU access not revoked under the container", "gpus", True, None),
    "fabric_manager_not_ready": ("NVSwitch fabric ready (cuInit not 802)", "driver", True, None),
    "cuda_compat_on_unsupported_gpu": ("no forward-compat libcuda on unsupported HW", "driver",
                                       True,
                                       None),
    "libcuda_stub_shadowing": ("libcuda is the driver's, not the link stub", "driver", True, None),
    "driver_userspace_mismatch": ("driver libraries match kernel module", "driver", True,
                                  "ROCm userspace works with the amdgpu driver"),
    "zero_active_drivers": ("CUDA driver initialises", "driver", True,
                            "HIP runtime finds the GPUs"),
    "gpu_exclusive_busy": ("GPU not held exclusively by another process", "driver", True, None),
    "driver_too_old": ("driver new enough for torch's CUDA", "driver", True, None),
    "torch_cuda": ("PyTorch sees the GPUs", "torch", False, "PyTorch (ROCm build) sees the GPUs"),
    "torch_lacks_arch": ("PyTorch built for this GPU", "torch", True,
                         "PyTorch built for this gfx arch"),
    "gpu_arch_unsupported": ("GPU capability >= 7.0 (Triton, inductor)", "gpus", False,
                             "gfx arch supported by Triton's AMD backend"),
    "triton_installed": ("Triton installed (one distribution)", "triton", False, None),
    "triton_2x": ("Triton 3.x", "triton", True, None),
    "triton_backends": ("Triton selects one backend (entry points, active drivers)", "triton", True,
                        None),
    "cc_env_invalid": ("$CC points at a compiler", "compiler", True, None),
    "no_c_compiler": ("C compiler (CC, gcc or clang)", "compiler", True, None),
    "no_linker": ("linker (ld)", "compiler", True, None),
    "libc_headers_missing": ("libc headers", "headers", True, None),
    "python_headers_missing": ("Python.h for the interpreter", "headers", True, None),
    "ldconfig_binary_missing": ("/sbin/ldconfig present", "libcuda", True, None),
    "libcuda_not_in_ldcache": ("libcuda.so.1 found as Triton finds it", "libcuda", True, None),
    "ldcache_stale_libcuda_entry": ("ldconfig's libcuda.so.1 exists here", "libcuda", True, None),
    "libcuda_unversioned_missing": ("libcuda.so for Triton < 3.6", "libcuda", True, None),
    "libhip_path_invalid": ("TRITON_LIBHIP_PATH names a libamdhip64.so (AMD)", "libcuda", True,
                            None),
    "libamdhip64_not_found": ("libamdhip64.so found as Triton finds it (AMD)", "libcuda", True,
                              None),
    "libamdhip64_other_rocm": ("libamdhip64 of torch's ROCm (AMD)", "libcuda", True, None),
    "cache_dir_unwritable": ("Triton cache writable", "cache", True, None),
    "cache_dir_noexec": ("Triton cache on an exec mount", "cache", True, None),
    "cache_on_network_fs": ("Triton cache node-local (not NFS/Lustre/FUSE)", "cache", True, None),
    "cache_dir_full": ("Triton cache has space for a build", "cache", False, None),
    "tmp_dir_unusable": ("temp dir usable for Triton's build", "cache", False, None),
    "ptxas_missing": ("bundled ptxas", "triton", True, None),
    "ptxas_override_unparsed": ("TRITON_PTXAS_PATH usable", "triton", True, None),
    "triton_too_old_for_gpu": ("Triton's ptxas knows this GPU", "triton", True, None),
    "driver_too_old_for_bundled_ptxas": ("driver loads the cubins of Triton's ptxas", "driver",
                                         True,
                                         None),
    "triton_target": ("get_current_target() in a fresh cache", "verdict", False, None),
    "triton_own_path": ("get_current_target() in the workload's own dirs", "verdict", False, None),
    "stale_cache_masks_compiler": ("works without relying on a warm cache", "cache", True, None),
    "triton_kernel": ("JIT kernel runs on every GPU (--deep)", "verdict", False, None),
    "blackwell_no_allocator": ("FLA registers an allocator on Blackwell", "fla", True, None),
    "fla_fallback_hidden": ("flash-linear-attention on the GPU", "fla", True, None),
    "workload_env": ("no variable moves or slows the kernels", "triton", False, None),
    "inductor_ready": ("torch.compile's own path (user, cache dir)", "triton", False, None),
    "torch_install_broken": ("torch's installed files complete", "torch", True, None),
    "triton_install_broken": ("Triton's installed files complete (RECORD, backend)",
                              "triton", True, None),
    "cache_entry_foreign_owner": ("Triton cache entries not another user's", "cache", True, None),
    "cache_entry_unreadable": ("Triton cache entries readable", "cache", True, None),
    "cache_entry_corrupt": ("Triton cache entries intact", "cache", True, None),
    # The GPUs' state before a job (fleetcheck/gpustate.py: the playbook decides whether each
    # fails or warns: max_gpu_memory_used, foreign_processes, memory_health, min_gpus).
    "gpu_memory_in_use": ("GPU memory free (not held by another process)", "gpu_memory", True,
                          None),
    "gpu_foreign_processes": ("no other process on the GPUs", "gpu_memory", True, None),
    "gpu_memory_health": ("no pending or failed GPU memory repair", "gpus", True, None),
    "gpu_missing_for_cuda": ("CUDA opens every GPU the driver lists", "gpus", True, None),
    "gpu_persistence_mode": ("persistence mode on", "gpus", True, None),
    "gpu_xid_events": ("no critical Xid event in the kernel log (last hour)", "gpus", True,
                       None),
}

#: Every check the probe emits, in causal order: the first failing one is the root cause.
CHECKS: tuple[CheckInfo, ...] = tuple(
    CheckInfo(cause.id, *_SHOWN[cause.id][:3], vendor=cause.vendor,
              amd_title=_SHOWN[cause.id][3])
    for cause in CAUSES if cause.check)

CHECKS_BY_ID: dict[str, CheckInfo] = {info.id: info for info in CHECKS}


def check_title(check_id: str, facts: object = None) -> str:
    """A check's title for a node: its AMD wording on an AMD node (facts.gpu_vendor "amd")."""
    info = CHECKS_BY_ID.get(check_id)
    if info is None:
        return check_id
    amd = isinstance(facts, Mapping) and facts.get("gpu_vendor") == "amd"
    return info.amd_title if amd and info.amd_title else info.title


def vendor_checks(vendor: str) -> tuple[CheckInfo, ...]:
    """The checks a node of `vendor`'s GPUs reports ("nvidia" for a node without a GPU too)."""
    return tuple(info for info in CHECKS if info.vendor in (None, vendor))

#: Report columns in display order, with their headings.
COLUMNS: tuple[tuple[str, str], ...] = (
    ("gpus", "GPUs"),
    # Memory in use on the GPUs: used/total, or `held` and by what (facts.gpu_state).
    ("gpu_memory", "GPU mem"),
    ("driver", "Driver"),
    ("torch", "CUDA/torch"),
    ("triton", "Triton"),
    ("compiler", "Compiler"),
    ("headers", "Headers"),
    ("libcuda", "libcuda"),
    ("cache", "Cache"),
    ("fla", "FLA"),
    # What each installed framework will do (facts.frameworks): fed by no check of its own.
    ("frameworks", "Frameworks"),
)


def causal_rank(check_id: str) -> int:
    """Position in causal order; unknown ids sort last."""
    for index, info in enumerate(CHECKS):
        if info.id == check_id:
            return index
    return len(CHECKS)


def _section(facts: Mapping[str, Any], key: str) -> Mapping[str, Any]:
    value = facts.get(key)
    return value if isinstance(value, Mapping) else {}


def node_fix_values(facts: object) -> dict[str, str]:
    """The values a cause's fix is filled with, from a node's facts (the probe's own names)."""
    if not isinstance(facts, Mapping):
        return {}
    python, os_info, triton, torch = (_section(facts, key) for key in (
        "python", "os", "triton", "torch"))
    executable = str(python.get("executable") or "python3")
    version = ".".join(str(python.get("version") or "3").split(".")[:2])
    rhel = str(os_info.get("id") or "") in ("rhel", "centos", "rocky", "almalinux", "fedora",
                                            "ol", "amzn")
    return {"python": executable, "pip": f"{executable} -m pip",
            "install": "dnf install -y" if rhel else "apt-get install -y",
            "pkg_cc": f"gcc glibc-devel python{version}-devel" if rhel
            else f"gcc libc6-dev python{version}-dev",
            "pkg_libc": "glibc-devel" if rhel else "libc6-dev",
            "pkg_python": f"python{version}-devel" if rhel else f"python{version}-dev",
            "triton": str(triton.get("version") or ""), "torch": str(torch.get("version") or ""),
            "cache_dir": str(facts.get("triton_cache_dir") or "")}


def cause_fix(cause_id: str | None, facts: object = None) -> str:
    """'label: fix' of a cause from its record, filled with the node's values ('' for none)."""
    if not cause_id or cause_id not in CAUSES_BY_ID:
        return ""
    vendor = facts.get("gpu_vendor") if isinstance(facts, Mapping) else None
    return f"{cause_label(cause_id, vendor)}: {fill_fix(cause_id, node_fix_values(facts))}"


#: Where docs/checks.md holds the table of causes generated from the records.
CAUSES_TABLE_START = "<!-- causes: generated from fleetcheck/probe/parts/catalogue.py -->"
CAUSES_TABLE_END = "<!-- end of causes -->"


def causes_table() -> str:
    """docs/checks.md's table of causes, one row per record (a test pins the file to it)."""
    def cell(text: str) -> str:
        return text.replace("|", "\\|")

    rows = [CAUSES_TABLE_START, "",
            "| cause | label | named from | fix (filled with the node's values) "
            "| `fleetcheck fix` |",
            "|---|---|---|---|---|"]
    for cause in CAUSES:
        named = ["its check"] if cause.check else []
        named += [f"`{cell(text)}`" for text in cause.texts]
        named += [f"errno {name}" for name in cause.errnos]
        source = "; ".join(named) or "its object or limit"
        rows.append(f"| `{cause.id}` | {cell(cause.label)} | {source} | {cell(cause.fix)} "
                    f"| {cause.repair or 'printed'} |")
    return "\n".join([*rows, "", CAUSES_TABLE_END])
