"""Where a graded notebook's process runs: namespaces, a user of its own, a control group.

The grader starts each notebook's process (:mod:`ioattn.teach.runner`) through :func:`plan`,
which takes the strongest of these the machine allows, each where it can:

- **namespaces** (bubblewrap's ``bwrap``, Debian's ``bubblewrap`` package): new PID, network,
  IPC, UTS and mount namespaces. The process sees only read-only copies of what
  :func:`.sandbox.readable` lists (Python, the installed packages, ioattn without its
  answer keys, ``/usr``, ``/lib*``, ``/etc``), a small ``/dev``, the ``/proc`` of its own PID
  namespace and a fresh, size-bounded folder in memory; no network device but its own
  loopback, so no socket of any family reaches anything outside, and no pathname of the
  grader's (a Unix socket, a key file) exists for it. When its first process ends, the kernel
  ends every process of the namespace, however it was started (``fork`` + ``setsid`` too).
- **a user of its own**: where the grader runs as root, each notebook runs as a fresh user id
  that no other process has, so ``RLIMIT_NPROC`` bounds the number of its processes (and
  threads) alone, no classmate can signal or trace it, and the grader can end every process of
  that user when it is done, even without namespaces.
- **a control group** (cgroup v2, or v1's ``memory`` and ``pids`` controllers) where
  ``/sys/fs/cgroup`` is writable: the memory of all the notebook's processes together, and
  their number.

``IOATTN_NO_NAMESPACES`` and ``IOATTN_NO_CGROUP``, set in the grader's environment, turn the
namespaces and the control group off (to see the fallbacks at work on a machine that has
both). Whatever holds is measured from outside by :func:`.sandbox.observed` for the report. Landlock
(:func:`.sandbox.confine`) and a seccomp filter (:func:`.sandbox.forbid`: no new socket of any
family, no tracing, no namespaces) still confine the process inside, and are all there is where
none of the above is available.
"""

from __future__ import annotations

import atexit
import os
import random
import shutil
import signal
import subprocess
import sys
import tempfile
import threading
import time
import weakref
from pathlib import Path

__all__ = ["Cgroup", "Plan", "allowed", "bwrap", "config_dir", "control_groups", "fresh_uid",
           "guard", "plan", "secrets", "sweep", "track"]

#: Processes (and threads) a notebook may have at once, where they can be counted alone.
PROCESSES = 64
#: Bytes of any one file the notebook writes (``RLIMIT_FSIZE``), its standard error included,
#: and of the in-memory folder it writes in.
FILES = 64 << 20
#: The cpu controller's period, in microseconds (a quota of one period: one core).
CPU_PERIOD = 100_000
#: First of the user ids a notebook may run as (a range no distribution gives its users).
UID_BASE, UID_SPAN = 0x5A000000, 1 << 20
#: Where the notebook's fresh folder lies inside the namespaces.
INSIDE = "/tmp/ioattn-run"

_BWRAP: dict = {}


def config_dir() -> Path:
    """The instructor's configuration folder for ioattn (``$XDG_CONFIG_HOME/ioattn``, by
    default ``~/.config/ioattn``): it may hold the grading key, so no notebook may read it."""
    base = os.environ.get("XDG_CONFIG_HOME") or os.path.join(os.path.expanduser("~"),
                                                             ".config")
    return Path(base) / "ioattn"


def secrets() -> list[Path]:
    """What a notebook must never read, even inside a folder it may: the grader's answer keys
    and the instructor's configuration folder."""
    from .sandbox import hidden

    return [hidden(), config_dir().resolve()]


def allowed() -> list[Path]:
    """The folders a notebook may read (:func:`.sandbox.readable`), never the home folder nor
    the instructor's configuration folder or one inside it (one that holds it is kept, the
    configuration folder hidden in it: :func:`secrets`)."""
    from .sandbox import readable

    home = Path(os.path.expanduser("~")).resolve()
    config = config_dir().resolve()
    return [path for path in readable()
            if path.resolve() not in (home, config) and config not in path.resolve().parents]


# ---------------------------------------------------------------------------- bubblewrap
def _flags(root: bool) -> list[str]:
    flags = ["--unshare-pid", "--unshare-net", "--unshare-ipc", "--unshare-uts",
             "--unshare-cgroup-try", "--die-with-parent", "--new-session"]
    if root:        # it gives up root itself (runner._drop_root) once it has loaded Python
        return flags + ["--cap-drop", "ALL", "--cap-add", "CAP_SETUID", "--cap-add",
                        "CAP_SETGID"]
    return ["--unshare-user", "--disable-userns", *flags]


