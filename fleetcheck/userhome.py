"""Owns the local user's home and name as OpenSSH finds them: the passwd entry, not the env.

OpenSSH takes both from `getpwuid(getuid())`: its `~` and `%d` in ssh_config, its default files
(~/.ssh/config, ~/.ssh/known_hosts, ~/.ssh/id_*) and its default `User` and `%u`. `$HOME` and
`$USER` are not read, so `sudo -E`, a cron job or systemd unit with another `HOME`, or a
container's environment change nothing. Every SSH path fleetcheck opens goes through here, so
it opens the files `ssh` would (docs/transports.md). Without a passwd entry (a container's
arbitrary uid, where `ssh` itself refuses to run) the environment is the fallback.
"""

from __future__ import annotations

import getpass
import os
import pwd


def _entry() -> pwd.struct_passwd | None:
    try:
        return pwd.getpwuid(os.getuid())
    except KeyError:
        return None


def ssh_home() -> str:
    """The home directory OpenSSH uses: the passwd entry's, else `$HOME`."""
    entry = _entry()
    if entry is not None and entry.pw_dir:
        return entry.pw_dir
    return os.path.expanduser("~")


def ssh_user() -> str:
    """The local user name OpenSSH uses (its default `User`, `%u`): the passwd entry's, else
    `$LOGNAME`/`$USER`; "" when neither names one."""
    entry = _entry()
    if entry is not None:
        return entry.pw_name
    try:
        return getpass.getuser()
    except (KeyError, OSError):
        return ""


def expand_tilde(path: str) -> str:
    """`~` and `~/...` from `ssh_home()`, `~NAME/...` from NAME's passwd entry (OpenSSH's
    tilde_expand_filename); any other path as it is."""
    if not path.startswith("~"):
        return path
    name, slash, rest = path[1:].partition("/")
    if not name:
        return os.path.join(ssh_home(), rest) if slash and rest else ssh_home() + slash
    return os.path.expanduser(path)
