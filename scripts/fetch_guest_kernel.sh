#!/usr/bin/env bash
# The guest kernel of the real-runtime test fleet's QEMU VM (tests/runtimes): Debian's generic
# linux-image-*-amd64 (the cloud kernel has no 9p), fetched with `apt-get download` and
# unpacked (never installed) into .guest-kernel/: vmlinuz and the virtio, virtio_console and 9p
# modules the guest's initramfs loads. Run by scripts/test.sh, so no test reaches the network.
# Also vmlinux, the kernel's own ELF unpacked from vmlinuz's payload: QEMU boots it through its
# PVH entry note, skipping the decompressor and the real-mode set-up, which on TCG is about
# half the CPU time of a boot to a guest agent that answers.
# Does nothing when the kernel is already there, or when this is not an amd64 Debian machine.
set -euo pipefail
cd "$(dirname "$0")/.."
dest=.guest-kernel

unpack_elf() {  # vmlinuz's payload (xz or gzip, found by its magic) as vmlinux, when it is an ELF
  python3 - "$1/vmlinuz" "$1/vmlinux" <<'PY' || true
import lzma, os, sys, zlib
data = open(sys.argv[1], "rb").read()
# Each decompressor stops at its stream's end: what follows the payload is ignored.
for magic, unpacker in ((b"\xfd7zXZ\x00", lzma.LZMADecompressor),
                        (b"\x1f\x8b\x08", lambda: zlib.decompressobj(31))):
    at = data.find(magic)
    try:
        elf = unpacker().decompress(data[at:]) if at >= 0 else b""
    except (lzma.LZMAError, zlib.error):
        continue
    if elf[:4] == b"\x7fELF":
        with open(sys.argv[2] + ".new", "wb") as out:
            out.write(elf)
        os.replace(sys.argv[2] + ".new", sys.argv[2])
        break
PY
}

if [ -f "$dest/vmlinuz" ]; then
  [ -f "$dest/vmlinux" ] || unpack_elf "$dest"
  exit 0
fi
command -v apt-get >/dev/null 2>&1 && command -v dpkg-deb >/dev/null 2>&1 || exit 0
[ "$(dpkg --print-architecture 2>/dev/null)" = amd64 ] || exit 0
package=$(apt-cache depends linux-image-amd64 2>/dev/null | awk '/Depends: linux-image-[0-9]/{print $2; exit}')
[ -n "$package" ] || { echo "fetch_guest_kernel: no linux-image-amd64 in apt's lists" >&2; exit 0; }
work=$(mktemp -d)
trap 'rm -rf "$work"' EXIT
(cd "$work" && apt-get download -qq "$package" 2>/dev/null)
deb=$(ls "$work"/*.deb)
release=${package#linux-image-}
wanted=(./boot/vmlinuz-"$release")
for module in drivers/virtio/virtio drivers/virtio/virtio_ring drivers/virtio/virtio_pci \
    drivers/virtio/virtio_pci_modern_dev drivers/virtio/virtio_pci_legacy_dev \
    drivers/char/virtio_console fs/netfs/netfs fs/fscache/fscache net/9p/9pnet \
    net/9p/9pnet_virtio fs/9p/9p; do
  wanted+=(./lib/modules/"$release"/kernel/"$module".ko)
done
mkdir -p "$work/x"
# Only the files named: tar skips the rest of the 70 MB package.
dpkg-deb --fsys-tarfile "$deb" | tar -x -C "$work/x" --wildcards "${wanted[@]}" 2>/dev/null || true
mkdir -p "$dest.new/modules"
cp "$work/x/boot/vmlinuz-$release" "$dest.new/vmlinuz"
find "$work/x/lib/modules" -name '*.ko' -exec cp {} "$dest.new/modules/" \;
echo "$release" > "$dest.new/release"
unpack_elf "$dest.new"
rm -rf "$dest"
mv "$dest.new" "$dest"
