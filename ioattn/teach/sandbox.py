"""What a graded notebook's process may touch: files, network and signals (Landlock).

The notebook's process (:mod:`ioattn.teach.runner`) confines itself with the Linux Landlock
security module after it has loaded Python, NumPy, IPython and ioattn, and before it reads the
notebook. From then on, for that process and anything it starts, the kernel allows

- reading (not writing) the Python installation, the installed packages, the ``ioattn`` package
  directory itself (not the folder around it, so not a checkout's tests or anyone's answer key)
  except :mod:`ioattn.teach.keys` (the grader's own answers, :func:`hidden`), and the system's
  shared libraries, fonts and configuration (``/usr``, ``/lib*``, ``/etc``);
- reading and writing its own fresh folder, and ``/dev/null``;

and nothing else: no other file of the grader's user (an instructor's private masters, other
students' notebooks, ``/proc``), no TCP connection (ABI 4), no signal to a process outside its
own domain and no abstract Unix socket (ABI 6), whoever the process runs as (Landlock binds
root too). This holds where the kernel has Landlock (Linux 5.13 and later with Landlock
enabled); :func:`confine` says what it could enforce.

Where the machine allows more, the grader starts the process in namespaces of its own, as a
user of its own and in a control group (:mod:`ioattn.teach.jail`); :func:`observed` is what the
grading report quotes: what the grader itself sees of the process from outside, never what the
notebook says of itself.
"""

from __future__ import annotations

import errno
import os
import sys
import sysconfig
from pathlib import Path

__all__ = ["abi", "confine", "hidden", "observed", "readable"]

#: System folders every user reads: shared libraries, fonts, time zones, the loader's cache.
SYSTEM = ("/usr", "/lib", "/lib64", "/etc")


def abi() -> int:
    """The kernel's Landlock ABI version, or 0 where there is none."""
    try:
        import landlockpy
    except ImportError:
        return 0
    try:
        return int(landlockpy.abi_version()) if landlockpy.supported() else 0
    except OSError:
        return 0


def readable() -> list[Path]:
    """The folders a confined notebook may read: Python, its packages, ioattn, the system's."""
    import ioattn

    paths = {sys.base_prefix, sys.prefix, *SYSTEM, str(Path(ioattn.__file__).parent)}
    for key in ("stdlib", "platstdlib", "purelib", "platlib"):
        paths.add(sysconfig.get_paths()[key])
    for entry in sys.path:      # installed packages only: never a folder ioattn is imported from
        if entry and Path(entry).name in ("site-packages", "dist-packages"):
            paths.add(entry)
    return sorted(Path(p) for p in paths if p and os.path.exists(p))


def hidden() -> Path:
    """The folder a confined notebook may not read, wherever it is: the grader's answers."""
    import ioattn

    return Path(ioattn.__file__).resolve().parent / "teach" / "keys"


def _allow(rules, root: Path, access, secrets) -> None:
    """Allow ``access`` on ``root``'s hierarchy, except the ``secrets`` that lie inside: then
    on each entry beside the paths down to them, one rule each (the folders on the path may
    still be listed, which imports need; the files in a secret cannot be read)."""
    from landlockpy import AccessFS

    root = root.resolve()
    inside = [s for s in secrets if s == root or root in s.parents]
    if not inside:
        if not root.is_dir():                    # a file takes only the rights of files
            access &= AccessFS.READ_FILE | AccessFS.EXECUTE | AccessFS.WRITE_FILE
        rules.allow_path(root, access)
        return
    rules.allow_path(root, access & AccessFS.READ_DIR)
    if root in inside:
        return
    for entry in root.iterdir():
        _allow(rules, entry, access, inside)


def _threads() -> int:
    try:
        return len(os.listdir("/proc/self/task"))
    except OSError:
        return 1


def confine(folder: str | os.PathLike, *, read=None, hide=None) -> str:
    """Confine this process (and its children) to :func:`readable` and ``folder``.

    ``read`` and ``hide``, if given, replace :func:`readable` and the folders never to read
    (by default :func:`hidden`): the grader's lists (:func:`.jail.allowed`,
    :func:`.jail.secrets`), made where the instructor's home and configuration are known.

    Returns what holds, in words, for the grading report. Raises ``RuntimeError`` if the
    process has more than one thread: Landlock restricts only the thread that asks (and its
    future threads), so a thread started earlier would stay free.
    """
    version = abi()
    if version == 0:
        return ("no file confinement (the kernel has no Landlock): the notebook can read "
                "every file its user can")
    if _threads() > 1:
        raise RuntimeError("the notebook's process has more than one thread; "
                           "it cannot be confined")
    from landlockpy import AccessFS, Ruleset, Scope

    access = AccessFS.READ_FILE | AccessFS.READ_DIR | AccessFS.EXECUTE
    with Ruleset(scoped=Scope.ABSTRACT_UNIX_SOCKET | Scope.SIGNAL) as rules:
        everything = rules.handled_fs
        hide = [Path(p).resolve() for p in (hide if hide is not None else [hidden()])]
        for path in (readable() if read is None else [Path(p) for p in read]):
            _allow(rules, path, access, hide)
        rules.allow_path(folder, everything)
        rules.allow_path("/dev/null", AccessFS.READ_FILE | AccessFS.WRITE_FILE)
        rules.allow_path("/dev/urandom", AccessFS.READ_FILE)
        rules.restrict()
        net, scoped = rules.handled_net, rules.scoped
    kept = ["files: only Python, its packages, ioattn and its own folder"]
    if net:
        kept.append("no network")
    if scoped:
        kept.append("no signals out")
    return f"Landlock ABI {version} ({', '.join(kept)})"


