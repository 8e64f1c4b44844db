"""An Ansible inventory as a fleet source: its hosts, their merged variables and their groups.

With Ansible installed, Ansible itself reads the inventory (`ansible-inventory -i PATH
--list`), so everything Ansible reads works: INI, YAML, directories, scripts, dynamic plugins,
vaulted files. Without it, the static INI and YAML formats are read here
(`ansible_static.py`), with group_vars/ and host_vars/ beside the file, and a dynamic source
is refused with a pointer to ansible-core.
"""

from __future__ import annotations

import json
import os
import shutil
import subprocess
from typing import Any

from fleetcheck.budget import SOURCE_COMMAND_TIMEOUT
from fleetcheck.inventory.ansible_model import (
    AnsibleInventory,
    AnsibleSourceError,
    group_members,
)
from fleetcheck.text import clip

#: `parser:` of an Ansible source: ansible-inventory when installed, else the built-in reader.
PARSERS = ("auto", "ansible-inventory", "builtin")
#: Ansible's own groups: every host is in `all`, and in `ungrouped` when in no other group.
IMPLICIT_GROUPS = ("all", "ungrouped")


def read_ansible_inventory(path: str, parser: str = "auto",
                           timeout: float = SOURCE_COMMAND_TIMEOUT) -> AnsibleInventory:
    """Read the Ansible inventory at `path`; raise AnsibleSourceError (one line) if it fails."""
    if not os.path.exists(path):
        raise AnsibleSourceError(f"{path}: no such file or directory")
    command = shutil.which("ansible-inventory")
    if parser == "ansible-inventory" and command is None:
        raise AnsibleSourceError("ansible-inventory is not installed (pip install ansible-core, "
                                 "or apt-get install ansible-core); or set parser: builtin")
    if command is not None and parser != "builtin":
        return from_ansible_json(_run_ansible_inventory(command, path, timeout), path)
    from fleetcheck.inventory.ansible_static import read_static_inventory

    return read_static_inventory(path)


def _run_ansible_inventory(command: str, path: str, timeout: float) -> Any:
    env = dict(os.environ)
    # Unparsed sources are only a warning by default, and then the inventory is empty: a
    # typo would read as "no hosts". Colour codes would end up in the error line.
    env.update(ANSIBLE_INVENTORY_UNPARSED_FAILED="1", ANSIBLE_NOCOLOR="1",
               ANSIBLE_FORCE_COLOR="0", ANSIBLE_DEPRECATION_WARNINGS="0")
    try:
        done = subprocess.run([command, "-i", path, "--list"], capture_output=True, env=env,
                              stdin=subprocess.DEVNULL, timeout=timeout, check=False)
    except subprocess.TimeoutExpired:
        raise AnsibleSourceError(f"{path}: ansible-inventory did not finish within "
                                 f"{timeout:g} s") from None
    except OSError as exc:
        raise AnsibleSourceError(f"{path}: cannot run ansible-inventory: "
                                 f"{exc.strerror or exc}") from None
    if done.returncode != 0:
        raise AnsibleSourceError(f"{path}: ansible-inventory failed: "
                                 f"{_ansible_error(done.stderr.decode('utf-8', 'replace'))}")
    try:
        return json.loads(done.stdout)
    except ValueError:
        raise AnsibleSourceError(f"{path}: ansible-inventory printed no JSON document") from None


def _ansible_error(stderr: str) -> str:
    """The line of ansible-inventory's stderr that says why (its [ERROR], else its last)."""
    lines = [" ".join(line.split()) for line in stderr.splitlines() if line.strip()]
    # "[WARNING]:  * Failed to parse X with ini plugin: <why>" says more than the final
    # "[ERROR]: Completely failed to parse inventory source X".
    for marker in ("Failed to parse", "[ERROR]", "ERROR!"):
        for line in lines:
            if marker in line:
                return clip(line.replace("[WARNING]: * ", "").replace("[WARNING]: ", ""), 300)
    return clip(lines[-1], 300) if lines else "no error text"


def from_ansible_json(data: Any, path: str = "") -> AnsibleInventory:
    """`ansible-inventory --list` JSON (groups, `_meta.hostvars`) -> AnsibleInventory."""
    if not isinstance(data, dict):
        raise AnsibleSourceError(f"{path}: ansible-inventory JSON is not an object")
    meta: dict[str, Any] = data["_meta"] if isinstance(data.get("_meta"), dict) else {}
    hostvars: dict[str, Any] = meta["hostvars"] if isinstance(meta.get("hostvars"), dict) else {}
    direct: dict[str, list[str]] = {}
    children: dict[str, list[str]] = {}
    for name, group in data.items():
        if name == "_meta" or not isinstance(group, dict):
            continue
        direct[name] = [h for h in group.get("hosts") or () if isinstance(h, str)]
        children[name] = [c for c in group.get("children") or () if isinstance(c, str)]
    members = group_members(direct, children)
    order = list(dict.fromkeys([*members.get("all", ()), *(h for hs in direct.values()
                                                            for h in hs), *hostvars]))
    hosts = {name: dict(hostvars.get(name) or {}) for name in order}
    groups = {name: hosts_of for name, hosts_of in members.items()
              if name not in IMPLICIT_GROUPS}
    return AnsibleInventory(hosts=hosts, groups=groups, parser="ansible-inventory")
