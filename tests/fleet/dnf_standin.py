"""A `dnf` (dnf4) stand-in for the test fleet: dnf's texts and exit codes, a real install.

Same state file and log as the apt-get stand-in (`<container>/packages.json`,
`<container>/dnf.log`). Texts from rpm-software-management/dnf (dnf/cli/main.py: exit 1 for
any dnf error printed as `Error: …`; dnf/cli/commands/install.py: `No match for argument: X`
then `Error: Unable to find a match: X`; dnf/base.py: `Package X is already installed.`;
dnf/cli/cli.py: the superuser text) and libdnf's metadata download failure.
"""

import json
import os
import sys

HERE = os.path.dirname(os.path.dirname(os.path.realpath(__file__)))
STATE = os.path.join(HERE, "packages.json")
MIRROR = "mirrors.rockylinux.org"


def out(text):
    sys.stdout.write(text + "\n")
    sys.stdout.flush()


def err(text):
    sys.stderr.write(text + "\n")
    sys.stderr.flush()


def install(state, names):
    if not state.get("root", True):
        err("Error: This command has to be run with superuser privileges (under the root user "
            "on most systems).")
        return 1
    if not state.get("network", True):
        err("Errors during downloading metadata for repository 'baseos':")
        err(f"  - Curl error (6): Couldn't resolve host name for https://{MIRROR}/mirrorlist?"
            f"arch=x86_64&repo=BaseOS-9 [Could not resolve host: {MIRROR}]")
        err("Error: Failed to download metadata for repo 'baseos': Cannot download repomd.xml: "
            "Cannot download repodata/repomd.xml: All mirrors were tried")
        return 1
    repo, installed = state["repo"], state["installed"]
    out("Last metadata expiration check: 0:00:01 ago on Tue 01 Dec 2026 10:00:00 AM UTC.")
    missing = [name for name in names if name not in repo]
    if missing:
        for name in missing:
            out(f"No match for argument: {name}")
        err(f"Error: Unable to find a match: {' '.join(missing)}")
        return 1
    new = []
    for name in names:
        if name in installed:
            out(f"Package {name}-{installed[name]}.x86_64 is already installed.")
        elif name not in new:
            new.append(name)
    out("Dependencies resolved.")
    if not new:
        out("Nothing to do.")
        out("Complete!")
        return 0
    out("Installing:")
    for name in new:
        out(f" {name:<24} x86_64   {repo[name]['version']:<20} baseos   "
            f"{repo[name].get('size_kb', 100)} k")
    out("")
    out("Transaction Summary")
    out(f"Install  {len(new)} Packages")
    out("Running transaction")
    for index, name in enumerate(new, 1):
        for tool, target in repo[name].get("links", {}).items():
            link = os.path.join(state["node_bin"], tool)
            if not os.path.lexists(link):
                os.symlink(target, link)
        installed[name] = repo[name]["version"]
        out(f"  Installing       : {name}-{repo[name]['version']}.x86_64"
            f"{index:>12}/{len(new)}")
    out("Installed:")
    out("  " + " ".join(f"{name}-{repo[name]['version']}.x86_64" for name in new))
    out("")
    out("Complete!")
    tmp = STATE + ".tmp"
    with open(tmp, "w", encoding="utf-8") as handle:
        json.dump(state, handle, indent=1)
    os.replace(tmp, STATE)
    return 0


def main(argv):
    with open(os.path.join(HERE, "dnf.log"), "a", encoding="utf-8") as log:
        log.write(json.dumps(argv) + "\n")
    with open(STATE, encoding="utf-8") as handle:
        state = json.load(handle)
    words = [a for a in argv if not a.startswith("-")]
    if not words or words[0] != "install":
        err("Error: only `dnf install` is played by this stand-in")
        return 2
    return install(state, words[1:])


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
