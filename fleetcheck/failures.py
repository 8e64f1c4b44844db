"""Owns the ids of the failures that happen outside the probe (the probe's own causes are
the catalogue's, `checks.py`): set where the failure happens, carried in the node's
`triton.cause`, and read by the verdict, the fix and the renderers instead of the wording.
"""

from __future__ import annotations

#: The node could not be reached (DNS, refused, authentication, connection lost).
UNREACHABLE = "unreachable"
#: SSH refused the host's key: not in known_hosts yet.
HOST_KEY_UNKNOWN = "host_key_unknown"
#: SSH refused the host's key: it differs from the one known_hosts has.
HOST_KEY_CHANGED = "host_key_changed"
#: SSH refused the key of a jump host (`proxy_jump`).
JUMP_HOST_KEY = "jump_host_key_refused"
#: The probe (or the command reaching it) ran out of its node's time.
TIMED_OUT = "timed_out"
#: The audit ended (its deadline, Ctrl-C) before the node's probe was done.
INTERRUPTED = "interrupted"
#: The audit ended before a host's nodes were discovered (the host stands for them).
DISCOVERY_INTERRUPTED = "discovery_interrupted"

#: Every id this module owns.
FAILURE_IDS = (UNREACHABLE, HOST_KEY_UNKNOWN, HOST_KEY_CHANGED, JUMP_HOST_KEY, TIMED_OUT,
               INTERRUPTED, DISCOVERY_INTERRUPTED)
