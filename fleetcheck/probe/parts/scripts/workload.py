"""The workload's own path, for the stack script (stages.STACK_SCRIPT): sent before stack.py.

Functions only. `trace_compiler` records every compiler run Triton makes with the compiler's
own stderr (Triton sends only its stdout away, so the text also still reaches stderr);
`workload_dirs` says where the workload's Triton and compilers write, as each of them chooses
(Triton's knobs, Python's tempfile, gcc's libiberty); `OwnPath` runs the workload's real
get_current_target() through the workload's real cache dir and the entries already in it (its
cache manager reads the real entries, and what it would write stays in a tmp.pid_* dir of the
real entry, removed afterwards: `proof_manager`), after `audit_entries` has looked at every
entry as Triton would meet it; the temp dirs are throw-away subdirectories; `knob_report` reads
the environment the way Triton's knobs do; `inductor_report` follows torch.compile's own way
to its first kernel (its cache dir, the user name it needs); `vendored_detections` runs the
frameworks' own copies of FLA's device detection from their installed sources.
"""

import sys

from fleetcheck.probe.parts.scripts.prelude import emit, err

# ---- sent as is: everything below this line is the script ----
import errno as _errno, os as _os, shutil as _shutil, stat as _stat, subprocess as _subprocess
import tempfile as _tempfile

COMPILER_RUNS = []


TRACED = []  # subprocess.check_call as it was before trace_compiler(), while traced


def untrace_compiler():
    """subprocess.check_call back to what it was (True), after the tracer's own error."""
    if not TRACED:
        return False
    _subprocess.check_call = TRACED.pop()
    return True


def guarded(step, *args):
    """`step(*args)`'s report; its own error (the probe's, never the workload's) recorded as
    {"probe_error": ..., "probe_step": ...} instead of ending the stack."""
    try:
        return step(*args)
    except BaseException as e:
        failure = failure_of(e)
        return {"probe_error": failure.get("error"),
                "probe_step": failure.get("probe_step") or step.__name__}


#: The processes this interpreter started (subprocess's, Triton's compiler and ldconfig runs
#: among them): the probe's cost, in its facts.
STARTED = []


def count_processes():
    """Count each process subprocess starts in this interpreter (its one place that forks)."""
    popen = _subprocess.Popen
    execute = getattr(popen, "_execute_child", None)
    if execute is None:
        return

    def _execute_child(self, args, *rest, **kwargs):
        STARTED.append(_os.path.basename(str(args[0] if isinstance(args, (list, tuple)) and args
                                             else args)))
        return execute(self, args, *rest, **kwargs)
    popen._execute_child = _execute_child


def trace_compiler():
    """Record each subprocess.check_call (Triton's compiler call: runtime/build.py)."""
    original = _subprocess.check_call
    TRACED.append(original)

    def check_call(*popenargs, **kwargs):
        argv = popenargs[0] if popenargs else kwargs.get("args")
        if kwargs.get("stderr") is not None:
            return original(*popenargs, **kwargs)
        run = {"argv": [str(a) for a in argv] if isinstance(argv, (list, tuple)) else argv,
               "rc": None, "stderr": ""}
        COMPILER_RUNS.append(run)
        kwargs["stderr"] = _subprocess.PIPE
        try:
            with _subprocess.Popen(*popenargs, **kwargs) as proc:
                stderr = proc.communicate()[1] or b""
                run["rc"] = proc.returncode
        except OSError as e:
            run.update(failure_of(e))
            raise
        text = stderr.decode("utf-8", "replace")
        run["stderr"] = text[-4000:]
        try:
            sys.stderr.write(text)  # where it went without us
        except Exception:
            pass
        if run["rc"]:
            raise _subprocess.CalledProcessError(run["rc"], argv)
        return 0
    _subprocess.check_call = check_call


#: The file name of the probe's own code as this interpreter runs it ("<string>" for -c).
PROBE_FILE = (lambda: None).__code__.co_filename


def probe_step(e):
    """The probe's own function an exception was raised in, or None where it is the
    workload's code's (Triton, torch, a compiler) or an OSError or compiler exit that the
    probe's stand-ins raise as the workload's own step would: the innermost frame says."""
    if isinstance(e, (OSError, _subprocess.CalledProcessError, KeyboardInterrupt,
                      SystemExit, ImportError, SyntaxError)):
        return None  # an import's failure is the imported code's (its frames are trimmed)
    tb, last = getattr(e, "__traceback__", None), None
    while tb is not None:
        last, tb = tb, tb.tb_next
    if last is None or last.tb_frame.f_code.co_filename != PROBE_FILE:
        return None
    return last.tb_frame.f_code.co_name


def failure_of(e):
    """What a failed step raised: its text, errno name, paths, a compiler's command."""
    out = {"error": err(e), "type": type(e).__name__}
    code = getattr(e, "errno", None)
    if isinstance(code, int):
        out["errno"] = _errno.errorcode.get(code, str(code))
    for key in ("filename", "filename2"):
        if getattr(e, key, None):
            out[key] = str(getattr(e, key))
    if isinstance(e, _subprocess.CalledProcessError):
        out["returncode"] = e.returncode
        out["cmd"] = [str(a) for a in e.cmd] if isinstance(e.cmd, (list, tuple)) else e.cmd
    step = probe_step(e)
    if step:
        out["probe_step"] = step  # the probe's own error: never the workload's verdict
    return out


def gcc_tempdir(env):
    """The temp dir gcc and binutils use (libiberty's choose_tmpdir): TMPDIR, TMP, TEMP, then
    /tmp, /var/tmp, /usr/tmp; the first that is a directory with read, write and search."""
    for path in [env.get(k) for k in ("TMPDIR", "TMP", "TEMP")] + ["/tmp", "/var/tmp",
                                                                  "/usr/tmp"]:
        if path and _os.path.isdir(path) and _os.access(path, _os.R_OK | _os.W_OK | _os.X_OK):
            return path
    return "."


def put_env(values):
    """os.environ as `values` say: each key set to its value, or removed where it is None."""
    for key, value in values.items():
        if value is None:
            _os.environ.pop(key, None)
        else:
            _os.environ[key] = value


def python_tempdir(env):
    """The temp dir tempfile chooses for this environment (it writes a test file in each
    candidate), or the FileNotFoundError it raises when none works."""
    saved = {k: _os.environ.get(k) for k in ("TMPDIR", "TEMP", "TMP")}
    saved_dir = _tempfile.tempdir
    try:
        put_env({key: env.get(key) for key in saved})
        _tempfile.tempdir = None
        return _tempfile.gettempdir(), None
    except BaseException as e:
        return None, failure_of(e)
    finally:
        put_env(saved)
        _tempfile.tempdir = saved_dir


def triton_knobs(triton):
    """triton.knobs (3.4+) when this Triton has the module, else None."""
    import types
    knobs = getattr(triton, "knobs", None)
    return knobs if isinstance(knobs, types.ModuleType) else None


def triton_cache_dir(triton, env):
    """The cache dir as this Triton resolves it for the workload's environment."""
    knobs = triton_knobs(triton)
    if env.get("TRITON_CACHE_DIR"):
        return env["TRITON_CACHE_DIR"]
    home = env.get("TRITON_HOME")
    if home is None and knobs is not None:
        try:
            home = knobs.cache.home_dir  # TRITON_HOME, default ~/ (read when knobs loaded)
        except Exception:
            home = None
        home = home if isinstance(home, str) else None
    return _os.path.join(home or _os.path.expanduser("~/"), ".triton", "cache")


