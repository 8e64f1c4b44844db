"""Gathering: every fact collector started in one order, then their answers assembled."""

import json
import os
import platform
import re
import shutil
import socket
import sys

from fleetcheck.probe.parts.core.base import host_path, read_text
from fleetcheck.probe.parts.core.spawn import (
    RESTARTED,
    STARTED,
    Spawned,
    stage_lines,
)
from fleetcheck.probe.parts.core.stages import (
    COMPILED_RUN,
    CUDA_SCRIPT,
    DEEP_SCRIPT,
    HIP_SCRIPT,
    STACK_SCRIPT,
)
from fleetcheck.probe.parts.evaluation.objects import START_TASKS, task_headroom
from fleetcheck.probe.parts.facts.amd import AmdFacts, amd_facts, parse_rocminfo
from fleetcheck.probe.parts.facts.cache import (
    WORKLOAD_ENV_KEYS,
    cuda_cache_dir,
    missing_dirs,
    remove_throwaway,
    triton_cache_dir,
)
from fleetcheck.probe.parts.facts.gpustate import GpuStateFacts
from fleetcheck.probe.parts.facts.libcuda import LibcudaFacts
from fleetcheck.probe.parts.facts.nvidia import dev_nodes, parse_smi, proc_nvidia
from fleetcheck.probe.parts.facts.system import cpu_count, memory_bytes, os_release
from fleetcheck.probe.parts.facts.toolchain import ToolchainFacts
from fleetcheck.probe.parts.facts.where import where_it_runs

# The stack's own (its definition copied here by the build): one source for both interpreters.
from fleetcheck.probe.parts.scripts.workload import give_back_freed_memory


def gpu_signs():
    """What the cheap reads say of the GPUs here: (/proc/driver/nvidia's facts, the
    /dev/nvidia* names, the AMD facts, an NVIDIA GPU possible, an AMD GPU possible). Without
    /proc/driver/nvidia/gpus and /dev/nvidia* no NVIDIA GPU can be reached (nvidia-smi and
    libcuda need the device nodes); AMD's are KFD's topology (sysfs, visible in containers
    too) or /dev/kfd. A node with both vendors' GPUs is audited as an NVIDIA node."""
    proc, names, amd = proc_nvidia(), dev_nodes(), amd_facts()
    return (proc, names, amd, bool(proc["gpus"] or names),
            bool(amd["kfd_gpus"] or "kfd" in amd["dev_nodes"]))


