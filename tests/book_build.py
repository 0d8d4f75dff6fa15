"""One build of the whole book for a test session, started in the background as soon as the
session has collected a test that reads it, and shared by every pytest-xdist worker.

The build runs the Makefile's ``jupyter-book build`` with its flags into a folder of the
session's temporary directory (``<basetemp>/book``, the controller's base under pytest-xdist),
so every page is read, rendered and checked afresh: no warning can hide in an incremental
build. What is kept between sessions is the *execution cache* alone: the build starts from a
copy of ``_build/.jupyter_cache`` (the cache ``make book`` also uses) and, when it succeeds,
leaves its own cache there. ``book/_ext/package_cache.py`` empties that cache whenever the
``ioattn`` package changed, so a page is re-executed exactly when its code or the package did.

Whoever first takes the lock (``<basetemp>/book/lock``) starts the build; everyone else, and
the ``built`` fixture of ``conftest.py``, waits for its return code (``<basetemp>/book/rc``).

``python -m tests.book_build OUT`` is the background command itself.
"""

from __future__ import annotations

import os
import shutil
import signal
import subprocess
import sys
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
#: The Makefile's `book` flags: warnings are errors, references are checked.
BOOK_FLAGS = ["--warningiserror", "--nitpick", "--keep-going"]
#: The execution cache kept between sessions (the one ``make book`` builds into).
KEPT_CACHE = ROOT / "_build" / ".jupyter_cache"
#: The longest a build may take (seconds).
TIMEOUT = 3000

_started: subprocess.Popen | None = None


def folder(basetemp: Path) -> Path:
    """The build's folder for the session whose (controller's) base temporary directory is
    ``basetemp``."""
    return basetemp / "book"


def start(place: Path) -> None:
    """Start the build into ``place`` unless someone already did (any process of the session)."""
    global _started
    from filelock import FileLock

    place.mkdir(parents=True, exist_ok=True)
    with FileLock(place / "lock"):
        if (place / "started").exists():
            return
        (place / "started").write_text(f"{os.getpid()}\n")
        log = open(place / "build.log", "wb")            # noqa: SIM115 (the child's output)
        _started = subprocess.Popen(
            [sys.executable, "-m", "tests.book_build", str(place)], cwd=ROOT, stdout=log,
            stderr=subprocess.STDOUT, start_new_session=True)


def wait(place: Path) -> Path:
    """Wait for the build into ``place`` and return the folder of its HTML; fail with the end
    of its log if it failed."""
    rc_file, deadline = place / "rc", time.monotonic() + TIMEOUT
    while not rc_file.exists():
        if time.monotonic() > deadline:
            raise TimeoutError(f"the book build in {place} took more than {TIMEOUT} s")
        time.sleep(0.5)
    rc = int(rc_file.read_text())
    log = (place / "build.log").read_text(errors="replace")
    assert rc == 0, f"the book build failed ({rc}):\n{log[-8000:]}"
    html_dir = place / "out" / "_build" / "html"
    assert (html_dir / "index.html").is_file(), log[-4000:]
    return html_dir


def stop() -> None:
    """Stop a build this process started that is still running (the session ended first)."""
    if _started is not None and _started.poll() is None:
        os.killpg(_started.pid, signal.SIGTERM)
        _started.wait(timeout=30)


def main(place: Path) -> int:
    """Build the book into ``place / "out"``; write the return code to ``place / "rc"``."""
    out = place / "out"
    cache = out / "_build" / ".jupyter_cache"
    if KEPT_CACHE.is_dir():
        shutil.copytree(KEPT_CACHE, cache)
    exe = shutil.which("jupyter-book", path=str(Path(sys.executable).parent))
    if exe is None:
        print(f"no jupyter-book executable beside {sys.executable}: install the book extra "
              "(make test does)", flush=True)
        rc = 127
    else:
        cmd = [exe, "build", str(ROOT), "--path-output", str(out), *BOOK_FLAGS]
        print(" ".join(cmd), flush=True)
        rc = subprocess.run(cmd, cwd=ROOT, timeout=TIMEOUT).returncode
    if rc == 0 and cache.is_dir():                  # keep the cache for the next session
        fresh = KEPT_CACHE.with_name(f".jupyter_cache.{os.getpid()}")
        shutil.copytree(cache, fresh)
        shutil.rmtree(KEPT_CACHE, ignore_errors=True)
        fresh.rename(KEPT_CACHE)
    (place / "rc.tmp").write_text(f"{rc}\n")
    (place / "rc.tmp").rename(place / "rc")
    return rc


if __name__ == "__main__":
    sys.exit(main(Path(sys.argv[1])))
