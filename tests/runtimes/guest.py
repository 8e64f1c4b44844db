"""The QEMU guest of the real-runtime fleet: a TCG VM running the real qemu-guest-agent.

Its kernel is Debian's generic one (scripts/fetch_guest_kernel.sh unpacks it into
.guest-kernel/ in the test set-up), booted as the uncompressed ELF through its PVH entry where
the set-up unpacked one (vmlinux: half the TCG time of a bzImage boot), else as vmlinuz. Its
initramfs, made here, is busybox-static, the virtio,
virtio_console and 9p modules, and an init that mounts the machine's own /usr read-only over
virtio-9p (so python3, coreutils' `timeout` and qemu-ga are the real ones), then execs
`qemu-ga -m virtio-serial -p /dev/vportNpM` on the port named `org.qemu.guest_agent.0`, with
the PATH systemd gives qemu-guest-agent.service and no HOME (as under a real guest's agent).
"""

from __future__ import annotations

import json
import select
import shutil
import socket
import subprocess
from pathlib import Path

ROOT = Path(__file__).resolve().parents[2]
KERNEL_DIR = ROOT / ".guest-kernel"
BUSYBOX = Path("/bin/busybox")
QEMU = "qemu-system-x86_64"
QEMU_GA = Path("/usr/sbin/qemu-ga")
AGENT_PORT = "org.qemu.guest_agent.0"
#: Load order (no modules.dep: the package is unpacked, not installed).
MODULES = ("virtio_ring", "virtio", "virtio_pci_modern_dev", "virtio_pci_legacy_dev",
           "virtio_pci", "virtio_console", "netfs", "fscache", "9pnet", "9pnet_virtio", "9p")

INIT = """#!/busybox sh
/busybox mkdir -p /proc /sys /dev /usr /tmp /run /root
/busybox mount -t proc proc /proc
/busybox mount -t sysfs sys /sys
/busybox mount -t devtmpfs dev /dev
/busybox mount -t tmpfs tmp /tmp
/busybox mount -t tmpfs run /run
echo "guest: init at $(/busybox cat /proc/uptime)"
for m in {modules}; do [ -e /modules/$m.ko ] && /busybox insmod /modules/$m.ko; done
/busybox mount -t 9p -o trans=virtio,version=9p2000.L,ro,cache=loose usr /usr \\
  || echo "guest: 9p mount of /usr failed"
for link in bin sbin lib lib64; do /busybox ln -s usr/$link /$link; done
/busybox ln -s /run /var/run 2>/dev/null
port=""
for n in 1 2 3 4 5 6 7 8 9 10 11 12 13 14 15 16 17 18 19 20; do
  for f in /sys/class/virtio-ports/*/name; do
    [ -e "$f" ] || continue
    if [ "$(/busybox cat "$f")" = "{port}" ]; then
      port=/dev/$(/busybox basename "$(/busybox dirname "$f")")
    fi
  done
  [ -n "$port" ] && [ -e "$port" ] && break
  /busybox sleep 0.5
done
echo "guest: agent port $port at $(/busybox cat /proc/uptime)"
unset HOME
export PATH=/usr/local/sbin:/usr/local/bin:/usr/sbin:/usr/bin:/sbin:/bin
cd /
exec /usr/sbin/qemu-ga -m virtio-serial -p "$port"
"""


def kernel() -> Path:
    """The kernel QEMU loads: vmlinux (PVH entry, no decompressor run on TCG) or vmlinuz."""
    elf = KERNEL_DIR / "vmlinux"
    return elf if elf.is_file() else KERNEL_DIR / "vmlinuz"


def missing() -> str | None:
    """Why this machine cannot boot the guest (the first failed check), or None."""
    if not (KERNEL_DIR / "vmlinuz").is_file():
        return f"no guest kernel in {KERNEL_DIR.name}/ (scripts/fetch_guest_kernel.sh)"
    for tool, path in (("busybox-static", BUSYBOX), ("qemu-guest-agent", QEMU_GA)):
        if not path.is_file():
            return f"{path} missing (Debian package {tool})"
    if shutil.which(QEMU) is None:
        return f"{QEMU} missing (Debian package qemu-system-x86)"
    return None


