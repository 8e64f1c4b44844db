"""Checks of the GPU and its driver: device nodes, versions, cuInit, NVSwitch, compat/stub."""

import os
import re

from fleetcheck.probe.parts.core.base import first_line, host_path
from fleetcheck.probe.parts.evaluation.findings import Findings
from fleetcheck.probe.parts.facts.libcuda import CUDA_ERRORS, parse_ldconfig
from fleetcheck.probe.parts.facts.nvidia import nodes_summary, nvswitch_devices, open_result


def gpu_passthrough_fix(container):
    """How GPUs reach a container that is not LXC (LXC's device lines, or a host's or VM's
    nvidia-modprobe, are the fix given otherwise): an LXC device line is no fix inside
    Docker, `--gpus`/CDI is; "" for LXC, a VM and bare metal."""
    if container == "docker":
        return ("start the container with the GPUs: docker run --gpus all (NVIDIA Container "
                "Toolkit) or, with CDI, docker run --device nvidia.com/gpu=all (after "
                "nvidia-ctk cdi generate --output=/etc/cdi/nvidia.yaml where dockerd runs); "
                "a device line in the LXC config around it does not reach this container")
    if container == "podman":
        return ("start the container with the GPUs through CDI: podman run --device "
                "nvidia.com/gpu=all (after nvidia-ctk cdi generate "
                "--output=/etc/cdi/nvidia.yaml where podman runs)")
    if container == "kubernetes":
        return ("request the GPUs in the pod spec (resources.limits nvidia.com/gpu: N) on a node "
                "running the NVIDIA device plugin or GPU operator")
    return ""

