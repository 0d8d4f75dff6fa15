"""The README's tour runs as written."""

import re
import shlex
import subprocess
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
README = (ROOT / "README.md").read_text()


def blocks(language):
    return re.findall(rf"```{language}\n(.*?)```", README, flags=re.S)


def test_readme_starts_with_the_two_commands():
    first = blocks("bash")[0]
    assert re.search(r"^make book\b", first, flags=re.M)
    assert re.search(r"^make test\b", first, flags=re.M)


def test_python_tour_prints_true():
    (code,) = blocks("python")
    assert len([line for line in code.splitlines() if line.strip()]) == 3
    done = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True,
                          cwd=ROOT, check=False)
    assert done.returncode == 0, done.stderr
    assert done.stdout.strip() == "True"


def test_cli_tour_runs(tmp_path):
    (command,) = blocks("bash")[1].strip().splitlines()
    argv = shlex.split(command)
    assert argv[0] == ".venv/bin/ioattn"
    argv = [sys.executable, "-m", "ioattn", *argv[1:]]
    argv[argv.index("--plot") + 1] = str(tmp_path / "sweep.png")
    done = subprocess.run(argv, capture_output=True, text=True, check=False)
    assert done.returncode == 0, done.stderr
    assert "crossover" in done.stdout and (tmp_path / "sweep.png").exists()