def make_dirs(path, made, tries=3):
    """os.makedirs(path) as Triton's cache does it, noting each directory it creates. A parent
    found existing and removed before its child is made (a second probe sharing the home
    removing the ~/.triton it had made, now empty) is walked again, up to `tries` times."""
    for attempt in range(tries):
        missing = []
        probe = path
        while probe and not _os.path.exists(probe):
            missing.append(probe)
            parent = _os.path.dirname(probe)
            if parent == probe:
                break
            probe = parent
        try:
            for one in reversed(missing):
                try:
                    _os.mkdir(one)
                except FileExistsError:
                    # Another process (a job, a second probe) made it since: Triton's own
                    # os.makedirs(exist_ok=True) goes on, and so do we; it is not ours to remove.
                    if not _os.path.isdir(one):
                        # A file or a dangling link: os.makedirs says it its own way (a
                        # FileNotFoundError beneath a dangling link): the workload's words.
                        _os.makedirs(path, exist_ok=True)
                        raise
                    continue
                made.append(one)
            return
        except FileNotFoundError:
            if attempt == tries - 1 or _os.path.exists(path):
                raise


def space_of(path):
    """statvfs of the nearest existing dir: free bytes and inodes for this user, read-only."""
    while path and not _os.path.exists(path):
        path = _os.path.dirname(path)
    try:
        st = _os.statvfs(path or "/")
    except OSError as e:
        return {"path": path, "error": err(e)}
    out = {"path": path, "free_bytes": st.f_bavail * st.f_frsize,
           "free_inodes": st.f_favail if st.f_files else None,
           "read_only": bool(st.f_flag & getattr(_os, "ST_RDONLY", 1)),
           "noexec": bool(st.f_flag & getattr(_os, "ST_NOEXEC", 8))}
    try:
        info = _os.stat(path)
        out["owner_uid"] = info.st_uid
        out["mode"] = oct(info.st_mode & 0o7777)
    except OSError:
        pass
    return out


def write_test(directory, size):
    """Write `size` bytes in `directory` as Triton's cache and build do; None or the errno."""
    path = _os.path.join(directory, "fleetcheck-write-test")
    try:
        with open(path, "wb") as handle:
            handle.write(b"\0" * size)
        return None
    except OSError as e:
        return failure_of(e)
    finally:
        try:
            _os.unlink(path)
        except OSError:
            pass


def reproduce(code, places, size):
    """A bare OSError (a write has no path) located: the same write done again in each
    (where, dir) of `places`; (where, what it raised there + the dir) or (None, None)."""
    for where, directory in places:
        if directory and _os.path.isdir(directory):
            found = write_test(directory, size)
            if found and found.get("errno") == code:
                return where, dict(found, directory=directory)
    return None, None


def driver_holder(triton):
    """(runtime.driver, its own attributes) as this release defines it, never assumed: 3.4+'s
    DriverConfig (_default, _active), 3.0-3.3's DriverConfig of LazyProxy objects (default,
    active), 2.x's module-level LazyProxy of the driver itself (its _init_fn, _obj)."""
    holder = getattr(getattr(triton, "runtime", None), "driver", None)
    try:
        return holder, object.__getattribute__(holder, "__dict__")
    except AttributeError:
        return holder, {}


def reset_driver(triton):
    """Make Triton build its driver again, as a new process of the workload would (each
    release caches it per process in its own way: `driver_holder`)."""
    holder, state = driver_holder(triton)
    if "_init_fn" in state:  # 2.x
        object.__setattr__(holder, "_obj", None)
        return
    for name, value in list(state.items()):
        if name in ("_default", "_active"):
            setattr(holder, name, None)
        elif "_init_fn" in getattr(value, "__dict__", {}):
            object.__setattr__(value, "_obj", None)
    if "default" in state and "active" in state and state["active"] is not state["default"]:
        holder.active = state["default"]  # 3.0-3.3: reset_active(), as a new process has it


def current_target(triton):
    """What the workload's first kernel asks of this release's driver, which builds its
    utilities module (cuda_utils / hip_utils) on the way: 3.x's
    driver.active.get_current_target(); 2.2-2.3's driver.get_current_target() (the module's
    driver is the LazyProxy of the driver itself); 2.1's driver.utils and the device's
    capability, as its compiler reads it (no get_current_target())."""
    holder, state = driver_holder(triton)
    if holder is None:
        raise AttributeError("module 'triton.runtime' has no attribute 'driver'")
    if "_init_fn" not in state:
        return holder.active.get_current_target()
    built = object.__getattribute__(holder, "_initialize_obj")
    built()
    real = object.__getattribute__(holder, "_obj")
    getter = getattr(type(real), "get_current_target", None)
    if getter is not None:
        return real.get_current_target()
    if getattr(real, "utils", None) is None:
        raise RuntimeError("Triton %s found no GPU driver (%s)" % (
            getattr(triton, "__version__", "?"), type(real).__name__))
    import torch
    major, minor = torch.cuda.get_device_capability()
    return ("hip" if "hip" in type(real).__name__.lower() else "cuda", major * 10 + minor)


class SkeletonBuilt(Exception):
    """Raised once the release's own build compiled, linked and loaded the skeleton of its
    driver module (`skeleton_proof`): nothing more of the driver is needed."""


def skeleton_source(source, name, home=None):
    """The real module's preprocessor lines in order (its headers and the macros they need,
    continuation lines kept) and an empty Python module of the same name: what Triton's build
    of it needs of the compiler, the headers, the flags and the link step, without
    compiling its code (the expensive part of the build). A quoted include found beside the
    real source (its dir `home`) is named by its path: the skeleton lives elsewhere."""
    import re as _re
    kept, going_on = [], False
    for line in source.splitlines():
        if going_on or line.lstrip().startswith("#"):
            quoted = _re.match(r'\s*#\s*include\s*"([^"]+)"', line) if home else None
            if quoted and _os.path.isfile(_os.path.join(home, quoted.group(1))):
                line = '#include "%s"' % _os.path.join(home, quoted.group(1))
            kept.append(line)
            going_on = line.rstrip().endswith("\\")
    if "Python.h" not in source:
        kept.append("#include <Python.h>")
    kept.append("static struct PyModuleDef fleetcheck_skeleton = "
                "{PyModuleDef_HEAD_INIT, \"%s\", NULL, -1, NULL};" % name)
    kept.append("PyMODINIT_FUNC PyInit_%s(void) { return PyModule_Create(&fleetcheck_skeleton); }"
                % name)
    return "\n".join(kept) + "\n"


def release_builds(triton):
    """(namespace, its `_build`) for every namespace of the release that calls its C build
    through a global of that name: 2.x's runtime/driver.py, 3.0-3.3's backends' driver.py
    (loaded outside sys.modules: reached through their driver classes' functions), 3.4+'s
    runtime/build.py (compile_module_from_src)."""
    spaces = [getattr(module, "__dict__", {}) for name, module in list(sys.modules.items())
              if module is not None and (name == "triton" or name.startswith("triton."))]
    backends = getattr(getattr(triton, "backends", None), "backends", None)
    for backend in (backends.values() if isinstance(backends, dict) else ()):
        for value in vars(getattr(backend, "driver", None) or object).values():
            space = getattr(value, "__globals__", None)
            if isinstance(space, dict):
                spaces.append(space)
    found, seen = [], set()
    for space in spaces:
        build = space.get("_build")
        if id(space) not in seen and callable(build) and getattr(
                build, "__name__", "") == "_build":
            seen.add(id(space))
            found.append((space, build))
    return found


