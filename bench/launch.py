"""Start a command from a small process and report its own peak RSS, untainted by the bench's.

Usage: python -I -S bench/launch.py REPORT_FILE -- ARGV...

Linux charges a child's `ru_maxrss` with the memory of the process it was forked from (the
high-water mark of the old image is kept across exec), so every command the ~40 MB bench
forks would report at least 40 MB. Started from this ~8 MB launcher instead, the command's
`ru_maxrss` (from wait4: itself and every descendant it waited for) is its own. Writes
`{"returncode": N, "maxrss_kb": K}` to REPORT_FILE and exits with the command's code.
"""

import json
import os
import sys


def main(argv):
    report, command = argv[0], argv[2:]
    pid = os.posix_spawnp(command[0], command, os.environ)
    _, status, usage = os.wait4(pid, 0)
    code = os.waitstatus_to_exitcode(status)
    with open(report, "w") as handle:
        json.dump({"returncode": code, "maxrss_kb": usage.ru_maxrss}, handle)
    return code if code >= 0 else 128 - code


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
