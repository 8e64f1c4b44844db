"""The workload interpreter's executable, version and include dir (stages.PYINFO_SCRIPT).

Sent after py_include.py; run in the probe itself (run_inline) when it is the same interpreter.
"""

from fleetcheck.probe.parts.scripts.py_include import py_include

# ---- sent as is: everything below this line is the script ----
import json, sys
print(json.dumps({"executable": sys.executable, "version": "%d.%d.%d" % sys.version_info[:3],
                  "include": py_include()}))
