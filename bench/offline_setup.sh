#!/usr/bin/env bash
# Unpack bench/offline_bundle.sh's DIR on a machine without network, as root, and print the
# environment the bench then runs with (eval it):
#   eval "$(bench/offline_setup.sh DIR [PREFIX])"
# Debian's files go to PREFIX (default /opt/fc-bench-debs), never over the system's; of their
# libraries, only those the system lacks are put on LD_LIBRARY_PATH. The wheels go to
# PREFIX/site. Adds the `sshd` privilege-separation user OpenSSH's server needs.
set -euo pipefail
dir=$(realpath "$1")
prefix=${2:-/opt/fc-bench-debs}
mkdir -p "$prefix"
tar -C "$prefix" -xzf "$dir/debs.tar.gz"
have=$(ldconfig -p | awk '{print $1}' | sort -u)
mkdir -p "$prefix/missing-libs"
for lib in "$prefix"/lib/x86_64-linux-gnu/*.so.* "$prefix"/usr/lib/x86_64-linux-gnu/*.so.*; do
  [ -e "$lib" ] || continue
  name=$(basename "$lib")
  grep -qxF "$name" <<<"$have" || cp -L "$lib" "$prefix/missing-libs/$name"
done
id -u sshd >/dev/null 2>&1 \
  || useradd --system --no-create-home --home-dir /run/sshd --shell /usr/sbin/nologin sshd \
  || echo "sshd:x:$((60000 + RANDOM % 1000)):65534::/run/sshd:/usr/sbin/nologin" >>/etc/passwd
mkdir -p /run/sshd && chmod 755 /run/sshd
# pdsh's wrapper and clush's interpreter line name Debian's paths: point them into PREFIX.
sed -i "s|/usr/bin/pdsh.bin|$prefix/usr/bin/pdsh.bin|; s|/etc/pdsh|$prefix/etc/pdsh|g" \
  "$prefix/usr/bin/pdsh"
# pdsh loads its modules (ssh, exec) from the directory compiled in, nothing else: link it
# there when the system has none (a new path only).
modules=/usr/lib/x86_64-linux-gnu/pdsh
[ -e "$modules" ] || ln -s "$prefix$modules" "$modules"
# The tests' fleet kit (bench/gate_latency.py's fleets) starts /usr/sbin/sshd: the same.
[ -e /usr/sbin/sshd ] || ln -s "$prefix/usr/sbin/sshd" /usr/sbin/sshd
python=$(command -v python3)
sed -i "1s|.*|#!$python|" "$prefix/usr/bin/clush"
[ -e /etc/clustershell ] || cp -r "$prefix/etc/clustershell" /etc/clustershell
"$python" -m pip install -q --no-index --no-deps --no-compile --no-cache-dir --upgrade \
  --target "$prefix/site" "$dir"/wheels/*.whl >&2
# Bytecode once, here: where PYTHONDONTWRITEBYTECODE is set, every start would compile again.
"$python" -m compileall -q -j 0 "$prefix/site" "$prefix/usr/lib/python3/dist-packages" >/dev/null
cat <<ENV
export PATH="$prefix/usr/bin:$prefix/usr/sbin:$prefix/site/bin:\$PATH"
export LD_LIBRARY_PATH="$prefix/missing-libs\${LD_LIBRARY_PATH:+:\$LD_LIBRARY_PATH}"
export PYTHONPATH="$prefix/usr/lib/python3/dist-packages:$prefix/site\${PYTHONPATH:+:\$PYTHONPATH}"
export BENCH_SSHD="$prefix/usr/sbin/sshd"
ENV
echo "offline set-up: $(ls "$prefix/missing-libs" | wc -l) libraries this system lacked:" \
     "$(ls "$prefix/missing-libs" | tr '\n' ' ')" >&2
