"""The probe's core: its text helpers, subprocesses and deadline, the stage scripts as sent,
its typed state (ProbeState) and the Probe class that joins the stages."""