class DriverChecks(Findings):
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
        if self.access_revoked():
            return ("skip", "the nodes are there but refused (EPERM): see cgroup_devices_revoked",
                    "", evidence)
        cuda_ok = self.cuda_info.get("init") == 0 and (self.cuda_info.get("count") or 0) >= len(
            minors)
        name, code = sorted(bad.items(), key=lambda item: expected.index(item[0]))[0]
        uvm_major = re.search(r"^\s*(\d+)\s+nvidia-uvm\s*$", self.proc_devices, re.M)
        uvm = uvm_major.group(1) if uvm_major else "<uvm-major>"
        container = self.facts.get("container")
        passing = gpu_passthrough_fix(container)
        if code == "ENOENT":
            what = "missing (not passed through)"
            if passing:
                fix = passing
            else:
                fix = ("pass every node into the container, uvm included: lxc.mount.entry: "
                       "/dev/%s dev/%s none bind,optional,create=file (and for nvidiactl, "
                       "nvidia-uvm, nvidia-uvm-tools, nvidiaN) in /etc/pve/lxc/<vmid>.conf; on "
                       "a host, load nvidia-uvm (nvidia-modprobe -u -c=0)" % (name, name))
        elif code == "EPERM":
            what = "blocked by the device cgroup (EPERM)"
            if passing:
                fix = passing
            else:
                fix = ("allow the majors in the container config: lxc.cgroup2.devices.allow: "
                       "c 195:* rwm and c %s:* rwm (majors from /proc/devices on the host)"
                       % uvm)
        elif code == "EACCES":
            what = "not permitted by its file mode (EACCES)"
            fix = ("make the node usable by the workload user: mode 0666 on the host node, or "
                   "devN: /dev/%s,mode=0666 (or gid=) in the container config" % name)
        else:
            what = "unusable (%s)" % code
            fix = "check that the NVIDIA driver is loaded and the node is passed through"
        summary = nodes_summary(name, what, bad, len(results), "no /dev/nvidia* device nodes, "
                                "though the driver lists %d GPU(s)" % len(minors),
                                self.facts.get("container"))
        evidence["cuda_init"] = self.cuda_info.get("init_name") or self.cuda_info.get("init")
        if cuda_ok and not self.facts.get("container"):
            return ("warn", summary + " (CUDA initialises anyway)", fix, evidence)
        return ("fail", summary, fix, evidence)

    def unknown_error(self, evidence):
        """cuInit 999 (CUDA_ERROR_UNKNOWN; torch: 'CUDA unknown error') told apart by what the
        node shows: its causes differ, and so do their repairs (pytorch/pytorch#88639, #49081;
        NVIDIA/nvidia-container-toolkit#48, #251)."""
        container = self.facts.get("container") or (
            "docker" if os.path.exists(host_path("/.dockerenv")) else None)
        evidence["nvml"] = self.smi_info.get("error") or self.cuda_info.get("nvml_init_text")
        uvm = open_result(host_path("/dev/nvidia-uvm"))
        evidence["nvidia_uvm"] = uvm
        head = "cuInit failed: CUDA_ERROR_UNKNOWN (999)"
        if uvm != "ok":
            return ("fail", head + ": /dev/nvidia-uvm %s (CUDA needs the uvm node)" % uvm,
                    "load nvidia-uvm on the host (nvidia-modprobe -u -c=0) and pass "
                    "/dev/nvidia-uvm into the container", evidence)
        if self.nvml_unknown_error():
            return ("fail", head + " with NVML's 'Unknown Error': the driver is in a bad state "
                    "or access to it changed under this %s" % (container or "host"),
                    "recreate the container" if container else
                    "reload the driver (rmmod nvidia_uvm nvidia; modprobe nvidia nvidia_uvm) or "
                    "reboot", evidence)
        if container:
            return ("fail", head + " in a %s container whose device nodes all open: the host's "
                    "driver changed (upgraded, or reloaded) after the container started" % (
                        container), "restart the container after the host's driver is back; "
                    "if it persists, reload nvidia_uvm on the host", evidence)
        return ("fail", head + " on the host with every device node usable: nvidia_uvm's state "
                "(after a suspend/resume) or a CUDA_VISIBLE_DEVICES changed after start",
                "reload nvidia_uvm (rmmod nvidia_uvm && modprobe nvidia_uvm) or reboot; check "
                "CUDA_VISIBLE_DEVICES", evidence)

    def nvml_unknown_error(self):
        """NVML's 'Unknown Error': nvidia-smi's text, or nvmlInit_v2's 999."""
        smi = self.smi_info.get("error") or ""
        return ("Unknown Error" in smi or self.cuda_info.get("nvml_init") == 999
                or "Unknown Error" in (self.cuda_info.get("nvml_init_text") or ""))

    def access_revoked(self):
        """Device nodes present but open() refused with EPERM, and NVML's 'Unknown Error':
        the device cgroup no longer lets this container at the GPU."""
        names = [n for n in self.dev_names if n in ("nvidiactl", "nvidia-uvm")
                 or re.match(r"^nvidia\d+$", n)]
        codes = [open_result(host_path("/dev/" + n)) for n in names]
        return bool(codes) and "EPERM" in codes and self.nvml_unknown_error()

    def check_cgroup_devices_revoked(self):
        evidence = {"nvidia_smi": self.smi_info.get("error"),
                    "nvml_init": self.cuda_info.get("nvml_init"),
                    "container": self.facts.get("container"),
                    "cuda_init": self.cuda_info.get("init_name") or self.cuda_info.get("init")}
        if not self.access_revoked():
            return ("pass", "device access not refused", "", evidence)
        return ("fail", "the /dev/nvidia* nodes exist but open() is refused (EPERM) and NVML "
                "says 'Failed to initialize NVML: Unknown Error': the device cgroup no longer "
                "lets this container at the GPU (after it worked: a systemctl daemon-reload on a "
                "cgroup-v1/systemd host drops the rules runc set)",
                "recreate the container (docker rm -f && docker run ...); on the host, NVIDIA's "
                "fix: nvidia-ctk system create-dev-char-symlinks --create-all (and its udev "
                "rule), or run containers through CDI", evidence)

    def check_gpu_exclusive_busy(self):
        info = self.cuda_info
        modes = info.get("compute_modes") or {}
        contexts = info.get("contexts") or {}
        evidence = {"compute_modes": modes, "contexts": contexts}
        names = {0: "Default", 1: "Exclusive_Thread", 2: "Prohibited", 3: "Exclusive_Process"}
        busy = sorted(i for i, c in contexts.items() if c.get("rc") == 46)
        fix = ("set the compute mode back on the host (nvidia-smi -i N -c DEFAULT, as root), or "
               "run one process per GPU")
        if busy:
            return ("fail", "GPU %s is in %s mode and held by another process: CUDA error 46 "
                    "(CUDA-capable device(s) is/are busy or unavailable)" % (
                        ", ".join(busy), names.get(int(modes.get(busy[0], 3)), "exclusive")), fix,
                    evidence)
        prohibited = sorted(i for i, m in modes.items() if m == 2)
        if prohibited:
            return ("fail", "GPU %s is in compute mode Prohibited: no process may use it" % (
                ", ".join(prohibited)), fix, evidence)
        exclusive = sorted(i for i, m in modes.items() if m == 3)
        if exclusive:
            return ("warn", "GPU %s is in Exclusive_Process mode: one process at a time (a "
                    "second one, e.g. a compile worker or another rank, gets error 46)" % (
                        ", ".join(exclusive)), fix, evidence)
        if not modes:
            return ("skip", "compute mode unknown (NVML: %s)" % (
                info.get("nvml_error") or info.get("nvml_init_text") or "not read"), "",
                evidence)
        return ("pass", "compute mode Default", "", evidence)

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
            # The loader's own message: a library it misses, or a limit it hit mapping it.
            cause, _, values = self.name_failure({"error": info["load_error"]}, {})
            evidence["matches"] = cause if cause not in (None, "zero_active_drivers") else None
            return ("fail", "libcuda.so.1 cannot be loaded: " + first_line(info["load_error"]),
                    self.cause_fix(evidence["matches"], values) if evidence["matches"] else
                    "install the NVIDIA driver userspace (libcuda.so.1) matching the kernel "
                    "module, or bind-mount it into the container and run ldconfig", evidence)
        if info.get("init") != 0:
            code = info.get("init")
            known = CUDA_ERRORS.get(code, "CUDA error") if isinstance(code, int) else "CUDA error"
            name = info.get("init_name") or known
            if code == 999:
                return self.unknown_error(evidence)
            # Out of memory at initialisation with a free GPU: the address space CUDA reserves
            # is over the job's limit (ulimit -v, h_vmem); an OS call the driver made that
            # failed (304), or no device behind usable device nodes (100), under a tight
            # process or open-file limit: that limit.
            limit = self.limit_named("ENOMEM") if code == 2 else self.cuda_os_limit(code)
            if limit:
                evidence["matches"] = limit[0]
                return ("fail", "cuInit failed: %s (%s) under the job's %s of %s" % (
                    name, code, limit[1]["limit"], limit[1]["value"]),
                    self.cause_fix(*limit), evidence)
            return ("fail", "cuInit failed: %s (%s)" % (name, code),
                    self.cause_fix("zero_active_drivers"), evidence)
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