#: The system calls :func:`forbid` refuses (``EPERM``): a new socket of any family (the channel
#: to the grader is inherited, so nothing else is needed: no UDP, no pathname Unix socket, which
#: Landlock does not cover); tracing or reading other processes; new namespaces and mounts;
#: kernel keyrings; BPF, perf events, userfaultfd and io_uring (whose requests bypass a filter);
#: file handles that skip path checks; loading kernels or modules.
FORBIDDEN = ("socket", "ptrace", "process_vm_readv", "process_vm_writev", "unshare", "setns",
             "mount", "umount2", "pivot_root", "keyctl", "add_key", "request_key", "bpf",
             "perf_event_open", "userfaultfd", "io_uring_setup", "io_uring_enter",
             "io_uring_register", "open_by_handle_at", "kexec_load", "init_module",
             "finit_module")


def _libseccomp():
    """``pyseccomp``, its libraries found by their sonames: its import asks
    ``ctypes.util.find_library``, which runs ``ldconfig`` in a child and finds nothing where
    the process may not run it (in the namespaces), while the dynamic loader finds them."""
    import ctypes.util

    find = ctypes.util.find_library
    sonames = {"seccomp": "libseccomp.so.2", "c": "libc.so.6"}
    ctypes.util.find_library = lambda name: sonames.get(name) or find(name)
    try:
        import pyseccomp
    finally:
        ctypes.util.find_library = find
    return pyseccomp


def forbid() -> str:
    """Refuse :data:`FORBIDDEN` to this process and its future children with a seccomp filter
    (libseccomp, through ``pyseccomp``), whatever user it runs as; every other call is allowed.

    Returns what holds, in words; where libseccomp or the kernel refuses, says so and confines
    nothing (the grader reads from outside, :func:`observed`, whether a filter holds).
    """
    try:
        pyseccomp = _libseccomp()
    except Exception as exc:      # noqa: BLE001 (whatever the binding raises at import)
        return f"no seccomp filter ({exc})"
    try:
        rules = pyseccomp.SyscallFilter(pyseccomp.ALLOW)
        for name in FORBIDDEN:
            rules.add_rule(pyseccomp.ERRNO(errno.EPERM), name)
        rules.load()
    except Exception as exc:      # noqa: BLE001 (a ctypes binding: whatever it raises)
        return f"no seccomp filter ({exc})"
    return "seccomp: no new socket, no tracing, no namespaces or mounts"


#: The namespaces :func:`observed` compares with the grader's own, and their names in reports.
NAMESPACES = {"pid": "PID", "net": "network", "ipc": "IPC", "mnt": "mount", "user": "user"}


def _namespace(pid, kind: str):
    try:
        return os.readlink(f"/proc/{pid}/ns/{kind}")
    except OSError:
        return None


def _status(pid) -> dict:
    fields = {}
    with open(f"/proc/{pid}/status") as f:
        for line in f:
            key, _, value = line.partition(":")
            fields[key] = value.split()
    return fields


def _limits(pid) -> dict:
    limits = {}
    with open(f"/proc/{pid}/limits") as f:
        next(f)
        for line in f:
            words = line[:26].strip(), line[26:47].strip()
            limits[words[0]] = words[1]
    return limits


def _amount(text: str, unit: str) -> str:
    if text == "unlimited":
        return "no limit"
    value = int(text)
    if unit == "bytes":
        return f"{value / 2**30:g} GiB" if value >= 2**30 else f"{value / 2**20:g} MiB"
    return f"{value:,}"


def observed(pid: int, *, inside: int | None = None, group: str = "") -> str:
    """What confines process ``pid`` (the notebook's), as the grader sees it from outside.

    Parameters
    ----------
    pid : int
        The notebook's process.
    inside : int, optional
        A process in the same namespaces to read them from where ``pid``'s cannot be read
        (an undumpable process of the grader's own user).
    group : str
        What the control group the grader made for it bounds, in words (``""``: none).

    Returns
    -------
    str
        For the grading report: its namespaces that differ from the grader's, the user it runs
        as, no-new-privileges and seccomp, and its limits on processes, file size and address
        space. ``"not observed ..."`` if the process is gone.
    """
    try:
        status, limits = _status(pid), _limits(pid)
    except OSError as exc:
        return f"not observed (the process is gone: {exc.strerror})"
    kinds = [NAMESPACES[k] for k in NAMESPACES
             if (_namespace(pid, k) or (inside and _namespace(inside, k)))
             not in (None, _namespace("self", k))]
    parts = [f"its own {', '.join(kinds)} namespaces" if kinds else "no namespaces of its own"]
    uid = int(status.get("Uid", ["-1"])[0])
    if uid == os.geteuid():
        parts.append("the grader's own user")
    else:
        parts.append(f"user id {uid}" + (" (nobody)" if uid == 65534 else ""))
    if status.get("NoNewPrivs", ["0"])[0] == "1":
        parts.append("no new privileges")
    if status.get("Seccomp", ["0"])[0] != "0":
        parts.append("seccomp filter")
    parts.append("processes of its user: "
                 + _amount(limits.get("Max processes", "unlimited"), "processes"))
    parts.append("size of a file: " + _amount(limits.get("Max file size", "unlimited"), "bytes"))
    parts.append("address space of a process: "
                 + _amount(limits.get("Max address space", "unlimited"), "bytes"))
    if group:
        parts.append(group)
    return "; ".join(parts)