def bwrap() -> str:
    """Why bubblewrap cannot make the namespaces here, or ``""`` if it can (tried once)."""
    if os.environ.get("IOATTN_NO_NAMESPACES"):
        return "turned off (IOATTN_NO_NAMESPACES is set)"
    root = os.geteuid() == 0
    if root not in _BWRAP:
        exe = shutil.which("bwrap")
        if exe is None:
            _BWRAP[root] = "no bubblewrap (the Debian package bubblewrap provides bwrap)"
        else:
            trial = [exe, *_flags(root), *_binds(FILES), "--", sys.executable, "-c", ""]
            try:
                done = subprocess.run(trial, capture_output=True, text=True, timeout=60,
                                      stdin=subprocess.DEVNULL)
                why = done.stderr.strip()[-300:] or f"exit code {done.returncode}"
                _BWRAP[root] = "" if done.returncode == 0 else f"bubblewrap failed: {why}"
            except (OSError, subprocess.SubprocessError) as exc:
                _BWRAP[root] = f"bubblewrap failed: {exc}"
    return _BWRAP[root]


def _binds(memory_folder: int) -> list[str]:
    """bwrap's arguments for the file system: the allowed folders read-only, the secrets
    inside them hidden, a minimal /dev, the PID namespace's /proc, the fresh folder."""
    args = []
    paths = sorted(allowed(), key=lambda p: len(p.parts))
    above = {a for p in paths for a in p.parents if a != Path("/")}
    for folder in sorted(above, key=lambda p: len(p.parts)):   # listable: bwrap's own are not
        if not any(folder == p or p in folder.parents for p in paths):
            args += ["--perms", "0755", "--dir", str(folder)]
    for path in paths:
        if path.is_symlink():                    # /lib -> usr/lib on a merged /usr
            args += ["--symlink", os.readlink(path), str(path)]
        else:
            args += ["--ro-bind", str(path), str(path)]
    from .sandbox import abi, hidden

    for secret in secrets():
        if secret == hidden().resolve() and abi():
            continue          # Landlock refuses its files (PermissionError, as without bwrap)
        if any(p.resolve() == secret or p.resolve() in secret.parents for p in paths) and (
                secret.is_dir()):
            args += ["--perms", "0000", "--tmpfs", str(secret)]
    args += ["--dev", "/dev", "--proc", "/proc", "--perms", "1777", "--size",
             str(memory_folder), "--tmpfs", INSIDE, "--chdir", INSIDE]
    return args


# ---------------------------------------------------------------------------- the user
def fresh_uid() -> int:
    """A user id no process has now, for one notebook (the grader runs as root)."""
    taken = {uid for _, uid in _processes()}
    while True:
        uid = UID_BASE + random.randrange(UID_SPAN)
        if uid not in taken:
            return uid


def _processes():
    """``(pid, real user id)`` of every process (read from its status: the owner of an
    undumpable process's /proc folder is root, whoever it runs as)."""
    for entry in os.listdir("/proc"):
        if entry.isdigit():
            try:
                with open(f"/proc/{entry}/status") as f:
                    for line in f:
                        if line.startswith("Uid:"):
                            yield int(entry), int(line.split()[1])
                            break
            except (OSError, ValueError, IndexError):
                pass


def sweep(uid: int) -> int:
    """End every process of user ``uid`` (a notebook's own); how many were signalled."""
    hit = 0
    for _ in range(100):                     # a process may fork while others are signalled
        found = 0
        for pid, owner in _processes():
            if owner == uid:
                try:
                    os.kill(pid, signal.SIGKILL)
                    found += 1
                except OSError:
                    pass
        hit += found
        if not found:
            break
    return hit


