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


def tour():
    """The README's section "A one-minute tour", its lines joined."""
    text = README.split("## A one-minute tour", 1)[1].split("\n## ", 1)[0]
    return " ".join(text.split())


def test_cli_tour_tells_who_is_cheapest(capsys):
    """The sentences under the command give the cheapest algorithm of the command's own sweep
    (square tiling's outer schedule, the default) and of the blocked schedule."""
    from ioattn.bounds import cheapest, crossovers
    from ioattn.cli import SWEEP_OPTIONS, main

    argv = shlex.split(blocks("bash")[1].strip())[1:]
    del argv[argv.index("--plot"):argv.index("--plot") + 2]
    N, d = int(argv[argv.index("--N") + 1]), int(argv[argv.index("--d") + 1])
    assert SWEEP_OPTIONS == {"square_tiling": {"schedule": "outer"}}
    assert main(argv) == 0
    printed = capsys.readouterr().out
    assert "options: square_tiling (schedule=outer)" in printed
    text = tour()

    outer = crossovers(N, d, 4, 32 * d * d, options=SWEEP_OPTIONS)      # the sweep's range
    assert all(f"crossover at M = {c.M:,} " in printed for c in outer)
    assert cheapest(N, d, 4, options=SWEEP_OPTIONS) == "standard"
    std_last = max(c.M for c in outer if c.before == "standard") - 1
    square = [c for c in outer if c.M > std_last]
    assert [(c.before, c.after) for c in square] == [
        ("standard", "square_tiling"), ("square_tiling", "flash"),
        ("flash", "square_tiling"), ("square_tiling", "flash")]
    first, back, last = square[1].M, square[2].M, square[3].M
    assert last < d * d
    assert (f"(for the last time at `M = {std_last:,}`), square tiling from "
            f"`M = {square[0].M:,}`, and FlashAttention from `M = {last:,}` "
            f"({last / d**2:.2f} d²) to the end of the sweep, after a first lead at "
            f"`M = {first:,}` to `{back - 1:,}`") in text

    blocked = crossovers(N, d, 4, 32 * d * d)
    assert [(c.before, c.after) for c in blocked] == [("standard", "flash")]
    assert cheapest(N, d, 4) == "standard"     # and, one change only, never square tiling
    (change,) = blocked
    assert (f"standard attention is, up to `M = {change.M - 1:,}`, and FlashAttention from "
            f"`M = {change.M:,}` ({change.M / d**2:.2f} d²)") in text
