#!/usr/bin/env bash
# Install fleetcheck's shell completion (bash, zsh) and man page where the system looks for
# them, from the files the installed fleetcheck ships (`fleetcheck completion bash|zsh`,
# `fleetcheck manpage`); scripts/install.sh runs it after installing, and it can be run again
# after an upgrade:
#
#   /usr/share/bash-completion/completions/fleetcheck   (when bash-completion's folder is there)
#   /usr/local/share/zsh/site-functions/_fleetcheck     (made when zsh is installed)
#   /usr/local/share/man/man1/fleetcheck.1
#
# Each is written when its folder is writable (as root); otherwise one line says how to
# install it for one user. It never fails the install.
#
# Environment: FLEETCHECK (default .venv/bin/fleetcheck, else fleetcheck on PATH) is the
# command whose files are installed; DESTDIR, when set, is put before every path above (a
# staging root: nothing is written outside it).
set -uo pipefail
cd "$(dirname "$0")/.."

if [ -z "${FLEETCHECK:-}" ]; then
  if [ -x .venv/bin/fleetcheck ]; then FLEETCHECK=.venv/bin/fleetcheck; else FLEETCHECK=fleetcheck; fi
fi
case "$FLEETCHECK" in */*) FLEETCHECK="$(cd "$(dirname "$FLEETCHECK")" && pwd)/$(basename "$FLEETCHECK")" ;; esac
DESTDIR="${DESTDIR:-}"

# WHAT DIR FILE MAKE(yes|no) FOR-ONE-USER -- fleetcheck's arguments
place() {
  local what="$1" dir="$DESTDIR$2" file="$3" make="$4" user="$5" reason
  shift 6
  if [ ! -d "$dir" ] && [ "$make" = yes ]; then
    mkdir -p "$dir" 2>/dev/null
  fi
  if [ -d "$dir" ] && [ -w "$dir" ] && "$FLEETCHECK" "$@" > "$dir/.$file.tmp" 2>/dev/null &&
    chmod 644 "$dir/.$file.tmp" && mv -f "$dir/.$file.tmp" "$dir/$file"; then
    echo "$what: $dir/$file" >&2
    return 0
  fi
  rm -f "$dir/.$file.tmp" 2>/dev/null
  if [ -d "$dir" ]; then reason="$dir is not writable (run as root)"; else reason="no $dir"; fi
  echo "$what: not installed ($reason); for one user: $user" >&2
}

zsh_installed=no
if command -v zsh >/dev/null 2>&1; then zsh_installed=yes; fi
place "bash completion" /usr/share/bash-completion/completions fleetcheck no \
  "$FLEETCHECK completion bash > ~/.local/share/bash-completion/completions/fleetcheck" \
  -- completion bash
place "zsh completion" /usr/local/share/zsh/site-functions _fleetcheck "$zsh_installed" \
  "$FLEETCHECK completion zsh > ~/.zfunc/_fleetcheck, and fpath+=(~/.zfunc) before compinit in ~/.zshrc" \
  -- completion zsh
place "man page" /usr/local/share/man/man1 fleetcheck.1 yes \
  "$FLEETCHECK manpage > ~/.local/share/man/man1/fleetcheck.1" \
  -- manpage
exit 0