def give_back_freed_memory():
    """Give the C heap's freed pages back to the system (glibc's malloc_trim; nothing
    elsewhere). What a process allocated and freed stays resident otherwise, and a job's memory
    limit counts it beside the workload's: in the stack, what importing torch freed, before
    the compiler the probe starts next; in the probe's own interpreter (facts/gather.py takes
    this definition, copied by the build), the 14 MB compiling the probe's source frees,
    before it waits beside the workload's interpreter."""
    try:
        import ctypes
        ctypes.CDLL(None).malloc_trim(0)
    except (OSError, AttributeError, ImportError):  # musl, or no ctypes
        pass


def skeleton_proof(triton, where):
    """The toolchain's proof where the workload's own start loaded its existing driver
    module: the release's own _build (its compiler search, flags, include and library dirs,
    link step, as it calls them) builds the skeleton of the module it would build
    (`skeleton_source`) with `where` as its cache dir, and the module is loaded from there as
    Triton loads it from its cache. True when that worked; False where no build of the
    release was reached (a release built otherwise: the caller proves it with the real
    module). Raises what the release's build or the load raised: the caller proves it again
    with the real module, for the exact failure."""
    patched = release_builds(triton)
    if not patched:
        return False

    def skeleton_of(original):
        def _build(name, src, srcdir, *args, **kwargs):
            # A file of the probe's own, never the release's (3.9 builds its installed
            # driver.c in place): the same name, its quoted includes kept where they were.
            with open(src, encoding="utf-8", errors="replace") as handle:
                text = handle.read()
            skeleton = _os.path.join(where, "src", _os.path.basename(src))
            _os.makedirs(_os.path.dirname(skeleton), exist_ok=True)
            with open(skeleton, "w", encoding="utf-8") as handle:
                handle.write(skeleton_source(text, name, _os.path.dirname(_os.path.abspath(src))))
            made = original(name, skeleton, srcdir, *args, **kwargs)
            placed = _os.path.join(where, _os.path.basename(made))
            _shutil.copyfile(made, placed)
            import importlib.util
            spec = importlib.util.spec_from_file_location(name, placed)
            spec.loader.exec_module(  # type: ignore[union-attr]
                importlib.util.module_from_spec(spec))
            raise SkeletonBuilt(placed)
        return _build
    saved = _os.environ.get("TRITON_CACHE_DIR")
    _os.environ["TRITON_CACHE_DIR"] = where
    for space, original in patched:
        space["_build"] = skeleton_of(original)
    try:
        reset_driver(triton)
        current_target(triton)
        return False
    except SkeletonBuilt:
        return True
    finally:
        for space, original in patched:
            space["_build"] = original
        put_env({"TRITON_CACHE_DIR": saved})
        reset_driver(triton)


def owner_name(uid):
    """The user name of a uid, or None (the probe names who left an entry)."""
    try:
        import pwd
        return pwd.getpwuid(uid).pw_name
    except (ImportError, KeyError):
        return None


def elf_damage(path):
    """Why a shared object cannot be what dlopen maps (too short, no ELF magic, headers past
    its end), or None: Triton's loader fails on such an entry as on a missing one."""
    try:
        with open(path, "rb") as handle:
            head = handle.read(64)
        size = _os.path.getsize(path)
    except OSError as e:
        return err(e)
    if head[:4] != b"\x7fELF":
        return "not an ELF file (%d bytes)" % size
    if head[4:5] != b"\x02" or len(head) < 64:
        return None if len(head) >= 52 else "file too short (%d bytes)" % size
    import struct
    order = "<" if head[5:6] == b"\x01" else ">"
    phoff, shoff = struct.unpack(order + "QQ", head[32:48])
    phsize, phnum, shsize, shnum = struct.unpack(order + "HHHH", head[54:62])
    end = max(phoff + phsize * phnum, shoff + shsize * shnum)
    if end > size:
        return "file too short (%d bytes, its headers end at %d)" % (size, end)
    return None


def rebuilds_bad_entries(triton):
    """Whether this Triton rebuilds a cached module it cannot load (its runtime/build.py logs
    'could not be loaded' and builds it again) instead of raising the loader's error."""
    path = _os.path.join(_os.path.dirname(triton.__file__), "runtime", "build.py")
    try:
        with open(path, encoding="utf-8") as handle:
            return "could not be loaded" in handle.read()
    except OSError:
        return False


#: Entry names Triton's cache manager uses: base32 of a sha256 (3.x), or hex (older).
KEY_NAME = r"^(?:[A-Z2-7]{52}|[0-9a-f]{64})$"


def audit_entries(cache, rebuilds, skip=".fleetcheck-probe", budget=3.0):
    """Every entry of the workload's cache as Triton meets it with this user's rights: an entry
    is usable when its files load (a hit) or when it takes a rebuilt file (a miss, a corrupt
    .so that this Triton rebuilds); what is neither is a problem, with its owner. A cache too
    large to read within `budget` seconds is read that far (`unread` says how many are left)."""
    import time
    end = time.monotonic() + budget
    out = {"cache_dir": cache, "count": 0, "problems": []}
    try:
        names = sorted(_os.listdir(cache))
    except FileNotFoundError:
        return out
    except OSError as e:
        out["error"] = failure_of(e)
        return out
    uid = _os.geteuid()
    for index, name in enumerate(names):
        if name.startswith(skip):
            continue
        if time.monotonic() > end:
            out["unread"] = len(names) - index
            break
        out["count"] += 1
        problem = entry_problem(_os.path.join(cache, name), name, uid, rebuilds)
        if problem is not None:
            problem["entry"] = _os.path.join(cache, name)
            if len(out["problems"]) < 20:
                out["problems"].append(problem)
            out["unusable"] = out.get("unusable", 0) + 1
    return out


