"""Where the interpreter's Python.h lives, computed as Triton does: posix_local -> posix_prefix
(stages.PY_INCLUDE)."""

# ---- sent as is: everything below this line is the script ----
import sysconfig
def py_include():
    if hasattr(sysconfig, "get_default_scheme"):
        scheme = sysconfig.get_default_scheme()
    else:
        scheme = sysconfig._get_default_scheme()
    if scheme == "posix_local":
        scheme = "posix_prefix"
    return sysconfig.get_paths(scheme=scheme)["include"]
