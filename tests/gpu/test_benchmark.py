"""The pure parts of benchmarks/gpu.py, on the CPU: FLOP counting, the table, the result's JSON
layout, the crossover finder, and the exit without a GPU."""

import importlib.util
import json
import os
import subprocess
import sys
from pathlib import Path

import pytest

from ioattn.gpu import available

ROOT = Path(__file__).resolve().parents[2]
SCRIPT = ROOT / "benchmarks" / "gpu.py"


@pytest.fixture(scope="module")
def bench():
    spec = importlib.util.spec_from_file_location("ioattn_benchmark_gpu", SCRIPT)
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


def test_flops_are_four_N2_d_per_head_and_half_when_causal(bench):
    assert bench.attention_flops(1024, 64) == 4 * 1024**2 * 64
    assert bench.attention_flops(8192, 128, heads=16) == 16 * 4 * 8192**2 * 128
    assert bench.attention_flops(8192, 128, 16, causal=True) == 16 * 2 * 8192**2 * 128
    # 1 ms for 4 * 4096^2 * 64 flops is 4.29 TFLOP/s
    assert bench.tflops(bench.attention_flops(4096, 64), 1.0) == pytest.approx(4.294967296)
    assert bench.tflops(10, None) is None and bench.tflops(10, 0.0) is None


def test_counted_bytes_and_bandwidth(bench):
    # 16-bit flash reads Q, K, V in 2 bytes and writes O in float32; the others are float32
    assert bench.counted_bytes("flash", "bfloat16", 100, 10) == 240
    assert bench.counted_bytes("flash", "float32", 100, 10) == 440
    assert bench.counted_bytes("standard", "float32", 100, 10) == 440
    assert bench.counted_bytes("cupy materialised", "float32", None, None) is None
    assert bench.bandwidth_gbps(2 * 10**9, 1000.0) == pytest.approx(2.0)
    assert bench.bandwidth_gbps(None, 1.0) is None


def test_markdown_table(bench):
    rows = [{"impl": "flash", "dtype": "float32", "N": 8192, "d": 128, "time_ms": 1.23456,
             "tflops": 123.456, "reads": 1234567, "plan": "a|b"},
            {"impl": "torch sdpa", "dtype": "bfloat16", "N": 1024, "d": 64, "time_ms": None}]
    cols = [("impl", "implementation"), ("N", "N"), ("time_ms", "time (ms)"),
            ("tflops", "TFLOP/s"), ("reads", "reads"), ("plan", "plan")]
    lines = bench.markdown_table(rows, cols).splitlines()
    assert lines[0] == "| implementation | N | time (ms) | TFLOP/s | reads | plan |"
    assert lines[1] == "|---|---:|---:|---:|---:|---|"
    assert lines[2] == "| flash | 8,192 | 1.235 | 123.5 | 1,234,567 | a\\|b |"
    assert lines[3] == "| torch sdpa | 1,024 | - | - | - | - |"
    assert len(lines) == 4