def entry_problem(path, name, uid, rebuilds):
    """The problem of one cache entry (<cache>/<key>), or None when Triton can use it."""
    import re as _re
    key_like = bool(_re.match(KEY_NAME, name))

    def problem(kind, why, st=None, where=path):
        out = {"path": where, "kind": kind, "why": why}
        if st is not None:
            out.update(owner_uid=st.st_uid, owner=owner_name(st.st_uid),
                       mode=oct(st.st_mode & 0o7777))
            if st.st_uid != uid and kind != "corrupt":
                out["kind"] = "foreign_owner"
        return out
    try:
        st = _os.stat(path)  # Triton's os.makedirs and os.path.exists follow links
    except OSError as e:
        if not key_like:
            return None
        if _os.path.islink(path):
            try:
                target = _os.readlink(path)
            except OSError:
                target = "?"
            if e.errno == _errno.ENOENT:
                return problem("corrupt", "a link to %s, which does not exist" % target)
            if e.errno == _errno.ELOOP:
                return problem("corrupt", "a link loop (%s)" % target)
        try:
            return problem("unreadable", err(e), _os.lstat(path))
        except OSError:
            return problem("unreadable", err(e))
    if not _stat.S_ISDIR(st.st_mode):
        return problem("corrupt", "a file where Triton keeps an entry dir") if key_like else None
    writable = _os.access(path, _os.W_OK | _os.X_OK)
    if not _os.access(path, _os.X_OK):
        return problem("unreadable", "cannot be entered (mode %s)" % oct(st.st_mode & 0o777), st)
    try:
        names = sorted(_os.listdir(path))
    except OSError:
        return None  # searchable but not listable: Triton never lists it
    # A put's tmp dir and the dump manager's lock are never read by a lookup.
    files = [n for n in names if not n.startswith("tmp.pid_") and n != "lock"]
    if not files:
        if writable:
            return None
        return problem("unreadable", "half-written (%s) and not writable" % (
            ", ".join(names[:3]) or "empty"), st)
    for file_name in files:
        file_path = _os.path.join(path, file_name)
        try:
            file_st = _os.stat(file_path)
        except OSError as e:
            why, bad_st, kind = err(e), None, "corrupt"
        else:
            bad_st = file_st
            if _stat.S_ISDIR(file_st.st_mode):
                # os.replace() cannot put a file over it: no rebuild helps.
                return problem("corrupt", "a dir where Triton keeps a file", where=file_path)
            damage = elf_damage(file_path) if file_name.endswith(".so") else None
            if not _os.access(file_path, _os.R_OK):
                why, kind = "not readable (mode %s)" % oct(file_st.st_mode & 0o777), "unreadable"
            elif damage is not None:
                why, kind = damage, "corrupt"
                if not rebuilds:
                    return problem(kind, why + "; this Triton raises instead of rebuilding it",
                                   where=file_path)
            else:
                continue
        if writable and not (st.st_mode & _stat.S_ISVTX and bad_st is not None
                             and bad_st.st_uid != uid and st.st_uid != uid):
            continue  # Triton builds it again and replaces it
        found = problem(kind, why + "; its dir %s is not writable" % path, bad_st,
                        where=file_path)
        if bad_st is None or bad_st.st_uid == uid:
            found.update(owner_uid=st.st_uid, owner=owner_name(st.st_uid))
            if st.st_uid != uid and kind != "corrupt":
                found["kind"] = "foreign_owner"
        return found
    return None


def replace_blocked(source, target):
    """The error os.replace(source, target) would raise, without replacing the real entry:
    a dir at the target, or a sticky entry dir and another user's file."""
    try:
        st = _os.lstat(target)
    except FileNotFoundError:
        return None
    except OSError as e:
        return e
    if _stat.S_ISDIR(st.st_mode):
        return IsADirectoryError(_errno.EISDIR, _os.strerror(_errno.EISDIR), source, None,
                                 target)
    uid = _os.geteuid()
    parent = _os.stat(_os.path.dirname(target))
    if parent.st_mode & _stat.S_ISVTX and uid not in (0, st.st_uid, parent.st_uid):
        return PermissionError(_errno.EPERM, _os.strerror(_errno.EPERM), source, None, target)
    return None


def proof_manager(base, cache, made, written, keys, name, hits):
    """Triton's own FileCacheManager over the workload's real cache, read as it is: it creates
    the entry dir a key needs (removed again if the proof leaves it empty), reads and loads the
    real entries, and writes what Triton would put into a tmp.pid_* dir of the real entry (as
    Triton does before its os.replace), from which the module is loaded; the real entry is never
    replaced. `written` collects those dirs for removal, `hits` the entries' files it found."""

    def __init__(self, *args, **kwargs):
        # Whatever this release's manager takes: the key first (every release so far), then
        # override and dump (2.1-3.9), by position or by name.
        key = args[0] if args else kwargs.get("key")
        flags = [*args[1:3], kwargs.get("override"), kwargs.get("dump")]
        if isinstance(key, str) and not any(flags):
            keys.append(key)
            try:
                make_dirs(_os.path.join(cache, key), made)
            except OSError:
                pass  # Triton's own os.makedirs below raises it as the workload sees it
        base.__init__(self, *args, **kwargs)

    def entry_hit(self, filename, found):
        # get_file and get_group ask has_file (every release with it): an existing file of the
        # workload's own entries that this build then loads instead of compiling.
        where = str(getattr(self, "cache_dir", None) or "")
        if found and where.startswith(cache):
            hits.append(_os.path.join(where, str(filename)))
        return found

    def has_file(self, filename):
        return entry_hit(self, filename, base.has_file(self, filename))

    def get_file(self, filename):
        return entry_hit(self, filename, base.get_file(self, filename))

    def put(self, data, filename, binary=True):
        if not str(getattr(self, "cache_dir", None) or "").startswith(cache):
            return base.put(self, data, filename, binary)
        binary = isinstance(data, bytes)
        temp_dir = _os.path.join(self.cache_dir, "tmp.pid_%d_%s" % (_os.getpid(), name))
        make_dirs(temp_dir, written)  # Triton's os.makedirs(temp_dir), each dir noted
        temp_path = _os.path.join(temp_dir, filename)
        with open(temp_path, "wb" if binary else "w") as handle:
            handle.write(data if binary else str(data))
        blocked = replace_blocked(temp_path, self._make_path(filename))
        if blocked is not None:
            raise blocked
        return temp_path
    methods = {"__init__": __init__, "put": put}
    if callable(getattr(base, "has_file", None)):
        methods["has_file"] = has_file
    else:
        methods["get_file"] = get_file
    return type(base.__name__, (base,), methods)


def swap_manager(cache_module, old, new):
    """Triton's file cache manager replaced by `new` where it is `old`: FileCacheManager, which
    get_cache_manager() looks up at each call (3.4+), and the module's __cache_cls, which it
    returns instead in 2.1-3.3 (bound to FileCacheManager at import)."""
    if getattr(cache_module, "FileCacheManager", None) is old:
        cache_module.FileCacheManager = new
    if getattr(cache_module, "__cache_cls", None) is old:
        setattr(cache_module, "__cache_cls", new)


