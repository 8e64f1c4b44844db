"""Checks of an AMD node: KFD and render nodes, the HIP runtime Triton loads, torch's ROCm, gfx.

The shared check ids (gpu_present, dev_nodes_missing, driver_userspace_mismatch,
zero_active_drivers, torch_cuda, torch_lacks_arch, gpu_arch_unsupported) are answered here as
`check_<id>_hip` on an AMD node; the HIP-only rows (libamdhip64, TRITON_LIBHIP_PATH) are plain
`check_<id>` methods. Texts come from Triton's third_party/amd/backend/driver.py and driver.c.
"""

import os
import re

from fleetcheck.probe.parts.checks.torch import TorchChecks
from fleetcheck.probe.parts.core.base import first_line, host_path, version_tuple
from fleetcheck.probe.parts.facts.amd import HIP_ERRORS, TRITON_HIP_ARCHS, gfx_from_override
from fleetcheck.probe.parts.facts.nvidia import nodes_summary, open_result

#: The environment variables that hide AMD GPUs from HIP (ROCr's, HIP's, and CUDA's alias).
HIP_VISIBILITY = ("ROCR_VISIBLE_DEVICES", "HIP_VISIBLE_DEVICES", "CUDA_VISIBLE_DEVICES")


def base_gfx(arch):
    """'gfx90a' from 'gfx90a:sramecc+:xnack-' (torch's arch list and HIP's gcnArchName)."""
    return str(arch or "").split(":")[0]


def node_group(path):
    """The name of the group owning a device node ('render', 'video'), else its gid."""
    try:
        gid = os.stat(path).st_gid
    except OSError:
        return None
    try:
        import grp
        return grp.getgrgid(gid).gr_name
    except (ImportError, KeyError):
        return str(gid)