def test_crossover_finder_on_made_up_numbers(bench):
    Ms = [16, 32, 64, 128, 256]
    # square tiling cheaper below 64, flash from 64 on
    assert bench.find_crossover(Ms, [90, 70, 40, 30, 20], [50, 50, 45, 44, 43]) == (32, 64)
    # a tie counts as flash being (no more expensive) there
    assert bench.find_crossover(Ms, [90, 50, 40, 30, 20], [50, 50, 45, 44, 43]) == (16, 32)
    # budgets that did not run (None) are skipped: the bracket joins the neighbours that ran
    assert bench.find_crossover(Ms, [90, 70, None, 30, 20], [50, 50, 45, 44, 43]) == (32, 128)
    assert bench.find_crossover(Ms, [90, 70, 60, 50, 45], [10, 10, 10, 10, 10]) is None
    assert bench.find_crossover(Ms, [1, 1, 1, 1, 1], [9, 9, 9, 9, 9]) is None
    d = 256
    assert bench.crossover_in_range((d * d // 8, 4 * d * d), d)
    assert not bench.crossover_in_range((d * d // 16, d * d // 8), d)
    assert not bench.crossover_in_range((2 * d * d, 8 * d * d), d)
    assert not bench.crossover_in_range(None, d)


def test_result_paths_slug_the_gpu_name(bench, tmp_path):
    js, md = bench.result_paths("NVIDIA H200 (141GB) ", "2026-11-21T22:00:00Z", tmp_path)
    assert js == tmp_path / "gpu-nvidia-h200-141gb-2026-11-21.json"
    assert md == tmp_path / "gpu-nvidia-h200-141gb-2026-11-21.md"


def _doc(bench, **changes):
    row = {key: None for key, _ in bench.COLUMNS}
    rows = []
    for impl, dtype, ms in (("flash", "bfloat16", 2.0), ("torch sdpa", "bfloat16", 1.5),
                            ("flash", "float32", 5.0), ("cupy materialised", "float32", 9.0)):
        rows.append({**row, "impl": impl, "dtype": dtype, "N": 8192, "d": 128, "heads": 16,
                     "batch": 1, "time_ms": ms, "status": "ok"})
    doc = {"schema": bench.SCHEMA, "backend": "cuda", "date": "2026-11-21T22:00:00Z",
           "git_commit": "unknown", "flops_note": bench.FLOPS_NOTE,
           "gpu": {"name": "NVIDIA H200", "compute_capability": "9.0", "driver": "12.4",
                   "runtime": "12.4", "driver_version": "550.54"},
           "versions": {"cupy": "13.3.0", "torch": None, "numpy": "2.0", "python": "3.11"},
           "settings": {"N": [8192], "d": [128]}, "rows": rows, "crossover": None,
           "targets": bench.targets(rows, "NVIDIA H200")}
    doc.update(changes)
    return doc


def test_the_json_schema_round_trips(bench, tmp_path):
    doc = _doc(bench)
    js, md = bench.save(doc, tmp_path)
    assert js.name == "gpu-nvidia-h200-2026-11-21.json" and md.is_file()
    back = json.loads(js.read_text())
    bench.check_result(back)
    assert back == json.loads(json.dumps(doc))
    text = md.read_text()
    assert "NVIDIA H200" in text and "2026-11-21" in text and "| flash | bfloat16 |" in text
    assert bench.latest_result(tmp_path) == back
    # the newest by date wins; a broken file is ignored
    newer = _doc(bench, date="2026-12-01T00:00:00Z")
    newer["gpu"] = {**newer["gpu"], "name": "Tesla T4"}
    bench.save(newer, tmp_path)
    (tmp_path / "broken.json").write_text("{")
    assert bench.latest_result(tmp_path)["gpu"]["name"] == "Tesla T4"
    # an emulator run is never shown as a measurement
    emulated = _doc(bench, date="2027-01-01T00:00:00Z", backend="emulator")
    emulated["gpu"] = {**emulated["gpu"], "name": "CPU emulator"}
    bench.save(emulated, tmp_path)
    assert bench.latest_result(tmp_path)["gpu"]["name"] == "Tesla T4"
    assert bench.latest_result(tmp_path / "none") is None


@pytest.mark.parametrize("damage", [
    lambda d: d.pop("git_commit"),
    lambda d: d.update(schema="something else"),
    lambda d: d["gpu"].pop("runtime"),
    lambda d: d["versions"].pop("torch"),
    lambda d: d["rows"][0].pop("time_ms"),
    lambda d: d["rows"][0].update(N="8192"),
    lambda d: d["targets"][0].update(status="OK"),
])
def test_the_json_schema_rejects_damage(bench, damage):
    doc = _doc(bench)
    bench.check_result(doc)
    damage(doc)
    with pytest.raises(ValueError):
        bench.check_result(doc)


def test_targets_pass_fail_and_not_run(bench):
    doc = _doc(bench)
    first, second = doc["targets"]
    assert first["status"] == "PASS" and "75%" in first["detail"]       # 1.5 / 2.0
    assert second["status"] == "PASS"
    rows = [dict(r) for r in doc["rows"]]
    rows[0]["time_ms"] = 4.0                                          # 37.5% of SDPA
    rows[2]["time_ms"] = 10.0                                         # slower than CuPy
    first, second = bench.targets(rows, "Tesla T4")
    assert first["status"] == "FAIL" and "set for an H200" in first["detail"]
    assert second["status"] == "FAIL" and "N=8192, d=128" in second["detail"]
    assert [t["status"] for t in bench.targets(rows[2:3], "x")] == ["NOT RUN", "NOT RUN"]


@pytest.mark.skipif(available(), reason="a GPU is available: the benchmark would run on it")
def test_without_a_gpu_it_exits_2_with_one_line():
    env = {**os.environ, "PYTHONPATH": str(ROOT)}
    done = subprocess.run([sys.executable, str(SCRIPT), "--quick"], capture_output=True,
                          text=True, cwd=ROOT, env=env, timeout=120)
    assert done.returncode == 2, done.stdout + done.stderr
    out = (done.stdout + done.stderr).strip()
    assert "Traceback" not in out
    assert len(out.splitlines()) == 1, out
    assert "GPU" in out and "Colab" in out