class OwnPath:
    """The workload's real build through its real cache dir and entries (`proof_manager`), or,
    where this Triton has no FileCacheManager to read them through (or the workload sets its
    own TRITON_CACHE_MANAGER), in a throw-away subdirectory of it; its temp dirs in
    throw-away subdirectories."""

    def __init__(self, triton, env, name, size=65536):
        self.triton, self.env, self.name = triton, env, name
        self.size = size    # of a module Triton builds: a bare errno's write is redone with it
        self.made = []      # directories created, parents first: removed in reverse
        self.throwaway = []  # our own subdirectories: removed whole
        self.written = []   # what the proof's cache manager created in real entries
        self.keys = []      # the keys Triton asked its cache manager for
        self.hits = []      # the existing entries' files it found (and loaded, not built)
        self.runs = []      # the compiler runs of this build
        self.report = {"cache_dir": triton_cache_dir(triton, env)}
        self.saved = {}
        self.patched = None
        self.proof = None
        self.custom = False  # the workload's own cache manager: entries the probe cannot see
        self.suspended = None

    def real_manager(self):
        """(triton.runtime.cache, its FileCacheManager) when the proof can go through the
        real entries, else None."""
        if self.env.get("TRITON_CACHE_MANAGER") or _os.environ.get("TRITON_CACHE_MANAGER"):
            self.custom = True
            return None  # the workload's own manager keeps its entries elsewhere
        try:
            import triton.runtime.cache as cache_module
        except BaseException:
            return None
        base = getattr(cache_module, "FileCacheManager", None)
        if not isinstance(base, type) or not callable(
                getattr(cache_module, "get_cache_manager", None)):
            return None
        knobs = triton_knobs(self.triton)
        try:
            if knobs is not None and knobs.cache.manager_class:
                self.custom = True
                return None
        except Exception:
            pass
        return cache_module, base

    def prepare(self):
        rep = self.report
        cache = rep["cache_dir"]
        rep["cache_space"] = space_of(cache)
        rep["cache_existed"] = _os.path.isdir(cache)
        py_tmp, failure = python_tempdir(self.env)
        rep["python_tmp"], rep["gcc_tmp"] = py_tmp, gcc_tempdir(self.env)
        rep["tmp_space"] = space_of(rep["gcc_tmp"])
        if failure:
            failure["where"] = "tmp"
            return failure
        real = self.real_manager()
        probe_cache = cache if real else _os.path.join(cache, self.name)
        rep["probe_cache"] = probe_cache
        rep["through"] = "entries" if real else "subdir"
        if real:
            rep["entries"] = guarded(audit_entries, cache, rebuilds_bad_entries(self.triton),
                                     self.name)
        # From here on this process runs as the workload does, whatever fails next: FLA and
        # the frameworks' detections meet the same dirs (and the same failure) afterwards.
        self.saved = {"TRITON_CACHE_DIR": _os.environ.get("TRITON_CACHE_DIR"),
                      "TMPDIR": _os.environ.get("TMPDIR"), "tempdir": _tempfile.tempdir}
        _os.environ["TRITON_CACHE_DIR"] = probe_cache
        try:
            make_dirs(probe_cache, self.made)
        except OSError as e:
            failure = failure_of(e)
            failure["where"] = "cache"
            failure["step"] = "os.makedirs(%s)" % probe_cache
            return failure
        if real:
            cache_module, base = real
            self.proof = proof_manager(base, cache, self.made, self.written, self.keys,
                                       self.name, self.hits)
            swap_manager(cache_module, base, self.proof)
            self.patched = real
        else:
            self.throwaway.append(probe_cache)
        subs = {}
        for key, where in (("python_tmp", py_tmp), ("gcc_tmp", rep["gcc_tmp"])):
            if where in subs:
                continue
            try:
                subs[where] = _os.path.join(where, self.name)
                _os.mkdir(subs[where], 0o700)
                self.throwaway.append(subs[where])
            except OSError as e:
                subs[where] = None
                rep[key + "_error"] = failure_of(e)
        emit("own-made", {"made": self.made, "throwaway": self.throwaway})
        # Run as the workload runs: its cache (in our subdir), its temp dirs (in ours).
        gcc_sub = subs.get(rep["gcc_tmp"])
        if gcc_sub:
            _os.environ["TMPDIR"] = gcc_sub
        elif self.env.get("TMPDIR") is not None:
            _os.environ["TMPDIR"] = self.env["TMPDIR"]
        else:
            _os.environ.pop("TMPDIR", None)
        _tempfile.tempdir = subs.get(py_tmp) or py_tmp
        return None

    def attempt(self, target_of):
        """get_current_target() as the workload's process runs it; finish() completes the
        report. An error of the proof's own cache manager (a Triton whose manager takes other
        arguments or calls other methods) is the probe's: the path is proved again without
        it, in a throw-away subdirectory of the cache."""
        rep = self.report
        emit("own-start", {})  # the fresh-cache attempt waits for this one: see its check
        failure = self.prepare()
        if failure is None:
            raced = False
            for _ in range(4):
                reset_driver(self.triton)
                first = len(COMPILER_RUNS)
                try:
                    rep["target"] = target_of(current_target(self.triton))
                    rep["ok"] = True
                    failure = None
                except BaseException as e:
                    failure = failure_of(e)
                    failure["compiler"] = COMPILER_RUNS[first:]
                    step = failure.get("probe_step")
                    if step == "check_call" and self.untraced(failure):
                        continue  # the tracer's own error: prove the build without it
                    if step and self.patched and self.without_proof(failure):
                        continue  # the proof manager's: prove it in a throw-away subdir
                    if not raced and self.removed_meanwhile(failure):
                        raced = True
                        continue  # once: another process removed a dir of the cache mid-build
                self.runs = COMPILER_RUNS[first:]
                break
        if failure is not None:
            rep["ok"] = False
            rep["failure"] = failure
        if self.patched:
            rep["keys"] = sorted(set(self.keys))
            rep["hits"] = sorted(set(self.hits))
            emit("own-made", {"made": self.made, "throwaway": self.throwaway,
                              "written": self.written})
        return rep

    def without_proof(self, failure):
        """The proof's manager put back to Triton's own, and the build pointed at a
        throw-away subdirectory of the workload's cache (True), after its own error."""
        rep = self.report
        self.restore_manager()
        rep["instrumentation"] = {"error": failure.get("error"), "step": failure["probe_step"],
                                  "what": "the proof's cache manager over the real entries"}
        probe_cache = _os.path.join(rep["cache_dir"], self.name)
        try:
            make_dirs(probe_cache, self.made)
        except OSError:
            return False
        self.throwaway.append(probe_cache)
        rep["probe_cache"], rep["through"] = probe_cache, "subdir"
        self.keys, self.hits = [], []
        _os.environ["TRITON_CACHE_DIR"] = probe_cache
        return True

    def removed_meanwhile(self, failure):
        """Whether an ENOENT is a dir of the cache (or above it) that another process removed
        while this build ran (a concurrent probe's clean-up of the dirs it made, a job's rm):
        Triton creates every missing dir of its cache with os.makedirs, so a missing one is
        no failure of the workload's. The dirs are made again (True) for one more build."""
        cache, missing = self.report["cache_dir"], failure.get("filename")
        if failure.get("errno") != "ENOENT" or not missing or not (
                missing == cache or missing.startswith(cache.rstrip("/") + "/")):
            return False
        try:
            make_dirs(self.report.get("probe_cache") or cache, self.made)
        except OSError:
            return False
        return True

    def fresh_dir(self, fallback):
        """A new throw-away subdirectory of the workload's cache dir for the fresh-cache
        attempt (removed with the others), or `fallback` where none can be made there."""
        path = _os.path.join(self.report["cache_dir"], self.name + "-fresh")
        try:
            make_dirs(path, self.made)
        except OSError:
            return fallback
        self.throwaway.append(path)
        return path

    def untraced(self, failure):
        """The compiler tracer removed after its own error (True): the build is proved
        without it (the toolchain's proof is then the probe's own test compile)."""
        if not untrace_compiler():
            return False
        self.report["instrumentation"] = {"error": failure.get("error"),
                                          "step": failure["probe_step"],
                                          "what": "the compiler runs' tracer"}
        return True

    def restore_manager(self):
        if self.patched:
            cache_module, base = self.patched
            swap_manager(cache_module, self.proof, base)
            self.patched = None

    def built_from_nothing(self):
        """True when this build proved what a build in a fresh cache proves: it succeeded,
        compiled (every compiler run it made succeeded) and loaded no existing entry: the
        proof's manager saw no hit in the real entries, or its cache was the probe's new
        subdirectory under Triton's own file cache (no workload manager keeps entries
        elsewhere)."""
        if not self.report.get("ok") or not self.runs:
            return False
        if any(run.get("rc") or run.get("error") for run in self.runs):
            return False
        if self.report.get("through") == "entries":
            # Triton asked the proof's manager for its keys (so it saw every hit), and none hit.
            return bool(self.keys) and not self.hits
        return self.report.get("through") == "subdir" and not self.custom

    def finish(self):
        """A bare OSError (a write has no path): where the same write fails."""
        failure = self.report.get("failure") or {}
        if failure.get("errno") and not failure.get("filename") and not failure.get("where"):
            failure["where"] = self.locate(failure["errno"])
        return self.report

    def suspend(self):
        """Back to the probe's own state (its fresh-cache attempt runs there); resume()
        returns to the workload's."""
        self.suspended = ({key: _os.environ.get(key) for key in ("TRITON_CACHE_DIR", "TMPDIR")},
                          _tempfile.tempdir, self.patched)
        self.restore()

    def resume(self):
        if self.suspended is None:
            return
        env, tempdir, patched = self.suspended
        self.suspended = None
        put_env(env)
        _tempfile.tempdir = tempdir
        if patched:
            swap_manager(patched[0], patched[1], self.proof)
            self.patched = patched

    def locate(self, code):
        """A bare OSError (a write has no path): do the same write in each dir it may be."""
        where, found = reproduce(code, (("cache", self.report.get("probe_cache")),
                                        ("tmp", _tempfile.tempdir),
                                        ("tmp", _os.environ.get("TMPDIR"))), self.size)
        if found:
            self.report["reproduced"] = found
        return where

    def restore(self):
        self.restore_manager()
        put_env({key: value for key, value in self.saved.items() if key != "tempdir"})
        if "tempdir" in self.saved:
            _tempfile.tempdir = self.saved["tempdir"]

    def clean(self):
        self.restore()
        for path in reversed(self.written):
            if _os.path.basename(path).startswith("tmp.pid_"):
                _shutil.rmtree(path, ignore_errors=True)
            else:
                try:
                    _os.rmdir(path)
                except OSError:
                    pass
        for path in reversed(self.throwaway):
            _shutil.rmtree(path, ignore_errors=True)
        for path in reversed(self.made):
            try:
                _os.rmdir(path)  # only if empty: another job may have written there since
            except OSError:
                pass