class HipChecks(TorchChecks):
    """The AMD GPU and Triton HIP backend checks."""

    def hip_gfx(self):
        """The gfx of each GPU as the runtime reports it: HSA_OVERRIDE_GFX_VERSION wins."""
        real = sorted({g["gfx"] for g in self.gpus if g.get("gfx")})
        override = gfx_from_override(self.env.get("HSA_OVERRIDE_GFX_VERSION"))
        return real, ([override] if override else real), override

    def check_gpu_present_hip(self):
        hip = self.hip_info
        evidence = {"kfd_gpus": self.amd["kfd_gpus"], "dev_nodes": self.amd["dev_nodes"],
                    "amdgpu": self.amd["amdgpu"], "libamdhip64": hip.get("path"),
                    "hip_device_count": hip.get("count"), "rocminfo": self.rocminfo_info}
        if not self.hardware_evidence():
            return ("warn", "no AMD GPU on this node (/dev/kfd without a KFD GPU node)", "",
                    evidence)
        names: dict = {}
        for gpu in self.gpus:
            label = gpu.get("name") or "AMD GPU"
            if gpu.get("gfx") and gpu["gfx"] not in label:
                label += " (%s)" % gpu["gfx"]
            names[label] = names.get(label, 0) + 1
        return ("pass", ", ".join("%d× %s" % (n, label) for label, n in names.items()), "",
                evidence)

    def check_dev_nodes_missing_hip(self):
        minors = [g["render_minor"] for g in self.amd["kfd_gpus"]
                  if isinstance(g.get("render_minor"), int) and g["render_minor"] > 0]
        if not minors:
            minors = sorted(int(n[len("dri/renderD"):]) for n in self.amd["dev_nodes"]
                            if re.match(r"^dri/renderD\d+$", n))
        expected = ["kfd"] + ["dri/renderD%d" % minor for minor in minors]
        results = {name: open_result(host_path("/dev/" + name)) for name in expected}
        bad = {name: code for name, code in results.items() if code != "ok"}
        container = self.facts.get("container")
        evidence = {"open": results, "container": container}
        if not bad:
            return ("pass", "%d device nodes open read-write" % len(results), "", evidence)
        kfd_major = re.search(r"^\s*(\d+)\s+kfd\s*$", self.proc_devices, re.M)
        kfd = kfd_major.group(1) if kfd_major else "<kfd major>"
        evidence["kfd_major"] = kfd_major.group(1) if kfd_major else None
        name, code = sorted(bad.items(), key=lambda item: expected.index(item[0]))[0]
        if code == "ENOENT":
            what = "missing (not passed through)"
            fix = ("pass /dev/kfd and /dev/dri into the container: lxc.mount.entry: /dev/kfd "
                   "dev/kfd none bind,optional,create=file and lxc.mount.entry: /dev/dri dev/dri "
                   "none bind,optional,create=dir, with lxc.cgroup2.devices.allow: c %s:* rwm "
                   "and c 226:* rwm, in /etc/pve/lxc/<vmid>.conf (Docker: --device=/dev/kfd "
                   "--device=/dev/dri); on a host, load amdgpu (modprobe amdgpu)" % kfd)
        elif code == "EPERM":
            what = "blocked by the device cgroup (EPERM)"
            fix = ("allow the majors in the container config: lxc.cgroup2.devices.allow: "
                   "c %s:* rwm (kfd) and c 226:* rwm (dri), majors from /proc/devices on the "
                   "host" % kfd)
        elif code == "EACCES":
            group = node_group(host_path("/dev/" + name)) or "render"
            evidence["group"] = group
            what = "not permitted by its file mode (EACCES; group %s)" % group
            fix = ("add the workload user to the node's groups: usermod -aG render,video <user> "
                   "(the node's group is %s); in an unprivileged LXC map the host's render gid "
                   "(lxc.idmap) or set the node's mode to 0666" % group)
        else:
            what = "unusable (%s)" % code
            fix = "check that amdgpu is loaded and the node is passed through"
        summary = nodes_summary(name, what, bad, len(results), "no /dev/kfd or render nodes, "
                                "though KFD lists %d GPU(s)" % len(self.amd["kfd_gpus"]), container)
        evidence["hip_device_count"] = self.hip_info.get("count")
        return ("fail", summary, fix, evidence)

    def hip_count_error(self):
        """(rc, name) of hipGetDeviceCount, or (None, None) when the runtime was not reached."""
        rc = self.hip_info.get("count_rc")
        if not isinstance(rc, int):
            return None, None
        return rc, self.hip_info.get("count_name") or HIP_ERRORS.get(rc) or "hipError"

    def check_driver_userspace_mismatch_hip(self):
        rc, name = self.hip_count_error()
        amdgpu = self.amd["amdgpu"]
        runtime = self.facts["driver"]["userspace"]
        evidence = {"amdgpu_loaded": amdgpu["loaded"], "amdgpu_version": amdgpu["version"],
                    "hip_runtime": runtime, "libamdhip64": self.hip_info.get("path"),
                    "hipGetDeviceCount": rc, "error_name": name}
        if rc is None:
            return ("skip", "HIP runtime not reached (see libamdhip64_not_found)", "", evidence)
        if rc == 35:
            return ("fail", "hipGetDeviceCount returns 35 %s: the ROCm userspace (HIP %s) does "
                    "not work with this amdgpu kernel driver (%s)" % (
                        name, runtime or "?", amdgpu["version"] or "in-tree"),
                    "install the amdgpu driver (amdgpu-dkms) of the ROCm release the container's "
                    "userspace comes from, on the host; or use a ROCm userspace that supports "
                    "this kernel driver", evidence)
        return ("pass", "amdgpu %s, HIP runtime %s (hipGetDeviceCount: %s)" % (
            amdgpu["version"] or "in-tree", runtime or "?", name), "", evidence)

    def check_zero_active_drivers_hip(self):
        hip = self.hip_info
        evidence = {key: hip.get(key) for key in ("path", "how", "load_error", "count_rc",
                                                   "count_name", "count", "error")}
        evidence.update({var: self.env.get(var) for var in HIP_VISIBILITY})
        if hip.get("timed_out"):
            return ("error", hip["error"], "", evidence)
        if not hip.get("path"):
            if hip.get("row"):
                return ("skip", "libamdhip64 not located (see %s)" % hip["row"], "", evidence)
            return ("error", "HIP probe failed: %s" % (hip.get("error") or "no answer"), "",
                    evidence)
        if hip.get("load_error"):
            return ("skip", "libamdhip64 does not load (see libamdhip64_not_found)", "",
                    evidence)
        rc, name = self.hip_count_error()
        if rc == 35:
            return ("skip", "hipGetDeviceCount: 35 %s (see driver_userspace_mismatch)" % name, "",
                    evidence)
        if rc:
            return ("fail", "hipGetDeviceCount failed: %s (%s), though KFD lists %d GPU(s)" % (
                name, rc, len(self.amd["kfd_gpus"])),
                "fix the driver layer: /dev/kfd and render nodes, amdgpu, "
                "ROCR_VISIBLE_DEVICES/HIP_VISIBLE_DEVICES; see the checks above", evidence)
        if not hip.get("count"):
            hidden = ["%s=%r" % (v, self.env[v]) for v in HIP_VISIBILITY if v in self.env]
            return ("fail", "HIP runtime sees 0 devices" + (
                " (%s hides them)" % ", ".join(hidden) if hidden else ""),
                "unset or fix " + "/".join(v.split("=")[0] for v in hidden) if hidden
                else "pass the GPUs through", evidence)
        return ("pass", "HIP runtime %s sees %d device(s)" % (
            self.facts["driver"]["userspace"] or "?", hip["count"]), "", evidence)

    def check_torch_cuda_hip(self):
        result, torch, evidence = self.torch_imported("hip")
        if result:
            return result
        if not torch.get("hip"):
            kind = "CUDA" if torch.get("cuda") else "CPU-only"
            return ("fail", "%s PyTorch build on an AMD node (torch %s, torch.version.hip is "
                    "None)" % (kind, torch.get("version")),
                    "install a ROCm build of torch, e.g. %s -m pip install torch --index-url "
                    "https://download.pytorch.org/whl/rocm6.4" % self.workload_python, evidence)
        if not torch.get("cuda_available"):
            warning = first_line((torch.get("warnings") or [""])[0])
            return ("fail", "torch.cuda.is_available() is False (ROCm %s)" % torch["hip"] + (
                ": " + warning if warning else ""),
                "fix the driver layer (/dev/kfd, render nodes, amdgpu, HIP_VISIBLE_DEVICES)",
                evidence)
        count = torch.get("device_count") or 0
        if count < len(self.gpus):
            return ("warn", "torch sees %d of %d GPUs" % (count, len(self.gpus)), "", evidence)
        return ("pass", "torch %s (ROCm %s) sees %d GPU(s)" % (
            torch.get("version"), torch.get("hip"), count), "", evidence)

    def check_torch_lacks_arch_hip(self):
        torch = self.torch_info()
        arch_list = sorted({base_gfx(a) for a in torch.get("arch_list") or []})
        real, effective, override = self.hip_gfx()
        evidence = {"arch_list": torch.get("arch_list") or [], "gpu_gfx": real,
                    "HSA_OVERRIDE_GFX_VERSION": self.env.get("HSA_OVERRIDE_GFX_VERSION")}
        if not self.stages.get("meta", {}).get("torch_dir"):
            return ("skip", "PyTorch not installed", "", evidence)
        if not arch_list or not real:
            return ("skip", "arch list or gfx arch unknown", "", evidence)
        missing = [gfx for gfx in effective if gfx not in arch_list]
        if missing:
            summary = "torch %s (ROCm %s) has no kernels for %s (built for %s)" % (
                torch.get("version"), torch.get("hip"), ", ".join(missing), " ".join(arch_list))
            if override:
                summary += "; HSA_OVERRIDE_GFX_VERSION=%s makes the runtime report %s" % (
                    self.env["HSA_OVERRIDE_GFX_VERSION"], override)
            return ("fail", summary, "install a torch ROCm build that includes %s" % (
                ", ".join(missing)) + ("" if override else "; for a consumer GPU of a supported "
                                       "family, HSA_OVERRIDE_GFX_VERSION is the usual (unsupported)"
                                       " workaround"), evidence)
        if override and override not in real:
            return ("warn", "HSA_OVERRIDE_GFX_VERSION=%s: the runtime reports %s for the %s GPU "
                    "(torch's kernels for %s run on another chip)" % (
                        self.env["HSA_OVERRIDE_GFX_VERSION"], override, ", ".join(real),
                        override), "", evidence)
        return ("pass", "torch built for %s" % ", ".join(effective), "", evidence)

    def check_gpu_arch_unsupported_hip(self):
        real, effective, override = self.hip_gfx()
        evidence = {"gpu_gfx": real, "effective_gfx": effective,
                    "triton_hip_archs": list(TRITON_HIP_ARCHS),
                    "HSA_OVERRIDE_GFX_VERSION": self.env.get("HSA_OVERRIDE_GFX_VERSION")}
        if not real:
            return ("skip", "gfx arch unknown (no KFD gfx_target_version)", "", evidence)
        other = [gfx for gfx in effective if gfx not in TRITON_HIP_ARCHS]
        if other:
            return ("warn", "%s%s is not among the architectures Triton's AMD backend supports "
                    "(CDNA2+, RDNA3+): kernels may fail to compile" % (
                        ", ".join(other), " (HSA_OVERRIDE_GFX_VERSION)" if override else ""),
                    "run Triton workloads on gfx90a, gfx942, gfx950, gfx11xx or gfx12xx", evidence)
        return ("pass", "gfx %s" % ", ".join(effective), "", evidence)

    def check_libhip_path_invalid(self):
        value = self.env.get("TRITON_LIBHIP_PATH")
        evidence = {"TRITON_LIBHIP_PATH": value}
        if not value:
            return ("pass", "TRITON_LIBHIP_PATH not set", "", evidence)
        if self.hip_info.get("row") == "libhip_path_invalid":
            evidence["expected_error"] = self.hip_info["error"]
            return ("fail", "TRITON_LIBHIP_PATH %r is not a libamdhip64.so file (Triton raises "
                    "at its first use)" % value,
                    "unset TRITON_LIBHIP_PATH (Triton then uses torch's libamdhip64.so), or set it "
                    "to an existing libamdhip64.so file", evidence)
        return ("pass", "TRITON_LIBHIP_PATH=%s" % value, "", evidence)

    def check_libamdhip64_not_found(self):
        hip = self.hip_info
        evidence = {"search": hip.get("search"), "ldconfig": hip.get("ldconfig"),
                    "path": hip.get("path"), "how": hip.get("how"),
                    "load_error": hip.get("load_error"),
                    "ROCM_PATH": self.env.get("ROCM_PATH"), "HIP_PATH": self.env.get("HIP_PATH"),
                    "LD_LIBRARY_PATH": self.env.get("LD_LIBRARY_PATH")}
        if hip.get("row") == "libhip_path_invalid":
            return ("skip", "not searched (see libhip_path_invalid)", "", evidence)
        if hip.get("row") == "libamdhip64_not_found":
            evidence["expected_error"] = hip["error"]
            return ("fail", "Triton cannot locate libamdhip64.so (%d places tried)" % len(
                hip.get("search") or []),
                "install a ROCm build of torch (it bundles libamdhip64.so), or set ROCM_PATH / "
                "TRITON_LIBHIP_PATH to the ROCm install, and run ldconfig", evidence)
        if hip.get("load_error"):
            evidence["expected_error"] = "RuntimeError: cannot open libamdhip64.so"
            return ("fail", "libamdhip64 %s does not load: %s" % (
                hip.get("path"), first_line(hip["load_error"])),
                "reinstall the ROCm runtime (or torch's ROCm wheel) that provides %s" % (
                    hip.get("path")), evidence)
        if not hip.get("path"):
            return ("error", "HIP probe failed: %s" % (hip.get("error") or "no answer"), "",
                    evidence)
        return ("pass", "libamdhip64 %s (%s)" % (hip["path"], hip.get("how")), "", evidence)

    def check_libamdhip64_other_rocm(self):
        hip = self.hip_info
        runtime = self.facts["driver"]["userspace"]
        torch_hip = (self.facts.get("torch") or {}).get("hip")
        torch_dir = self.stages.get("meta", {}).get("torch_dir")
        bundled = os.path.join(torch_dir, "lib", "libamdhip64.so") if torch_dir else None
        evidence = {"libamdhip64": hip.get("path"), "real": hip.get("real"),
                    "hip_runtime": runtime, "torch_hip": torch_hip,
                    "torch_libamdhip64": bundled if bundled and os.path.exists(bundled) else None}
        if not hip.get("path") or hip.get("load_error"):
            return ("skip", "no libamdhip64 loaded (see libamdhip64_not_found)", "", evidence)
        have = version_tuple(runtime)
        if have and have[0] < 6:
            evidence["expected_error"] = ("RuntimeError: libamdhip64 version %s is not "
                                          "supported! Required major version is >=6." % runtime)
            return ("fail", "libamdhip64 %s is HIP %s: Triton's driver needs major version >= 6"
                    % (hip["path"], runtime),
                    "use ROCm >= 6 (torch's ROCm wheel bundles it): unset TRITON_LIBHIP_PATH or "
                    "point it at torch's libamdhip64.so", evidence)
        if not torch_hip:
            return ("skip", "torch's ROCm version unknown", "", evidence)
        want = version_tuple(torch_hip)[:2]
        if have and want and have[:2] != want:
            return ("fail", "Triton loads libamdhip64 %s (HIP %s, found by %s), torch is built "
                    "for ROCm %s" % (hip["path"], runtime, hip.get("how"), torch_hip),
                    "make Triton use torch's HIP runtime: unset TRITON_LIBHIP_PATH%s, or install "
                    "the torch build for ROCm %d.%d" % (
                        " or set it to " + evidence["torch_libamdhip64"]
                        if evidence["torch_libamdhip64"] else "", have[0], have[1]), evidence)
        return ("pass", "libamdhip64 HIP %s matches torch's ROCm %s" % (runtime, torch_hip), "",
                evidence)
