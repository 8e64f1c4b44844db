"""The floor: every container's probe through the `pct` stand-in directly, no SSH, N at a time.

Usage: python bench/floor.py SPEC.json
SPEC: {"jobs": N, "stdin": "/path/probe.py", "env": {...}, "commands": [[argv...], ...]}
(or "envs": [{...}, ...], one environment per command: the bare-metal nodes' own)
Prints one line: `ok=<count of commands that exited 0 and printed a JSON object> total=<n>`.
"""

from __future__ import annotations

import json
import subprocess
import sys
from concurrent.futures import ThreadPoolExecutor


def run_one(argv: list[str], stdin_path: str, env: dict[str, str]) -> bool:
    with open(stdin_path, "rb") as stdin:
        done = subprocess.run(argv, stdin=stdin, capture_output=True, env=env, timeout=600,
                              check=False)
    return done.stdout.lstrip().startswith(b"{")


def main(spec_path: str) -> int:
    with open(spec_path) as handle:
        spec = json.load(handle)
    commands = spec["commands"]
    envs = spec.get("envs") or [spec["env"]] * len(commands)
    with ThreadPoolExecutor(max_workers=int(spec["jobs"])) as pool:
        results = list(pool.map(lambda pair: run_one(pair[0], spec["stdin"], pair[1]),
                                zip(commands, envs, strict=True)))
    print(f"ok={sum(results)} total={len(commands)}")
    return 0 if all(results) else 1


if __name__ == "__main__":
    sys.exit(main(sys.argv[1]))