def truthy(value):
    """Triton's getenv_bool: on, true or 1, any case."""
    return (value or "").strip().lower() in ("1", "true", "on")


def knob_report(triton, env):
    """The environment as this Triton reads it (its knobs where it has them)."""
    knobs = triton_knobs(triton)
    out = {"knobs": knobs is not None}
    try:
        value = knobs.runtime.interpret if knobs is not None else (
            env.get("TRITON_INTERPRET", "0") == "1")  # Triton <= 3.3
        out["interpret"] = value if isinstance(value, bool) else None
    except Exception as e:
        out["interpret_error"] = err(e)
    if knobs is not None:
        for key, read in (("cache_dir", lambda: knobs.cache.dir),
                          ("home_dir", lambda: knobs.cache.home_dir),
                          ("dump_dir", lambda: knobs.cache.dump_dir),
                          ("override_dir", lambda: knobs.cache.override_dir),
                          ("dump_ir", lambda: knobs.compilation.dump_ir),
                          ("override", lambda: knobs.compilation.override),
                          ("always_compile", lambda: knobs.compilation.always_compile),
                          ("build_impl", lambda: knobs.build.impl and repr(knobs.build.impl))):
            try:
                value = read()
                out[key] = value if isinstance(value, (str, bool, int)) or value is None else (
                    repr(value))
            except Exception as e:
                out[key + "_error"] = err(e)
    return out


def inductor_report(torch_dir, env, py_tmp, name):
    """torch.compile's way to its first kernel, outside Triton: the user name it looks up,
    its cache dir (TORCHINDUCTOR_CACHE_DIR, else <tempdir>/torchinductor_<user>) created as
    inductor does, its config's device detection and compiler. Not has_triton(): it imports
    torch._dynamo (3.5 s on an H100, longer than --deep's kernel), and what it asks of
    Triton and the GPU the probe's own checks ask."""
    out = {}
    import getpass
    try:
        out["user"] = getpass.getuser()
    except BaseException as e:
        out["user_error"] = failure_of(e)
    cache = env.get("TORCHINDUCTOR_CACHE_DIR")
    if cache is None and "user" in out:
        import re as _re
        cache = _os.path.join(py_tmp or "/tmp", "torchinductor_" + _re.sub(
            r'[\\/:*?"<>|]', "_", out["user"]))
    out["cache_dir"] = cache
    if cache:
        made = []
        probe = _os.path.join(cache, name)
        try:
            make_dirs(probe, made)
            found = write_test(probe, 65536)
            if found:
                out["cache_error"] = dict(found, where="cache")
        except OSError as e:
            out["cache_error"] = dict(failure_of(e), where="cache")
        finally:
            for path in reversed(made):
                _shutil.rmtree(path, ignore_errors=True) if path == probe else None
                try:
                    _os.rmdir(path)
                except OSError:
                    pass
        out["cache_space"] = space_of(cache)
    # Inductor's config as its import would set it, read from its own source: importing it
    # imports most of inductor (3.5 s and 120 MB beside torch's 3 s on an H100), which the
    # workload's own start does not pay; the import only where the source says more.
    config = _os.path.join(torch_dir, "_inductor", "config.py")
    try:
        found = source_settings(config, (("triton_disable_device_detection", None),
                                         ("cxx", "cpp")))
        out["disable_device_detection"] = found.get("triton_disable_device_detection") is True
        out["cxx"] = repr(found.get("cxx"))
        out["config_read"] = "source"
    except Exception:
        try:
            from torch._inductor import config as inductor_config
            out["disable_device_detection"] = getattr(
                inductor_config, "triton_disable_device_detection", False) is True
            out["cxx"] = repr(getattr(getattr(inductor_config, "cpp", None), "cxx", None))
            out["config_read"] = "import"
        except BaseException as e:
            out["config_error"] = err(e)
    return out


class NotPlain(ValueError):
    """A setting whose value is more than the environment, constants and sys.platform."""


