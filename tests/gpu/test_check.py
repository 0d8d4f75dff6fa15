"""``make gpu-check`` (ioattn/gpu/check.py) on the CPU: the steps it would run and where it
writes them, its limits, its command line, and how it records a step's outcome."""

import json
import subprocess
import sys
from pathlib import Path

import pytest

from ioattn.gpu import check

ROOT = Path(__file__).resolve().parents[2]


def _dry(tmp_path, monkeypatch, sanitizer):
    monkeypatch.setattr(check, "find_sanitizer", lambda: sanitizer)
    assert check.main(["--dry-run", "--out-dir", str(tmp_path)]) == 0
    (folder,) = tmp_path.glob("gpu-check-dry-run-*")
    return folder, json.loads((folder / "summary.json").read_text())


def test_a_dry_run_writes_its_summary_where_it_says(tmp_path, monkeypatch, capsys):
    folder, doc = _dry(tmp_path, monkeypatch, "/opt/cuda/bin/compute-sanitizer")
    assert (folder / "summary.md").is_file()
    assert f"wrote {folder / 'summary.json'}" in capsys.readouterr().out
    names = [s["name"] for s in doc["steps"]]
    assert names[0] == "test-gpu" and names[-1] == "benchmark"
    for tool in ("memcheck", "racecheck"):
        ran = [s for s in doc["steps"] if s["name"].startswith(tool)]
        assert [s["name"] for s in ran] == [f"{tool} {n}" for n in check.LAUNCHES]
        for s in ran:
            assert s["command"][:3] == ["/opt/cuda/bin/compute-sanitizer", "--tool", tool]
            assert s["command"][-2:] == ["--launch", s["name"].split()[1]]
    bench = doc["steps"][-1]["command"]
    assert "--quick" in bench and bench[bench.index("--out-dir") + 1] == str(folder)
    test = doc["steps"][0]["command"]
    assert test[1:5] == ["-m", "pytest", "-m", "gpu"]
    assert all(s["status"] == "not run" for s in doc["steps"])


def test_without_the_sanitizer_its_steps_are_skipped_with_a_line(tmp_path, monkeypatch, capsys):
    _, doc = _dry(tmp_path, monkeypatch, None)
    out = capsys.readouterr().out
    skipped = [s for s in doc["steps"] if s["status"] == "skipped"]
    assert len(skipped) == 2 * len(check.LAUNCHES)
    assert out.count("SKIP no compute-sanitizer") == 2 * len(check.LAUNCHES)


def test_the_limits_fit_in_eight_minutes():
    assert sum(check.LIMITS.values()) <= check.TOTAL_SECONDS <= 480


def test_every_kernel_has_a_launch():
    from ioattn.gpu import KERNELS

    algorithms = {a for a, _ in check.LAUNCHES.values()}
    assert set(KERNELS) | {"backward"} <= algorithms
    dtypes = {kw.get("dtype") for a, kw in check.LAUNCHES.values() if a == "flash"}
    assert dtypes == {"float32", "float16", "bfloat16"}


def test_a_step_records_pass_fail_and_timeout(tmp_path):
    def step(code, limit=30):
        return {"name": "x", "command": [sys.executable, "-c", code], "skip": None,
                "log": tmp_path / "x.log", "limit": limit}

    assert check._run_step(step("print('fine')"), tmp_path)["status"] == "pass"
    assert (tmp_path / "x.log").read_text() == "fine\n"
    assert check._run_step(step("raise SystemExit(3)"), tmp_path)["returncode"] == 3
    assert check._run_step(step("import time; time.sleep(5)", limit=1),
                           tmp_path)["status"] == "timeout"


def test_bad_launch_names_are_refused(capsys):
    with pytest.raises(SystemExit) as done:
        check.parse_args(["--launch", "nonsense"])
    assert done.value.code == 2 and "--launch takes one of" in capsys.readouterr().err
    with pytest.raises(ValueError, match="unknown launch"):
        check.launch("nonsense")


def test_without_a_gpu_it_exits_2_saying_why():
    from ioattn.gpu import available

    if available():
        pytest.skip("a GPU is present")
    done = subprocess.run([sys.executable, "-m", "ioattn.gpu.check"], capture_output=True,
                          text=True, cwd=ROOT, timeout=120)
    assert done.returncode == 2 and "gpu-check needs a CUDA GPU" in done.stdout


def test_the_make_target_runs_the_module_with_the_given_python():
    done = subprocess.run(["make", "-n", "gpu-check", "PYTHON_BIN=python3"], capture_output=True,
                          text=True, cwd=ROOT)
    assert done.returncode == 0
    assert "python3 -m ioattn.gpu.check" in done.stdout and "pip" not in done.stdout
