"""What every stage script sent with `-c` starts with: `emit` prints a stage line behind MARK
(from any thread), `err` an exception's text as Triton users see it (stages.HELPER_PRELUDE)."""

# ---- sent as is: everything below this line is the script ----
import json, sys, threading
MARK = "@@fleetcheck@@ "
EMITTING = threading.Lock()  # a stage line is whole, whichever thread emits it
def emit(stage, data):
    data["stage"] = stage
    line = MARK + json.dumps(data, default=str) + "\n"
    with EMITTING:
        sys.stdout.write(line)
        sys.stdout.flush()
def err(e):
    return (type(e).__name__ + ": " + str(e))[-4000:]