def plain_value(node):
    """The value of an expression made of constants, the environment (os.environ.get,
    os.getenv, os.environ[...]), sys.platform, comparisons, not/and/or, a conditional and
    tuples, as Python evaluates it; NotPlain for anything else."""
    import ast
    if isinstance(node, ast.Constant):
        return node.value
    if isinstance(node, ast.Tuple):
        return tuple(plain_value(item) for item in node.elts)
    if isinstance(node, ast.Attribute) and _dotted(node) == "sys.platform":
        return sys.platform
    if isinstance(node, ast.Subscript) and _dotted(node.value) == "os.environ":
        index = node.slice
        if type(index).__name__ == "Index":  # Python 3.8's wrapper of the subscript
            index = index.value
        key = plain_value(index)
        if key not in _os.environ:
            raise NotPlain("os.environ[%r] would raise" % (key,))
        return _os.environ[key]
    if isinstance(node, ast.Call) and _dotted(node.func) in ("os.environ.get", "os.getenv") \
            and not node.keywords and 1 <= len(node.args) <= 2:
        args = [plain_value(arg) for arg in node.args]
        return _os.environ.get(args[0], args[1] if len(args) > 1 else None)
    if isinstance(node, ast.UnaryOp) and isinstance(node.op, ast.Not):
        return not plain_value(node.operand)
    if isinstance(node, ast.UnaryOp) and isinstance(node.op, (ast.USub, ast.UAdd)):
        value = plain_value(node.operand)
        if isinstance(value, (int, float)) and not isinstance(value, bool):
            return -value if isinstance(node.op, ast.USub) else value
    if isinstance(node, ast.BoolOp):
        value = None
        for item in node.values:
            value = plain_value(item)
            if bool(value) is isinstance(node.op, ast.Or):
                return value
        return value
    if isinstance(node, ast.IfExp):
        return plain_value(node.body if plain_value(node.test) else node.orelse)
    if isinstance(node, ast.Compare) and len(node.ops) == 1:
        left, right = plain_value(node.left), plain_value(node.comparators[0])
        compare = {ast.Eq: lambda a, b: a == b, ast.NotEq: lambda a, b: a != b,
                   ast.In: lambda a, b: a in b, ast.NotIn: lambda a, b: a not in b,
                   ast.Is: lambda a, b: a is b, ast.IsNot: lambda a, b: a is not b}
        for kind, function in compare.items():
            if isinstance(node.ops[0], kind):
                return function(left, right)
    raise NotPlain(type(node).__name__)


def _dotted(node):
    import ast
    parts = []
    while isinstance(node, ast.Attribute):
        parts.append(node.attr)
        node = node.value
    if isinstance(node, ast.Name):
        parts.append(node.id)
        return ".".join(reversed(parts))
    return None


def source_settings(path, wanted):
    """{name: value} of the settings `wanted` ((name, its class or None for the module's
    top level)) as the module at `path` sets them at import, read from its source
    (`plain_value`); a name it never sets is left out; NotPlain where one is set otherwise,
    or set twice."""
    import ast
    with open(path, encoding="utf-8") as handle:
        tree = ast.parse(handle.read(), path)
    for node in tree.body:
        # Names the source does not assign may still be attributes: a module __getattr__ or
        # a star import makes them; only the import can say.
        if isinstance(node, ast.ImportFrom):
            made = any(alias.name == "*" for alias in node.names)
        elif isinstance(node, (ast.FunctionDef, ast.AsyncFunctionDef)):
            made = node.name == "__getattr__"
        else:
            targets = getattr(node, "targets", None) or [getattr(node, "target", None)]
            made = any(isinstance(t, ast.Name) and t.id == "__getattr__" for t in targets)
        if made:
            raise NotPlain("the module makes attributes its source does not assign")
    scopes: dict = {None: tree.body}
    for node in tree.body:
        if isinstance(node, ast.ClassDef):
            scopes[node.name] = node.body
    found = {}
    for name, scope in wanted:
        values = [node.value for node in scopes.get(scope, ())
                  if isinstance(node, (ast.Assign, ast.AnnAssign)) and node.value is not None
                  and name in [t.id for t in (node.targets if isinstance(node, ast.Assign)
                                              else [node.target]) if isinstance(t, ast.Name)]]
        if len(values) > 1:
            raise NotPlain("%s is set %d times" % (name, len(values)))
        if values:
            found[name] = plain_value(values[0])
    return found


#: The frameworks' own copies of FLA's device detection: (framework, file under the package).
VENDORED_FLA = (
    ("vllm", "vllm", "third_party/flash_linear_attention/ops/utils.py"),
    ("vllm", "vllm", "model_executor/layers/fla/ops/utils.py"),
    ("sglang", "sglang", "kernels/ops/attention/fla/utils.py"),
    ("sglang", "sglang", "srt/layers/attention/fla/utils.py"),
    ("unsloth_zoo", "unsloth_zoo", "_vendored/fla/utils/_device.py"),
)


def detection_function(path, names=("get_available_device", "_cpu_device_warning")):
    """The framework's own detection functions, compiled from its installed source file."""
    import ast
    with open(path, encoding="utf-8") as handle:
        text = handle.read()
    try:
        tree = ast.parse(text, path)
    except SystemError as e:
        # CPython 3.11.0-3.11.7 (gh-106905): a parse in a finalizer the collector ran during
        # this one resets its recursion count; the parse itself is sound, so once more.
        if "recursion depth mismatch" not in str(e):
            raise
        tree = ast.parse(text, path)
    body = [node for node in tree.body
            if isinstance(node, ast.FunctionDef) and node.name in names]
    if not any(node.name == names[0] for node in body):
        return None
    module = ast.Module(body=body, type_ignores=[])
    return compile(module, path, "exec")


def run_detection(code, triton):
    """Call the compiled get_available_device() with Triton; (backend, warnings, exception)."""
    import functools, warnings
    space = {"triton": triton, "warnings": warnings, "functools": functools,
             "cache": getattr(functools, "cache", functools.lru_cache(maxsize=None)),
             "lru_cache": functools.lru_cache, "logger": None, "__name__": "fleetcheck"}
    exec(code, space)
    with warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("always")
        try:
            return space["get_available_device"](), [str(w.message) for w in caught], None
        except BaseException as e:
            return None, [str(w.message) for w in caught], err(e)


def backend_report(triton):
    """Triton's backends as it discovers them (entry points, or TRITON_BACKENDS_IN_TREE=1),
    which drivers say they are active (what `N active drivers` counts), and which one the
    installed Triton's own `_create_driver()` (runtime/driver.py) picks: its source is run on
    the discovered backends, with each driver's real is_active() and no driver built."""
    out = {"in_tree": _os.environ.get("TRITON_BACKENDS_IN_TREE", "") == "1",
           "default": _os.environ.get("TRITON_DEFAULT_BACKEND")}
    try:
        from importlib.metadata import entry_points
        eps = entry_points()
        group = (eps.select(group="triton.backends") if hasattr(eps, "select")
                 else eps.get("triton.backends", []))
        out["entry_points"] = sorted("%s=%s" % (ep.name, ep.value) for ep in group)
        dists = [(ep.name, getattr(ep, "dist", None)) for ep in group]
        out["providers"] = {name: "%s %s" % (dist.name, dist.version)
                            for name, dist in dists if dist is not None}
    except Exception as e:
        out["entry_points_error"] = err(e)
    try:
        import importlib.util
        if importlib.util.find_spec("triton.backends") is None:
            # Triton < 3.0 has no backends package (its RECORD says whether one is missing).
            out["absent"] = True
            return out
        import triton.backends as found_backends
        found = getattr(found_backends, "backends", None)
        if isinstance(found, dict):
            out["discovered"] = sorted(found)
            active = out["active"] = []
            for name, backend in found.items():
                try:
                    if backend.driver.is_active():
                        active.append(name)
                except BaseException as e:
                    out.setdefault("is_active_errors", {})[name] = err(e)
            out["selection"] = selection(found)
    except BaseException as e:
        failure = failure_of(e)
        if failure.get("probe_step"):
            out.update(probe_error=failure["error"], probe_step=failure["probe_step"])
        else:
            out["error"] = failure["error"]
    return out


