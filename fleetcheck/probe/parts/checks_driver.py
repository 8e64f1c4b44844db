"""Checks of the GPU and its driver: device nodes, versions, cuInit, NVSwitch, compat/stub."""

import os
import re

from fleetcheck.probe.parts.base import Part, first_line, host_path
from fleetcheck.probe.parts.facts_libcuda import CUDA_ERRORS, parse_ldconfig
from fleetcheck.probe.parts.facts_nvidia import nvswitch_devices, open_result


class DriverChecks(Part):
    """The GPU and NVIDIA driver checks."""

    def check_gpu_present(self):
        evidence = {"proc_gpus": [g["bus"] for g in self.proc["gpus"]],
                    "proc_version": self.proc["version_text"], "dev_nodes": self.dev_names,
                    "nvidia_smi": self.smi_info.get("error") or "%d GPU(s)" % len(
                        self.smi_info.get("gpus") or []),
                    "libcuda": self.cuda_info.get("loaded") or self.cuda_info.get("load_error"),
                    "cuda_device_count": self.cuda_info.get("count")}
        if not self.hardware_evidence():
            return ("warn", "no NVIDIA GPU on this node", "", evidence)
        names: dict = {}
        for gpu in self.gpus:
            label = gpu.get("name") or "NVIDIA GPU"
            if gpu.get("compute_capability"):
                label += " (sm_%s)" % gpu["compute_capability"].replace(".", "")
            names[label] = names.get(label, 0) + 1
        text = ", ".join("%d× %s" % (count, label) for label, count in names.items())
        return ("pass", text, "", evidence)

    def check_dev_nodes_missing(self):
        expected = ["nvidiactl", "nvidia-uvm"]
        minors = [g["minor"] for g in self.proc["gpus"] if g["minor"] is not None]
        if not minors:
            minors = sorted(int(n[6:]) for n in self.dev_names if re.match(r"^nvidia\d+$", n))
        if not minors:
            minors = list(range(len(self.gpus)))
        expected += ["nvidia%d" % minor for minor in minors]
        results = {name: open_result(host_path("/dev/" + name)) for name in expected}
        bad = {name: code for name, code in results.items() if code != "ok"}
        evidence = {"open": results, "container": self.facts.get("container")}
        if not bad:
            return ("pass", "%d device nodes open read-write" % len(results), "", evidence)
        cuda_ok = self.cuda_info.get("init") == 0 and (self.cuda_info.get("count") or 0) >= len(
            minors)
        name, code = sorted(bad.items(), key=lambda item: expected.index(item[0]))[0]
        uvm_major = re.search(r"^\s*(\d+)\s+nvidia-uvm\s*$", self.proc_devices, re.M)
        uvm = uvm_major.group(1) if uvm_major else "<uvm-major>"
        if code == "ENOENT":
            what = "missing (not passed through)"
            fix = ("pass every node into the container, uvm included: lxc.mount.entry: "
                   "/dev/%s dev/%s none bind,optional,create=file (and for nvidiactl, nvidia-uvm, "
                   "nvidia-uvm-tools, nvidiaN) in /etc/pve/lxc/<vmid>.conf; on a host, load "
                   "nvidia-uvm (nvidia-modprobe -u -c=0)" % (name, name))
        elif code == "EPERM":
            what = "blocked by the device cgroup (EPERM)"
            fix = ("allow the majors in the container config: lxc.cgroup2.devices.allow: "
                   "c 195:* rwm and c %s:* rwm (majors from /proc/devices on the host)" % uvm)
        elif code == "EACCES":
            what = "not permitted by its file mode (EACCES)"
            fix = ("make the node usable by the workload user: mode 0666 on the host node, or "
                   "devN: /dev/%s,mode=0666 (or gid=) in the container config" % name)
        else:
            what = "unusable (%s)" % code
            fix = "check that the NVIDIA driver is loaded and the node is passed through"
        summary = "/dev/%s %s" % (name, what)
        if all(code == "ENOENT" for code in bad.values()) and len(bad) == len(results):
            summary = "no /dev/nvidia* device nodes, though the driver lists %d GPU(s)" % len(
                minors)
            if self.facts.get("container"):
                summary += " (not passed into the %s container)" % self.facts["container"]
        elif len(bad) > 1:
            summary += "; %d of %d nodes unusable" % (len(bad), len(results))
        evidence["cuda_init"] = self.cuda_info.get("init_name") or self.cuda_info.get("init")
        if cuda_ok and not self.facts.get("container"):
            return ("warn", summary + " (CUDA initialises anyway)", fix, evidence)
        return ("fail", summary, fix, evidence)

    def check_driver_userspace_mismatch(self):
        kernel = self.facts["driver"]["kernel_module"]
        user = self.facts["driver"]["userspace"]
        smi_error = self.smi_info.get("error") or ""
        evidence = {"kernel_module": kernel, "libcuda": self.cuda_info.get("loaded"),
                    "libcuda_version": user, "nvidia_smi": smi_error or None,
                    "cuda_init": self.cuda_info.get("init_name")}
        fix = ("install the driver userspace of the same version as the host's kernel module "
               "(%s) in the container: NVIDIA-Linux-x86_64-%s.run --no-kernel-module" % (
                   kernel or "?", kernel or "<version>"))
        loaded = self.cuda_info.get("loaded") or ""
        if "/compat/" in loaded or "/compat/" in os.path.realpath(loaded or "."):
            # CUDA's forward-compat libcuda differs from the kernel module by design; whether
            # this GPU accepts it is cuda_compat_on_unsupported_gpu's question.
            return ("skip", "libcuda %s is CUDA's forward-compat library over kernel module %s"
                    % (loaded, kernel or "?"), "", evidence)
        if "version mismatch" in smi_error:
            return ("fail", "driver/library version mismatch: kernel module %s, libcuda %s" % (
                kernel or "?", user or "?"), fix, evidence)
        if kernel and user:
            if kernel != user:
                return ("fail", "driver/library version mismatch: kernel module %s, libcuda %s" % (
                    kernel, user), fix, evidence)
            return ("pass", "kernel module and libcuda are both %s" % kernel, "", evidence)
        missing = "/proc/driver/nvidia/version" if not kernel else "a versioned libcuda.so"
        return ("skip", "cannot compare versions: no %s" % missing, "", evidence)

    def check_zero_active_drivers(self):
        info = self.cuda_info
        evidence = {key: info.get(key) for key in ("loaded", "load_error", "init", "init_name",
                                                    "count", "error")}
        evidence["CUDA_VISIBLE_DEVICES"] = self.env.get("CUDA_VISIBLE_DEVICES")
        if info.get("timed_out"):
            return ("error", info["error"], "", evidence)
        if info.get("error"):
            return ("error", "libcuda probe failed: " + info["error"], "", evidence)
        if info.get("load_error"):
            return ("fail", "libcuda.so.1 cannot be loaded: " + first_line(info["load_error"]),
                    "install the NVIDIA driver userspace (libcuda.so.1) matching the kernel "
                    "module, or bind-mount it into the container and run ldconfig", evidence)
        if info.get("init") != 0:
            code = info.get("init")
            name = info.get("init_name") or CUDA_ERRORS.get(code, "CUDA error")
            return ("fail", "cuInit failed: %s (%s)" % (name, code),
                    "fix the driver layer: device nodes, driver version, "
                    "CUDA_VISIBLE_DEVICES; see the checks above", evidence)
        if not info.get("count"):
            visible = self.env.get("CUDA_VISIBLE_DEVICES")
            hint = " (CUDA_VISIBLE_DEVICES=%r hides them)" % visible if visible is not None else ""
            return ("fail", "CUDA driver sees 0 devices" + hint,
                    "unset or fix CUDA_VISIBLE_DEVICES" if hint else "pass the GPUs through",
                    evidence)
        return ("pass", "cuInit OK, %d device(s), driver API %s" % (
            info["count"], self.facts["driver"]["cuda_driver_version"]), "", evidence)

    def cuda_code(self):
        """(cuInit return code, its name) or (None, None) when libcuda was not reached."""
        info = self.cuda_info
        code = info.get("init")
        if not isinstance(code, int):
            return None, None
        return code, info.get("init_name") or CUDA_ERRORS.get(code) or "CUDA error"

    def loaded_libcuda(self):
        """The libcuda file really mapped into the process (/proc/self/maps), resolved."""
        loaded = self.cuda_info.get("loaded")
        if not loaded or os.sep not in loaded:
            return None, None
        return loaded, os.path.realpath(loaded)

    def gpu_models(self):
        return sorted({g.get("name") or g.get("model") or "NVIDIA GPU" for g in self.gpus}
                      ) or sorted({g["model"] for g in self.proc["gpus"] if g.get("model")})

    def check_fabric_manager_not_ready(self):
        code, name = self.cuda_code()
        switches = nvswitch_devices()
        evidence = {"cuda_init": code, "cuda_init_name": name, "nvswitches": switches,
                    "gpu_models": self.gpu_models(), "kernel_module": self.proc["kernel_module"]}
        if code is None:
            return ("skip", "cuInit not reached (see zero_active_drivers)", "", evidence)
        if code != 802:
            if switches:
                return ("pass", "%d NVSwitch(es), cuInit %s" % (len(switches), name), "",
                        evidence)
            return ("pass", "cuInit %s (not 802)" % name, "", evidence)
        board = ("%d NVSwitch(es) in /proc/driver/nvidia-nvswitch" % len(switches)
                 if switches else "no NVSwitch listed to this node")
        version = self.proc["kernel_module"] or "<driver version>"
        evidence["expected_error"] = "Error 802: system not yet initialized"
        return ("fail", "cuInit returns 802 %s on %s (%s): the NVSwitch fabric is not "
                "initialised, so CUDA sees no GPU" % (name, ", ".join(
                    evidence["gpu_models"]) or "this GPU", board),
                "install and start nvidia-fabricmanager at exactly the driver's version (%s) on "
                "the host (apt-get install nvidia-fabricmanager-%s; systemctl enable --now "
                "nvidia-fabricmanager); the container only sees the result" % (
                    version, version.split(".")[0]), evidence)

    def check_cuda_compat_on_unsupported_gpu(self):
        code, name = self.cuda_code()
        loaded, real = self.loaded_libcuda()
        compat = bool(real and re.search(r"/compat(/|$)", os.path.dirname(real) + "/"))
        compat = compat or bool(loaded and "/compat/" in loaded)
        evidence = {"cuda_init": code, "cuda_init_name": name, "libcuda": loaded,
                    "libcuda_real": real, "kernel_module": self.proc["kernel_module"],
                    "gpu_models": self.gpu_models(),
                    "LD_LIBRARY_PATH": self.env.get("LD_LIBRARY_PATH")}
        if code is None:
            return ("skip", "cuInit not reached (see zero_active_drivers)", "", evidence)
        if code == 804 or (compat and code != 0):
            where = os.path.dirname(loaded or real or "") or "/usr/local/cuda/compat"
            gpus = ", ".join(evidence["gpu_models"]) or "this GPU"
            kernel = self.proc["kernel_module"] or "?"
            if code == 804:
                evidence["expected_error"] = ("Error 804: forward compatibility was attempted on "
                                              "non supported HW")
                summary = ("cuInit returns 804 %s: the CUDA forward-compat libcuda %s is loaded "
                           "on %s (kernel module %s), which does not support it" % (
                               name, real or loaded, gpus, kernel))
            else:
                # Seen on the H200: a compat libcuda older than the kernel module gives 803.
                summary = ("cuInit returns %d %s: the CUDA forward-compat libcuda %s is loaded "
                           "over kernel module %s on %s" % (code, name, real or loaded, kernel,
                                                            gpus))
            return ("fail", summary,
                    "drop %s from LD_LIBRARY_PATH / ld.so.conf.d (then run ldconfig), or upgrade "
                    "the host driver" % where, evidence)
        if compat:
            return ("pass", "forward-compat libcuda %s works on this GPU" % real, "", evidence)
        return ("pass", "libcuda %s is not a forward-compat library" % (real or loaded or "?"), "",
                evidence)

    def check_libcuda_stub_shadowing(self):
        code, name = self.cuda_code()
        loaded, real = self.loaded_libcuda()
        ld_path = [d for d in (self.env.get("LD_LIBRARY_PATH") or "").split(":") if d]
        stub_dirs = [d for d in ld_path if os.path.basename(d.rstrip("/")) == "stubs"]
        entries = parse_ldconfig(self.ld_result["stdout"]) if self.ld_result else []
        cached = [p for n, p in entries if n.startswith("libcuda.so") and "/stubs/" in p]
        evidence = {"cuda_init": code, "cuda_init_name": name, "libcuda": loaded,
                    "libcuda_real": real, "LD_LIBRARY_PATH_stubs": stub_dirs,
                    "ldconfig_stubs": cached}
        if code is None:
            return ("skip", "cuInit not reached (see zero_active_drivers)", "", evidence)
        is_stub = bool(real and "/stubs/" in real) or bool(loaded and "/stubs/" in loaded)
        if code == 34 or is_stub:
            where = os.path.dirname(loaded or "") or (stub_dirs or cached or ["the stubs dir"])[0]
            evidence["expected_error"] = "CUDA driver is a stub library"
            return ("fail", "cuInit returns %d %s: the loaded libcuda %s is the link-time stub" % (
                code, name, loaded or "?"),
                "remove %s from the runtime search path (LD_LIBRARY_PATH / ld.so.conf.d, then "
                "ldconfig), so the driver's libcuda.so.1 loads" % where, evidence)
        return ("pass", "libcuda %s is the driver's" % (loaded or "?"), "", evidence)

    def check_gpu_arch_unsupported(self):
        # Not a catalogue row: a GPU below what Triton's backend and inductor accept
        # (has_triton() wants capability >= 7.0) cannot run Triton kernels for any cause above.
        caps = self.capabilities()
        evidence = {"gpu_capabilities": ["%d.%d" % c for c in caps],
                    "gpu_models": self.gpu_models()}
        if not caps:
            return ("skip", "compute capability unknown", "", evidence)
        old = [c for c in caps if c < (7, 0)]
        if old:
            return ("fail", "%s has compute capability %s: Triton and torch.compile need >= 7.0"
                    % (", ".join(evidence["gpu_models"]) or "the GPU",
                       ", ".join("%d.%d" % c for c in old)),
                    "run Triton workloads on a GPU of compute capability 7.0 or newer (Volta+)",
                    evidence)
        return ("pass", "compute capability %s" % ", ".join("%d.%d" % c for c in caps), "",
                evidence)