# ---------------------------------------------------------------------------- cgroups
class Cgroup:
    """A control group of the notebook's processes, beneath the grader's own: their memory
    together (``memory.max``, v1 ``memory.limit_in_bytes``), their number (``pids.max``) and,
    where the cpu controller is there, one core's time for all of them (``cpu.max``, v1
    ``cpu.cfs_quota_us``), so that a notebook's processes cannot starve a classmate's."""

    def __init__(self, dirs: dict, version: int):
        self.dirs, self.version = dirs, version       # controller -> folder
        self.cpus = 0                                 # cores it may use (0: no bound)

    @classmethod
    def make(cls, name: str, memory: int, processes: int):
        """The group, or ``None`` where the machine gives none (no writable cgroup file
        system, or no memory and pids controllers)."""
        if os.environ.get("IOATTN_NO_CGROUP"):
            return None
        try:
            return cls._make(name, memory, processes)
        except OSError:
            return None

    @classmethod
    def _make(cls, name, memory, processes):
        own = _own_groups()
        _prune(own)
        root = Path("/sys/fs/cgroup")
        if (root / "cgroup.controllers").is_file() and "" in own:
            parent = root / own[""].lstrip("/")
            have = (parent / "cgroup.subtree_control").read_text().split()
            if not {"memory", "pids"} <= set(have):
                (parent / "cgroup.subtree_control").write_text("+memory +pids")
            group = parent / name
            group.mkdir()
            self = cls({"memory": group, "pids": group}, 2)
            try:
                _write(group / "memory.max", memory)
                _write(group / "memory.swap.max", 0, missing_ok=True)
                _write(group / "memory.oom.group", 1, missing_ok=True)
                _write(group / "pids.max", processes)
            except OSError:
                self.remove()
                raise
            try:
                if "cpu" not in have:
                    (parent / "cgroup.subtree_control").write_text("+cpu")
                _write(group / "cpu.max", f"{CPU_PERIOD} {CPU_PERIOD}")
                self.cpus = 1
            except OSError:                      # no cpu controller: time limits only
                pass
            return self
        dirs = {}
        try:
            for controller in ("memory", "pids"):
                base = root / controller
                if controller not in own or not base.is_dir():
                    raise OSError(f"no cgroup v1 {controller} controller")
                group = base / own[controller].lstrip("/") / name
                group.mkdir()
                dirs[controller] = group
            self = cls(dirs, 1)
            _write(dirs["memory"] / "memory.limit_in_bytes", memory)
            _write(dirs["memory"] / "memory.memsw.limit_in_bytes", memory, missing_ok=True)
            _write(dirs["pids"] / "pids.max", processes)
        except OSError:
            cls(dirs, 1).remove()
            raise
        if "cpu" in own and (root / "cpu").is_dir():
            group = root / "cpu" / own["cpu"].lstrip("/") / name
            try:
                group.mkdir()
                dirs["cpu"] = group
                _write(group / "cpu.cfs_period_us", CPU_PERIOD)
                _write(group / "cpu.cfs_quota_us", CPU_PERIOD)
                self.cpus = 1
            except OSError:                      # no cpu controller: time limits only
                pass
        return self

    def files(self) -> list[str]:
        """The ``cgroup.procs`` files a starting process writes itself into."""
        return sorted({str(d / "cgroup.procs") for d in self.dirs.values()})

    def pids(self) -> set[int]:
        found = set()
        for d in self.dirs.values():
            try:
                found |= {int(p) for p in (d / "cgroup.procs").read_text().split()}
            except OSError:
                pass
        return found

    def oom(self) -> bool:
        """Whether the kernel ended one of its processes for the group's memory."""
        name = "memory.events" if self.version == 2 else "memory.oom_control"
        try:
            text = (self.dirs["memory"] / name).read_text()
        except OSError:
            return False
        fields = dict(line.split()[:2] for line in text.splitlines() if len(line.split()) > 1)
        return int(fields.get("oom_kill", 0)) > 0

    def kill(self) -> None:
        """End every process in the group."""
        if self.version == 2:
            try:
                _write(self.dirs["memory"] / "cgroup.kill", 1)
            except OSError:
                pass
        for _ in range(100):
            pids = self.pids()
            if not pids:
                return
            for pid in pids:
                try:
                    os.kill(pid, signal.SIGKILL)
                except OSError:
                    pass

    def remove(self) -> None:
        """End its processes and remove the group (once they are gone)."""
        self.kill()
        for d in self.dirs.values():
            for _ in range(1000):
                try:
                    d.rmdir()
                    break
                except FileNotFoundError:
                    break
                except OSError:                  # its last processes are still exiting
                    time.sleep(0.01)


def control_groups() -> str:
    """Why the grader can make no control group for a notebook here, or ``""`` if it can."""
    if os.geteuid() != 0:
        return "the grader does not run as root"
    if os.environ.get("IOATTN_NO_CGROUP"):
        return "turned off (IOATTN_NO_CGROUP is set)"
    group = Cgroup.make(f"ioattn-{os.getpid()}-trial", 1 << 30, PROCESSES)
    if group is None:
        return "no writable cgroup file system with the memory and pids controllers"
    group.remove()
    return ""