def selection(found):
    """What the installed Triton's `_create_driver()` does with these backends: the name it
    picks, or the text it raises."""
    import triton.runtime as runtime
    path = _os.path.join(_os.path.dirname(runtime.__file__), "driver.py")
    try:
        with open(path, encoding="utf-8") as handle:
            source = handle.read()
        code = detection_function(path, ("_create_driver",))
    except (OSError, SyntaxError, ValueError) as e:
        return {"file": path, "unavailable": err(e)}
    if code is None:
        return {"file": path, "unavailable": "no _create_driver() in this Triton"}
    out = {"file": path, "reads_default": "TRITON_DEFAULT_BACKEND" in source}

    class Named(type):
        def __repr__(cls):
            return repr(cls.real)

    class Chosen(Exception):
        pass

    def stand_in(name, backend):
        def built(self):
            raise Chosen(name)  # _create_driver() builds the driver it picked: stop there
        driver = Named("Picked", (object,), {"real": backend.driver, "__init__": built,
                                             "is_active": staticmethod(backend.driver.is_active)})
        return type("Backend", (object,), {"driver": driver, "compiler": None})
    space: dict = {"os": _os, "backends": {name: stand_in(name, backend)
                                     for name, backend in found.items()},
             "DriverBase": object, "__name__": "fleetcheck"}
    exec(code, space)
    try:
        space["_create_driver"]()
        out["selected"] = None
    except Chosen as picked:
        out["selected"] = str(picked)
    except BaseException as e:
        out["error"] = err(e)
    return out


def vllm_report():
    """vLLM's own decision, by importing its real modules as the workload does: `import
    vllm.logger` (vllm/__init__, env_override), `vllm.platforms.current_platform` (its platform
    plugins, then the platform class) and `vllm.triton_utils.importing.HAS_TRITON`. vLLM logs
    its reasons (most at debug level, on stdout): its handlers are swapped for one that keeps
    the records while it decides, and put back afterwards."""
    import logging
    records = []

    class Keep(logging.Handler):
        def emit(self, record):
            try:
                records.append([record.levelname, record.name, record.getMessage()[:600]])
            except Exception:
                pass
    out = {}
    try:
        import vllm.logger  # noqa: F401  (vllm/__init__ and its logging configuration)
    except BaseException as e:
        out["import_error"] = failure_of(e)
        return out
    log = logging.getLogger("vllm")
    saved = (list(log.handlers), log.level)
    log.handlers = [Keep(logging.DEBUG)]
    log.setLevel(logging.DEBUG)
    try:
        import vllm.platforms as platforms
        found = platforms.current_platform
        out["platform"] = type(found).__name__
        out["platform_module"] = type(found).__module__
        out["device_type"] = str(getattr(found, "device_type", "") or "")
    except BaseException as e:
        out["platform_error"] = failure_of(e)
    if "platform_error" not in out:
        try:
            from vllm.triton_utils.importing import HAS_TRITON
            out["has_triton"] = bool(HAS_TRITON)
        except BaseException as e:
            out["triton_error"] = failure_of(e)
    log.handlers, level = saved
    log.setLevel(level)
    out["log"] = records[-40:]
    return out


#: What FLA's kernels import (fla/ops, fla/modules): the requirements of its distributions the
#: probe judges (transformers and datasets serve its models and benchmarks only).
FLA_KERNEL_NEEDS = ("einops", "torch", "triton", "fla-core")


def release_key(text):
    """(2, 7, 0) from '2.7.0+cu130', '2.7.0rc1', '2.7'; () when it starts with no number."""
    import re as _re
    found = _re.match(r"\s*v?(\d+(?:\.\d+)*)", text or "")
    return tuple(int(p) for p in found.group(1).split(".")) if found else ()


def satisfies(version, spec):
    """PEP 440's comparison operators on release numbers (local and pre-release parts ignored)."""
    have = release_key(version)
    for clause in [c.strip() for c in spec.split(",") if c.strip()]:
        for op in ("~=", "==", "!=", ">=", "<=", ">", "<"):
            if clause.startswith(op):
                want = release_key(clause[len(op):].rstrip(".*"))
                size = max(len(have), len(want))
                a, b = have + (0,) * (size - len(have)), want + (0,) * (size - len(want))
                if op == "~=":
                    ok = a >= b and a[:len(want) - 1] == want[:len(want) - 1]
                elif op == "==" and clause.endswith(".*"):
                    ok = have[:len(want)] == want
                else:
                    ok = {"==": a == b, "!=": a != b, ">=": a >= b, "<=": a <= b, ">": a > b,
                          "<": a < b}[op]
                if not ok:
                    return False
                break
    return True


def fla_requirements():
    """Each installed FLA distribution's requirements that its kernels import (unconditional,
    or of its "cuda" extra) against what is installed: the unmet ones."""
    import re as _re
    try:
        from importlib import metadata
    except ImportError:
        return None
    unmet = []
    for dist_name in ("fla-core", "flash-linear-attention"):
        try:
            dist = metadata.distribution(dist_name)
        except Exception:
            continue
        for line in dist.requires or []:
            body, _, marker = line.partition(";")
            marker = marker.strip().replace("'", '"')
            if marker and marker not in ('extra == "cuda"',):
                continue
            found = _re.match(r"\s*([A-Za-z0-9][A-Za-z0-9._-]*)\s*(\[[^\]]*\])?\s*\(?([^)]*)\)?",
                              body)
            if not found:
                continue
            name, spec = found.group(1), found.group(3).strip()
            if name.lower().replace("_", "-") not in FLA_KERNEL_NEEDS:
                continue
            item = {"dist": "%s %s" % (dist_name, dist.version), "requires": body.strip()}
            try:
                installed = metadata.version(name)
            except Exception:
                installed = None
            if installed is None:
                item["problem"] = "not installed"
            elif spec and not satisfies(installed, spec):
                item["problem"] = "%s %s installed" % (name, installed)
            else:
                continue
            item["name"] = name.lower().replace("_", "-")
            item["requires"] = item["requires"].replace(found.group(2) or "\0", "")
            if not any(u["dist"] == item["dist"] and u["name"] == item["name"] for u in unmet):
                unmet.append(item)
    return unmet


def framework_imports(meta):
    """xformers, Liger-Kernel, mamba-ssm and causal-conv1d as the workload meets them: each
    package really imported (their kernels and compiled extensions load at import), then its
    own device decision called: xformers' `_is_triton_available()`, Liger-Kernel's
    `infer_device()`. Their warnings and log records (xformers logs why Triton is off) kept."""
    import importlib, logging, warnings
    records = []

    class Keep(logging.Handler):
        def emit(self, record):
            try:
                records.append(record.getMessage()[:600])
            except Exception:
                pass
    out = {}
    for name, decide in (("xformers", "_is_triton_available"), ("liger_kernel", None),
                         ("mamba_ssm", None), ("causal_conv1d", None)):
        if not meta.get(name + "_dir"):
            continue
        item = out[name] = {}
        del records[:]
        log = logging.getLogger(name)
        log.addHandler(Keep(logging.DEBUG))
        with warnings.catch_warnings(record=True) as caught:
            warnings.simplefilter("always")
            try:
                module = importlib.import_module(name)
                if decide:
                    item[decide] = bool(getattr(module, decide)())
                if name == "liger_kernel":
                    item["infer_device"] = str(importlib.import_module(
                        "liger_kernel.utils").infer_device())
            except BaseException as e:
                item["import_error"] = failure_of(e)
        log.handlers = [h for h in log.handlers if not isinstance(h, Keep)]
        item["log"] = records[-5:]
        item["warnings"] = [str(w.message)[:300] for w in caught][:5]
    return out