def hip_version_text(version):
    """'6.4.43482' from HIP's version number (major * 10000000 + minor * 100000 + patch)."""
    if not isinstance(version, int) or version <= 0:
        return None
    return "%d.%d.%d" % (version // 10000000, version % 10000000 // 100000, version % 100000)


class Gather(LibcudaFacts, AmdFacts, ToolchainFacts, GpuStateFacts):
    """Starts every slow fact first, does the file reads meanwhile, then assembles the facts."""

    def remove_workload_dirs(self):
        """The throw-away subdirectories of the workload's own dirs, and the Triton and CUDA
        caches' dirs that did not exist before the probe, if empty: removed (the stack removes
        its own too)."""
        if self.own_name:
            remove_throwaway(self.own_name, triton_cache_dir(self.env), self.env,
                             self.own_missing)

    def own_cache_dir(self, suffix):
        """A new dir of the probe's beside the workload's cache entries (where its own kernels
        would build and load: the same mount, exec and space), removed with the throw-away
        dirs; one in the probe's temp dir where none can be made there."""
        path = os.path.join(triton_cache_dir(self.env), self.own_name + suffix)
        try:
            os.makedirs(path)
        except OSError:
            path = os.path.join(self.tmp, suffix.strip("-") + "-cache")
            os.mkdir(path)
        return path

    # Gathering: start every slow thing first, then do the file reads while they run.
    def gather(self, signs=None):
        """Every fact, in the facts' JSON order; `signs`: gpu_signs() where already read."""
        # The cheap reads first: without /proc/driver/nvidia/gpus and /dev/nvidia* no GPU can
        # be reached (nvidia-smi and libcuda need the device nodes), so only the workload's
        # package facts are collected and the probe stays fast on CPU nodes.
        self.proc, self.dev_names, self.amd, nvidia, amd = signs or gpu_signs()
        self.vendor = "amd" if amd and not nvidia else "nvidia"
        self.possible_gpu = nvidia or amd
        if self.possible_gpu:  # before the workload's interpreter makes the node's peak
            give_back_freed_memory()
        env = dict(self.env)
        env["PYTHONDONTWRITEBYTECODE"] = "1"  # leave no .pyc behind in the workload's venv
        scratch = os.path.join(self.tmp, "tmp")
        os.mkdir(scratch)
        env["TMPDIR"] = scratch  # anything the stack leaves in its temp dir goes with ours
        fresh = os.path.join(self.tmp, "cache")
        os.mkdir(fresh)
        user_cache = json.dumps(self.env.get("TRITON_CACHE_DIR") or None)
        mode = "full" if self.possible_gpu else "meta"
        # The workload's own dirs get throw-away subdirectories of this one name (see
        # checks/workload.py); remove_workload_dirs() removes them even if the stack dies.
        self.own_name = ".fleetcheck-probe-%d-%s" % (os.getpid(), os.urandom(4).hex())
        # ...and the dirs the stages' libraries create as the workload's would: Triton's cache
        # and the CUDA driver's, where they do not exist yet (removed again when empty).
        self.own_missing = (missing_dirs(triton_cache_dir(self.env))
                            + missing_dirs(cuda_cache_dir(self.env)))
        # On an NVIDIA node the stack reads each GPU's state and the driver layer in a thread
        # beside its imports (one interpreter, one cuInit); with --deep, helpers of their own
        # read them first, before the deep kernel's contexts.
        self.driver_in_stack = self.possible_gpu and self.vendor == "nvidia" and not self.deep
        # Under a tight process limit the workload's own start runs alone and in its own order:
        # the driver layer after it, the driver's tools once the stack is done.
        headroom = task_headroom() if self.possible_gpu and self.vendor == "nvidia" else None
        self.alone = headroom is not None and headroom < START_TASKS
        self.start_gpu_state()  # before any stage that may create a CUDA context
        own = json.dumps({"name": self.own_name, "deep": self.deep, "env": {
            key: self.env.get(key) for key in WORKLOAD_ENV_KEYS},
            "driver": "after" if self.driver_in_stack and self.alone else self.driver_in_stack})
        self.stack = Spawned([self.workload_python, "-c", COMPILED_RUN, STACK_SCRIPT, fresh,
                              user_cache, mode, own],
                             self.deadline.timeout(), env=env, cwd=self.tmp, label="stack")
        self.deep_run = self.cuda = self.smi = self.ldconfig = self.compile = None
        self.hip = self.rocminfo = None
        state_read = os.path.join(self.tmp, "gpu-state-read")
        if self.possible_gpu and self.deep:
            # The deep kernel imports torch beside the per-GPU state's read, and makes its
            # first context only once that read is done (the file state_read).
            script = os.path.join(self.tmp, "fleetcheck_deep_kernel.py")
            with open(script, "w") as handle:
                handle.write(DEEP_SCRIPT)
            deep_env = dict(env)
            deep_env["TRITON_CACHE_DIR"] = self.own_cache_dir("-deep")
            self.deep_run = Spawned([self.workload_python, script, state_read],
                                    self.deadline.timeout(), env=deep_env, cwd=self.tmp,
                                    label="deep")
        self.wait_gpu_state()  # read while the stack imports torch; contexts come after
        if self.deep_run is not None:
            with open(state_read, "w"):
                pass
        if self.possible_gpu and self.vendor == "amd":
            # Triton's HIP search runs in the workload's interpreter and environment.
            self.hip = Spawned([self.workload_python, "-c", HIP_SCRIPT],
                               self.deadline.timeout(30), env=env, cwd=self.tmp, label="hip")
            rocminfo = shutil.which("rocminfo", path=self.env.get("PATH", os.defpath))
            if rocminfo:
                self.rocminfo = Spawned([rocminfo], self.deadline.timeout(15), env=self.env)
        elif self.possible_gpu:
            if not self.driver_in_stack:
                self.start_libcuda()
            if not self.alone:
                self.start_driver_tools()
        self.pyinfo = self.workload_pyinfo()
        self.compiler = self.find_compiler()

        where = where_it_runs()
        self.facts.update({
            "hostname": socket.gethostname(),
            "os": os_release(),
            "kernel": platform.release(),
            "container": where["container"],
            "where": where,
            "cpus": cpu_count(),
            "memory_bytes": memory_bytes(),
            "python": {"executable": self.pyinfo.get("executable"),
                       "version": self.pyinfo.get("version")},
            "probe_python": {"executable": sys.executable,
                             "version": "%d.%d.%d" % sys.version_info[:3],
                             "isolated": bool(sys.flags.isolated)},
            "cuda_visible_devices": self.env.get("CUDA_VISIBLE_DEVICES"),
            "triton_cache_dir": triton_cache_dir(self.env),
        })
        self.mountinfo = read_text(host_path("/proc/self/mountinfo"))
        self.proc_devices = read_text(host_path("/proc/devices")) or ""

        self.hip_info = self.collect_hip(self.hip) if self.hip else {"error": "not run"}
        self.rocminfo_info = parse_rocminfo(self.rocminfo.result() if self.rocminfo else None)
        self.stack_result = self.stack.result()
        if self.alone:
            self.start_driver_tools()
        self.smi_info = parse_smi(self.smi.result()) if self.smi else {"error": "not run"}
        if self.possible_gpu and not self.smi and self.vendor == "nvidia":
            self.smi_info = {"error": "not on PATH"}
        self.ld_result = self.ldconfig.result() if self.ldconfig else None
        # The --deep kernel builds and loads in a throw-away dir of the workload's cache too:
        # removed once it is done, never while it runs (the stack may finish first).
        self.deep_result = self.deep_run.result() if self.deep_run else None
        self.remove_workload_dirs()
        self.stages = stage_lines(self.stack_result["stdout"])
        driver = self.driver_from_stack() if self.driver_in_stack else None
        if driver is None:
            driver = self.collect_cuda(self.cuda) if self.cuda else {"error": "not run: no GPU"}
        self.cuda_info = driver
        self.compile_result = self.test_compile() if self.possible_gpu else None
        self.deep_stages = stage_lines(self.deep_result["stdout"]) if self.deep_result else {}
        self.assemble_facts()
        self.facts["probe_cost"] = self.cost()

    def start_driver_tools(self):
        """nvidia-smi's view of the GPUs and the linker cache's listing, beside the stack."""
        smi = shutil.which("nvidia-smi", path=self.env.get("PATH", os.defpath))
        if smi:
            self.smi = Spawned([smi, "--query-gpu=index,name,uuid,memory.total,compute_cap,"
                                "driver_version", "--format=csv,noheader,nounits"],
                               self.deadline.timeout(15), env=self.env)
        ldconfig = host_path("/sbin/ldconfig")
        if os.access(ldconfig, os.X_OK):
            self.ldconfig = Spawned([ldconfig, "-p"], self.deadline.timeout(10), env=self.env)

    def cost(self):
        """What the probe started: its helpers, the processes the stack's interpreter started
        (the compiler and ldconfig runs of Triton among them) and the compiler runs of the
        toolchain's proof (the --deep kernel's own not counted)."""
        done = self.stages.get("done") or {}
        runs = done.get("compiler_runs")
        return {"helpers": list(STARTED), "stack_processes": done.get("processes"),
                "workload_alone": self.alone,
                # main.restart_lean: this interpreter runs the probe's code loaded, not compiled
                "restarted_lean": RESTARTED in globals(),
                "compiler_runs": None if runs is None else runs + (1 if self.compile else 0)}

    def start_libcuda(self):
        self.cuda = Spawned([sys.executable, "-I", "-c", CUDA_SCRIPT],
                            self.deadline.timeout(30), env=self.env, label="libcuda")

    def stack_stage(self, name):
        """A stage the stack emitted, without its name; its own error as the answer's."""
        data = self.stages.get(name)
        if data is None:
            return None
        data = {key: value for key, value in data.items() if key != "stage"}
        if data.get("probe_step"):
            return {"error": "probe error in %s: %s" % (data["probe_step"],
                                                        data.get("probe_error"))}
        return data

    def driver_from_stack(self):
        """The GPU state (kept) and the driver layer (returned) from the stack; a helper of
        its own for each it did not emit (it died, or the deadline cut it short, first): the
        GPU state read before the libcuda helper starts, whose exclusive-mode test may make a
        context (None then: the helper's answer is collected as without the stack)."""
        state = self.stack_stage("gpustate")
        if state is None:
            self.spawn_gpu_state()
        self.wait_gpu_state(state)
        driver = self.stack_stage("libcuda")
        if driver is None:
            self.start_libcuda()
        return driver

    def test_compile(self):
        """The toolchain's proof: Triton's own build, where one compiled and linked its module
        from nothing with the compiler found here (the `target` stage's compiler runs), else a
        test compile of our own, after the stack; none where Triton is not installed (the
        toolchain checks are not evaluated) or the stack used the deadline."""
        meta = self.stages.get("meta")
        if meta is not None and not meta.get("triton_dir"):
            return None
        target = self.stages.get("target") or {}
        runs = target.get("compiler") or []
        if target.get("ok") and runs and all(
                isinstance(run, dict) and run.get("rc") == 0 and not run.get("error")
                and self.same_compiler(run.get("argv")) for run in runs):
            self.compile_argv = runs[-1].get("argv")
            self.compile_by = "triton"
            return {"rc": 0, "stdout": "", "stderr": "".join(r.get("stderr") or "" for r in runs),
                    "timed_out": False, "error": None, "seconds": None}
        # After the stack: what it left of the deadline (the compile's own cap is 30 s). A
        # compile the deadline cuts short is untested, not a toolchain that hangs.
        budget = self.deadline.timeout(30)
        if self.stack_result["timed_out"] or budget < 1:
            self.compile_by = "deadline"
            return None
        self.compile = self.start_compile()
        result = self.compile.result() if self.compile else None
        if result is not None and result["timed_out"] and budget < 30:
            self.compile_by = "deadline"
            return None
        return result

    def same_compiler(self, argv):
        """Whether a command Triton ran is the compiler the toolchain checks name."""
        if not isinstance(argv, list) or not argv or not isinstance(argv[0], str):
            return False
        path = self.env.get("PATH", os.defpath)
        ran = argv[0] if os.sep in argv[0] else shutil.which(argv[0], path=path)
        found = self.compiler["path"]
        if not ran or not found:
            return False
        # The paths, not their targets: ccache's gcc and clang are links to one binary.
        return os.path.abspath(ran) == os.path.abspath(found)

    def assemble_facts(self):
        meta = self.stages.get("meta", {})
        torch = self.stages.get("torch", {})
        target = self.stages.get("target", {})
        fla = self.stages.get("fla")
        python = meta.get("python") or {}
        if python.get("executable"):
            self.facts["python"] = {"executable": python["executable"],
                                    "version": python.get("version")}
        self.gpus = self.gpu_list()
        if self.vendor == "amd":
            self.assemble_amd_facts()
        else:
            self.assemble_nvidia_facts()
        self.assemble_stack_facts(meta, torch, target, fla)
        self.assemble_gpu_state()

    def assemble_amd_facts(self):
        hip = self.hip_info
        runtime = hip.get("hipRuntimeGetVersion")
        self.facts.update({
            "gpu_vendor": "amd",
            "gpus": [{key: gpu.get(key) for key in ("index", "name", "uuid", "memory_mib",
                                                     "compute_capability", "gfx")}
                     for gpu in self.gpus],
            "gpu_count": len(self.gpus),
            "driver": {"kernel_module": self.amd["amdgpu"]["version"],
                       "userspace": hip_version_text(runtime), "cuda_driver_version": None},
            "dev_nodes": self.amd["dev_nodes"],
            "amd": {"kfd_gpus": self.amd["kfd_gpus"], "amdgpu": self.amd["amdgpu"],
                    "libamdhip64": hip.get("path"), "libamdhip64_found_by": hip.get("how"),
                    "hip_runtime": hip_version_text(runtime),
                    "hip_driver": hip_version_text(hip.get("hipDriverGetVersion")),
                    "rocminfo": self.rocminfo_info,
                    "HSA_OVERRIDE_GFX_VERSION": self.env.get("HSA_OVERRIDE_GFX_VERSION")},
        })

    def assemble_nvidia_facts(self):
        kernel_module = self.proc["kernel_module"]
        loaded = self.cuda_info.get("loaded")
        userspace = None
        if loaded:
            match = re.search(r"libcuda\.so\.(\d+\.\d+(?:\.\d+)?)$", os.path.realpath(loaded))
            userspace = match.group(1) if match else None
        version = self.cuda_info.get("version")
        self.facts.update({
            "gpus": [{key: gpu.get(key) for key in ("index", "name", "uuid", "memory_mib",
                                                     "compute_capability")}
                     for gpu in self.gpus],
            "gpu_count": len(self.gpus),
            "driver": {"kernel_module": kernel_module, "userspace": userspace,
                       "cuda_driver_version": "%d.%d" % (version // 1000, version % 1000 // 10)
                       if isinstance(version, int) and version > 0 else None},
            "dev_nodes": self.dev_names,
        })

    def assemble_stack_facts(self, meta, torch, target, fla):
        if torch.get("installed"):
            self.facts["torch"] = {
                "version": torch.get("version") or meta.get("torch_version"),
                "cuda": torch.get("cuda", meta.get("torch_cuda")),
                "cuda_available": torch.get("cuda_available"),
                "device_count": torch.get("device_count"),
                "arch_list": torch.get("arch_list"),
            }
            if self.vendor == "amd":
                self.facts["torch"]["hip"] = torch.get("hip", meta.get("torch_hip"))
        else:
            self.facts["torch"] = None
        if meta.get("triton_dir"):
            self.facts["triton"] = {
                "version": target.get("version") or self.triton_dist_version(),
                "location": target.get("location") or meta.get("triton_dir"),
                "distributions": ["%s %s" % (d.get("name"), d.get("version"))
                                  for d in meta.get("triton_dists") or []],
            }
        else:
            self.facts["triton"] = None
        self.facts["fla"] = None
        if meta.get("fla_dir"):
            self.facts["fla"] = {"version": meta.get("fla_version"),
                                 "device_platform": (fla or {}).get("device_platform"),
                                 "layout": (fla or {}).get("layout"),
                                 "warning": ((fla or {}).get("warnings") or [None])[0],
                                 "swallowed": (fla or {}).get("swallowed")}
        self.facts["compiler"] = ({"path": self.compiler["path"],
                                   "source": self.compiler["source"]}
                                  if self.compiler["path"] else None)

    def triton_dist_version(self):
        dists = self.stages.get("meta", {}).get("triton_dists") or []
        return dists[0].get("version") if dists else None

    def gpu_list(self):
        """GPUs from nvidia-smi, else from libcuda, else from /proc/driver/nvidia (AMD: HIP
        and KFD's topology)."""
        if self.vendor == "amd":
            return self.amd_gpu_list()
        smi = self.smi_info.get("gpus")
        cuda_devices = self.cuda_info.get("devices") or []
        if smi:
            gpus = [dict(gpu) for gpu in smi]
            for gpu in gpus:
                if not gpu.get("compute_capability") and gpu["index"] < len(cuda_devices):
                    gpu["compute_capability"] = cuda_devices[gpu["index"]].get(
                        "compute_capability")
            return gpus
        if cuda_devices:
            return [{"index": d["index"], "name": d.get("name"), "uuid": None,
                     "memory_mib": d.get("memory_mib"),
                     "compute_capability": d.get("compute_capability")} for d in cuda_devices]
        return [{"index": i, "name": gpu["model"], "uuid": gpu["uuid"], "memory_mib": None,
                 "compute_capability": None} for i, gpu in enumerate(self.proc["gpus"])]

    def amd_gpu_list(self):
        """One entry per KFD GPU node, named by the HIP runtime where it answered."""
        devices = self.hip_info.get("devices") or []
        kfd = self.amd["kfd_gpus"]
        gpus = []
        for index in range(max(len(devices), len(kfd))):
            device = devices[index] if index < len(devices) else {}
            node = kfd[index] if index < len(kfd) else {}
            gfx = node.get("gfx")
            gpus.append({"index": index, "uuid": None, "compute_capability": None, "gfx": gfx,
                         "name": device.get("name") or "AMD GPU" + (" " + gfx if gfx else ""),
                         "memory_mib": device.get("memory_mib")})
        return gpus
