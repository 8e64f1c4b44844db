"""What every stage script sent with `-c` starts with: `emit` prints a stage line behind MARK,
`err` an exception's text as Triton users see it (stages.HELPER_PRELUDE)."""

# ---- sent as is: everything below this line is the script ----
import json, sys
MARK = "@@fleetcheck@@ "
def emit(stage, data):
    data["stage"] = stage
    sys.stdout.write(MARK + json.dumps(data, default=str) + "\n")
    sys.stdout.flush()
def err(e):
    return (type(e).__name__ + ": " + str(e))[-4000:]