def _prune(own: dict) -> None:
    """Remove the empty groups of graders that are gone (ended by SIGKILL, say)."""
    root = Path("/sys/fs/cgroup")
    for controller, path in own.items():
        parent = root / (controller if controller and (root / controller).is_dir() else "")
        parent = parent / path.lstrip("/")
        try:
            stale = [d for d in parent.glob("ioattn-*-*")
                     if d.is_dir() and not Path(f"/proc/{d.name.split('-')[1]}").exists()]
        except OSError:
            continue
        for d in stale:
            try:
                d.rmdir()
            except OSError:
                pass


def _own_groups() -> dict:
    """The grader's own groups: controller (``""`` for v2) -> path."""
    own = {}
    for line in Path("/proc/self/cgroup").read_text().splitlines():
        _, controllers, path = line.split(":", 2)
        for c in controllers.split(","):
            own[c] = path
    return own


def _write(path: Path, value, missing_ok: bool = False) -> None:
    if missing_ok and not path.exists():
        return
    path.write_text(str(value))


# ---------------------------------------------------------------------------- the plan
class Plan:
    """How one notebook's process is started: its command, its user, its group, its folder.

    Attributes
    ----------
    argv : list of str
        The command (through bwrap where namespaces are used).
    namespaces : str
        ``""`` if the process runs in namespaces of its own, else why not.
    uid : int or None
        The user it becomes (the grader is root), else ``None``.
    cgroup : Cgroup or None
    folder : str or None
        Its fresh folder on the grader's file system (``None``: it has one in memory only).
    """

    def __init__(self, argv, namespaces, uid, cgroup, folder):
        self.argv, self.namespaces, self.uid = argv, namespaces, uid
        self.cgroup, self.folder = cgroup, folder
        track(self)

    @property
    def cwd(self) -> str:
        return self.folder or "/"

    def close(self) -> None:
        """End every process left and remove the group and the folder."""
        if self.cgroup is not None:
            self.cgroup.remove()
            self.cgroup = None
        if self.uid is not None:
            sweep(self.uid)
        if self.folder is not None:
            shutil.rmtree(self.folder, ignore_errors=True)
            self.folder = None
        _LIVE.discard(self)


def plan(command: list[str], memory: int, *, namespaces: bool = True) -> Plan:
    """The strongest confinement this machine allows for ``command`` (the runner)."""
    root = os.geteuid() == 0
    uid = fresh_uid() if root else None
    why = "not asked for" if not namespaces else bwrap()
    name = f"ioattn-{os.getpid()}-{uid if uid is not None else random.randrange(1 << 30)}"
    cgroup = Cgroup.make(name, memory, PROCESSES) if root else None
    if not why:
        argv = [shutil.which("bwrap"), *_flags(root), *_binds(FILES), "--", *command]
        return Plan(argv, "", uid, cgroup, None)
    folder = tempfile.mkdtemp(prefix="ioattn-run-")
    if uid is not None:
        os.chown(folder, uid, uid)
    return Plan(list(command), why, uid, cgroup, folder)


_LIVE: weakref.WeakSet = weakref.WeakSet()


def track(thing) -> None:
    """Have ``thing.close()`` called if the grader ends while ``thing`` is alive (a
    :class:`Plan`, or a submission that holds one)."""
    _LIVE.add(thing)


def _close_all(*_):
    for thing in sorted(_LIVE, key=lambda t: isinstance(t, Plan)):   # submissions first
        try:
            thing.close()
        except Exception:                   # noqa: BLE001 (the rest must still be closed)
            pass


def _on_signal(signum, frame):
    _close_all()
    signal.signal(signum, signal.SIG_DFL)
    os.kill(os.getpid(), signum)


_GUARDS: set = set()


def guard() -> None:
    """Remove what live plans hold when the grader ends: at exit, and on SIGTERM or SIGHUP
    where nothing else handles them (set from the main thread only, as Python requires)."""
    if "atexit" not in _GUARDS:
        _GUARDS.add("atexit")
        atexit.register(_close_all)
    if "signals" in _GUARDS or threading.current_thread() is not threading.main_thread():
        return
    _GUARDS.add("signals")
    for sig in (signal.SIGTERM, signal.SIGHUP):
        if signal.getsignal(sig) == signal.SIG_DFL:
            signal.signal(sig, _on_signal)


def python_path() -> str:
    """The folder the grader imports ioattn from, so the runner imports the same code."""
    import ioattn

    return str(Path(ioattn.__file__).resolve().parent.parent)


if __name__ == "__main__":  # pragma: no cover
    print(bwrap() or "namespaces: yes", file=sys.stderr)