def build_initramfs(work: Path) -> Path:
    """The guest's initramfs (newc cpio, made with busybox's own cpio) under `work`."""
    tree = work / "initramfs"
    (tree / "modules").mkdir(parents=True, exist_ok=True)
    (tree / "var").mkdir(exist_ok=True)
    shutil.copy2(BUSYBOX, tree / "busybox")
    for module in MODULES:
        source = KERNEL_DIR / "modules" / f"{module}.ko"
        if source.exists():
            shutil.copy2(source, tree / "modules" / source.name)
    init = tree / "init"
    init.write_text(INIT.replace("{modules}", " ".join(MODULES)).replace("{port}", AGENT_PORT))
    init.chmod(0o755)
    names = sorted(str(p.relative_to(tree)) for p in tree.rglob("*"))
    image = work / "initramfs.cpio"
    with image.open("wb") as out:
        subprocess.run([str(BUSYBOX), "cpio", "-o", "-H", "newc"], cwd=tree, check=True,
                       input="\n".join(names).encode() + b"\n", stdout=out,
                       stderr=subprocess.DEVNULL)
    return image


def qemu_argv(vmid: int, initramfs: Path, run_dir: Path, *, boot: bool = True,
              memory_mb: int = 512) -> list[str]:
    """QEMU as qemu-server starts a VM with `agent: 1` (the agent's socket at
    RUN/VMID.qga, the pidfile RUN/VMID.pid), on TCG: this machine kind has no nested KVM.

    `boot=False` starts it with its CPUs stopped (`-S`): a running VM whose agent never
    answers (configured in qm, not running in the guest).
    """
    argv = [QEMU, "-name", f"vm{vmid}", "-machine", "q35,accel=tcg", "-cpu", "max",
            "-m", str(memory_mb), "-smp", "1", "-nodefaults", "-no-user-config",
            "-display", "none", "-serial", f"file:{run_dir / f'{vmid}.console'}",
            "-pidfile", str(run_dir / f"{vmid}.pid"),
            "-chardev", f"socket,id=qga0,path={run_dir / f'{vmid}.qga'},server=on,wait=off",
            "-device", "virtio-serial", "-device",
            f"virtserialport,chardev=qga0,name={AGENT_PORT}",
            "-chardev", f"socket,id=qmp,path={run_dir / f'{vmid}.qmp'},server=on,wait=off",
            "-mon", "chardev=qmp,mode=control",
            "-kernel", str(kernel()), "-initrd", str(initramfs),
            # no_timer_check: TCG's 8254 timer fails the IO-APIC check, which then waits ~30 s.
            "-append", "console=ttyS0 quiet panic=-1 no_timer_check",
            "-fsdev", "local,id=usrfs,path=/usr,security_model=none,readonly=on",
            "-device", "virtio-9p-pci,fsdev=usrfs,mount_tag=usr",
            "-no-reboot"]
    if not boot:
        argv.append("-S")
    return argv


def agent_answers(path: Path | str, wait: float = 2.0) -> bool:
    """Whether the qemu-guest-agent behind the socket `path` answers a guest-sync-delimited
    within `wait` seconds (QEMU's chardev accepts before the guest's qemu-ga reads)."""
    sync = json.dumps({"execute": "guest-sync-delimited", "arguments": {"id": 4711}})
    with socket.socket(socket.AF_UNIX, socket.SOCK_STREAM) as sock:
        try:
            sock.connect(str(path))
            sock.sendall(sync.encode() + b"\n")
            data = b""
            while b'"return": 4711}' not in data:
                if not select.select([sock], [], [], wait)[0]:
                    return False
                chunk = sock.recv(4096)
                if not chunk:
                    return False
                data += chunk
        except OSError:
            return False
    return True
