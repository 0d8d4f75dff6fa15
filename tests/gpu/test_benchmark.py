"""The GPU benchmark (ioattn.gpu.benchmark, run by benchmarks/gpu.py) and its comparison with the
roofline (ioattn.gpu.compare), on the CPU: FLOP counting, the table, the result's JSON layout,
the crossover finder, the exit without a GPU, the script's command line, which datasheet a
measured GPU gets, the rows beside the roofline, and the notebook page "Measure your GPU".

The result documents are made by running the benchmark's pipeline on the CPU emulator into a
temporary folder (never written by hand, never committed); nothing here measures a GPU.
"""

import copy
import importlib.util
import json
import os
import statistics
import subprocess
import sys
from pathlib import Path

import numpy as np
import pytest

import ioattn
import ioattn.gpu as gpu
from ioattn import roofline
from ioattn.gpu import available, compare
from ioattn.gpu import benchmark as bench
from ioattn.gpus import GPUS

ROOT = Path(__file__).resolve().parents[2]
SCRIPT = ROOT / "benchmarks" / "gpu.py"
PAGE = ROOT / "book" / "gpu_measure.md"
#: The emulator offers a block the shared memory of an H100 or H200: the plans it runs are the
#: plans those GPUs run, so an emulated result can be set beside the H200's roofline.
EMULATED_AS = "H200"


def _run(*args, timeout=300):
    return subprocess.run([sys.executable, *map(str, args)], capture_output=True, text=True,
                          cwd=ROOT, timeout=timeout)


@pytest.fixture(scope="module")
def emulated(tmp_path_factory):
    """``(doc, folder)``: the benchmark's pipeline run on the emulator by the script wrapper
    ``benchmarks/gpu.py`` into a temporary folder, and the document it wrote; at ``d = 16``
    (where flash_fa2 is not compiled) and ``d = 64`` (where it is)."""
    folder = tmp_path_factory.mktemp("results")
    done = _run(SCRIPT, "--backend", "emulator", "--d", "16", "64", "--out-dir", folder)
    assert done.returncode == 0, done.stdout + done.stderr
    assert "crossover: PASS" in done.stdout
    (js,) = folder.glob("gpu-cpu-emulator-*.json")
    assert js.with_suffix(".md").is_file()
    return json.loads(js.read_text(encoding="utf-8")), folder


# ------------------------------------------------------------------------ the script wrapper
def test_the_script_wrapper_runs_help_and_is_the_package_module():
    done = _run(SCRIPT, "--help", timeout=120)
    assert done.returncode == 0, done.stderr
    text = " ".join(done.stdout.split())
    assert "--out-dir" in text and "--quick" in text and "--backend {cuda,emulator}" in text
    assert "benchmarks/results of the repository when ioattn is imported from a checkout, " \
           "else the current directory" in text
    assert str(ROOT / "benchmarks" / "results") in text           # here: this checkout's
    # The chapter "On a real GPU" loads the script by path and uses these names.
    spec = importlib.util.spec_from_file_location("ioattn_bench_gpu_test", SCRIPT)
    script = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(script)
    for name in bench.__all__:
        assert getattr(script, name) is getattr(bench, name), name
    for name in ("Device", "materialised", "tflops", "attention_flops", "latest_result",
                 "COLUMNS", "markdown_table"):
        assert name in bench.__all__


def test_the_module_runs_as_python_dash_m():
    done = _run("-m", "ioattn.gpu.benchmark", "--help", timeout=120)
    assert done.returncode == 0 and "--out-dir" in done.stdout, done.stderr


def test_the_emulator_pipeline_through_the_script(emulated):
    doc, folder = emulated
    bench.check_result(doc)
    assert doc["backend"] == "emulator" and doc["gpu"]["name"] == "CPU emulator"
    assert {(r["impl"], r["dtype"]) for r in doc["rows"]} == set(bench.CONFIGS)
    assert {("flash_fa2", "float16"), ("flash_fa2", "bfloat16")} <= set(bench.CONFIGS)
    # flash_fa2 is compiled for d = 64 and 128: at d = 16 its rows are skipped, saying so
    skipped = [r for r in doc["rows"] if r["impl"] == "flash_fa2" and r["d"] == 16]
    assert len(skipped) == 2 * len(doc["settings"]["N"])
    for r in skipped:
        assert r["status"] == "skipped: flash_fa2 is compiled for d = 64 and 128 only, not d = 16"
        assert r["time_ms"] is None and r["reads"] is None and r["plan_options"] is None
    kernels = [r for r in doc["rows"] if r["impl"] in bench.KERNEL_IMPLS and r not in skipped]
    assert kernels and all(r["status"] == "ok" and r["time_ms"] > 0 for r in kernels)
    fast = [r for r in kernels if r["impl"] == "flash_fa2"]
    assert {(r["dtype"], r["d"]) for r in fast} == {("float16", 64), ("bfloat16", 64)}
    assert len(fast) == 2 * len(doc["settings"]["N"])
    for r in fast:
        # the fast kernel's count is flash's closed form for its blocks (B_c = 64 at d = 64)
        M, block = r["plan_options"]["M"], tuple(r["plan_options"]["block"])
        assert block[1] == 64 and block[0] % 32 == 0
        cost = ioattn.io_cost("flash", r["N"], r["d"], M, block=block)
        BH = r["batch"] * r["heads"]
        assert (r["reads"], r["writes"]) == (BH * cost.reads, BH * cost.writes)
        assert r["counted_bytes"] == 2 * r["reads"] + 4 * r["writes"]     # 16-bit reads
    for r in kernels:
        # the counted bytes are ioattn.roofline's bytes of the counted entries
        assert r["counted_bytes"] == roofline.traffic_bytes(bench.model_name(r["impl"]),
                                                            r["dtype"], r["reads"], r["writes"])
        assert r["tflops"] == pytest.approx(
            4 * r["N"] ** 2 * r["d"] * r["batch"] * r["heads"] / (r["time_ms"] * 1e-3) / 1e12)
        assert r["plan_options"]["M"] > 0
        assert ("block" in r["plan_options"]) == (r["impl"] in ("flash", "flash_fa2"))
    for r in doc["rows"]:
        if r["impl"] not in bench.KERNEL_IMPLS:
            assert r["plan_options"] is None and r["reads"] is None
    assert doc["git_commit"] == subprocess.run(["git", "rev-parse", "HEAD"], cwd=ROOT,
                                               capture_output=True, text=True).stdout.strip()


def test_without_out_dir_an_emulator_run_saves_nothing(tmp_path, capsys, monkeypatch):
    monkeypatch.chdir(tmp_path)
    monkeypatch.setattr(bench, "default_out_dir", lambda: tmp_path / "never")
    assert bench.main(["--backend", "emulator", "--only", "flash", "--N", "48",
                       "--no-crossover"]) == 0
    out = capsys.readouterr().out
    assert "| flash | float32 | 48 |" in out and "wrote" not in out
    assert list(tmp_path.iterdir()) == []


def test_a_failed_crossover_check_exits_1_without_a_traceback(monkeypatch, capsys, tmp_path):
    def failing(dev, N, d, heads, args):
        return {"N": N, "d": d, "heads": heads, "dtype": "float32", "points": [],
                "counted_crossover": None, "model_crossover": None, "ok": False,
                "check": "FAIL: made to fail"}

    monkeypatch.setattr(bench, "bench_crossover", failing)
    code = bench.main(["--backend", "emulator", "--only", "standard", "--N", "48",
                       "--out-dir", str(tmp_path)])
    assert code == 1
    assert "the crossover check failed: FAIL: made to fail" in capsys.readouterr().err


@pytest.mark.parametrize("argv,message", [
    (["--N", "0"], "--N takes positive sizes"),
    (["--d", "64", "-3"], "--d takes positive sizes"),
    (["--heads", "0"], "--heads must be positive"),
    (["--only", "nonsense"], "invalid choice"),
])
def test_bad_arguments_are_named(argv, message, capsys):
    with pytest.raises(SystemExit) as exit_:
        bench.parse_args(argv)
    assert exit_.value.code == 2
    assert message in capsys.readouterr().err


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


# ------------------------------------------------------------------------ where results go
def test_default_out_dir_is_the_checkout_else_the_working_directory(monkeypatch, tmp_path):
    assert bench.checkout() == ROOT
    assert bench.default_out_dir() == ROOT / "benchmarks" / "results"
    assert bench.results_folder() == ROOT / "benchmarks" / "results"
    js, md = bench.result_paths("Tesla T4", "2026-11-21T22:00:00Z")
    assert js == ROOT / "benchmarks" / "results" / "gpu-tesla-t4-2026-11-21.json"
    # installed elsewhere (as in Colab): site-packages/ioattn/gpu/benchmark.py
    installed = tmp_path / "site-packages" / "ioattn" / "gpu" / "benchmark.py"
    installed.parent.mkdir(parents=True)
    monkeypatch.setattr(bench, "__file__", str(installed))
    monkeypatch.chdir(tmp_path)
    assert bench.checkout() is None and bench.results_folder() is None
    assert bench.default_out_dir() == tmp_path
    assert bench.committed_results() == [] and bench.latest_result() is None


class _Distribution:
    def __init__(self, text):
        self.text = text

    def read_text(self, name):
        assert name == "direct_url.json"
        return self.text


def test_git_commit_outside_a_checkout_is_the_one_pip_installed(monkeypatch, tmp_path):
    import importlib.metadata

    monkeypatch.setattr(bench, "__file__", str(tmp_path / "ioattn" / "gpu" / "benchmark.py"))
    sha = "0123456789abcdef0123456789abcdef01234567"
    record = {"url": "https://github.com/ann/ioattn.git",
              "vcs_info": {"vcs": "git", "commit_id": sha}}
    monkeypatch.setattr(importlib.metadata, "distribution",
                        lambda name: _Distribution(json.dumps(record)))
    assert bench.git_commit() == sha
    monkeypatch.setattr(importlib.metadata, "distribution",
                        lambda name: _Distribution(json.dumps({"url": "file:///x"})))
    assert bench.git_commit() == "unknown"


# ------------------------------------------------------------------------ pure parts
def test_flops_are_the_rooflines_and_half_when_causal():
    assert bench.attention_flops is roofline.attention_flops      # one source of truth
    assert bench.forward_flops(1024, 64) == 4 * 1024**2 * 64
    assert bench.forward_flops(8192, 128, heads=16) == 16 * 4 * 8192**2 * 128
    assert bench.forward_flops(8192, 128, 16, causal=True) == 16 * 2 * 8192**2 * 128
    # 1 ms for 4 * 4096^2 * 64 flops is 4.29 TFLOP/s
    assert bench.tflops(bench.forward_flops(4096, 64), 1.0) == pytest.approx(4.294967296)
    assert bench.tflops(10, None) is None and bench.tflops(10, 0.0) is None


def test_bandwidth():
    assert bench.bandwidth_gbps(2 * 10**9, 1000.0) == pytest.approx(2.0)
    assert bench.bandwidth_gbps(None, 1.0) is None and bench.bandwidth_gbps(10, 0.0) is None


def test_markdown_table():
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
    small = bench.markdown_table([{"predicted_ms": 0.000123, "fraction": 0.4567}],
                                 [("predicted_ms", "t"), ("fraction", "f")]).splitlines()
    assert small[2] == "| 0.000123 | 46% |"


def test_crossover_finder_on_made_up_numbers():
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


def test_result_paths_slug_the_gpu_name(tmp_path):
    js, md = bench.result_paths("NVIDIA H200 (141GB) ", "2026-11-21T22:00:00Z", tmp_path)
    assert js == tmp_path / "gpu-nvidia-h200-141gb-2026-11-21.json"
    assert md == tmp_path / "gpu-nvidia-h200-141gb-2026-11-21.md"


def _doc(**changes):
    """A result with made-up times for the targets' logic (never saved outside tmp_path)."""
    row = {key: None for key, _ in bench.COLUMNS}
    rows = []
    for impl, dtype, ms in (("flash_fa2", "bfloat16", 1.0), ("flash", "bfloat16", 2.0),
                            ("torch sdpa", "bfloat16", 1.5),
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


def test_targets_pass_fail_and_not_run():
    doc = _doc()
    fast, readable, fp32 = doc["targets"]
    # the target is the fast kernel's; the readable kernel's line is beside it
    assert "flash_fa2" in fast["name"] and "fast kernel" in fast["name"]
    assert "readable" in readable["name"] and "flash_fa2" not in readable["name"]
    assert "N=8192, d=128, 16 heads (H200)" in fast["name"]
    assert fast["status"] == "PASS" and "150%" in fast["detail"]         # 1.5 / 1.0
    assert fast["detail"].startswith("flash_fa2 1.000 ms, SDPA 1.500 ms")
    assert readable["status"] == "PASS" and "75%" in readable["detail"]   # 1.5 / 2.0
    assert readable["detail"].startswith("flash 2.000 ms")
    assert fp32["status"] == "PASS"
    rows = [dict(r) for r in doc["rows"]]
    rows[0]["time_ms"] = 3.5                                          # 43% of SDPA
    rows[3]["time_ms"] = 10.0                                         # slower than CuPy
    fast, readable, fp32 = bench.targets(rows, "Tesla T4")
    assert fast["status"] == "FAIL" and "set for an H200" in fast["detail"]
    assert readable["status"] == "PASS"           # each line judges its own kernel
    assert fp32["status"] == "FAIL" and "N=8192, d=128" in fp32["detail"]
    rows[0]["status"] = "failed: ..."                 # a wrong output counts toward no target
    assert bench.targets(rows, "NVIDIA H200")[0]["status"] == "NOT RUN"
    assert [t["status"] for t in bench.targets(rows[3:4], "x")] == ["NOT RUN"] * 3


# ------------------------------------------------------------------------ the JSON layout
def _as_gpu(doc, name, **gpu):
    """``doc`` (an emulated result) relabelled as measured on GPU ``name``: for the paths that
    read a GPU result (its times stay the emulator's; the file never leaves tmp_path)."""
    other = copy.deepcopy(doc)
    other.update(backend="cuda")
    other["gpu"] = {**other["gpu"], "name": name, **gpu}
    return other


def test_the_result_round_trips_save_latest_check_compare(emulated, tmp_path):
    doc, folder = emulated
    # only GPU results are ever shown as measurements: the emulator's is found on request
    assert bench.latest_result(folder) is None and bench.committed_results(folder) == []
    back = bench.latest_result(folder, backend="emulator")
    assert back == doc
    js, md = bench.save(back, tmp_path)
    assert js.name == f"gpu-cpu-emulator-{doc['date'][:10]}.json" and md.is_file()
    again = json.loads(js.read_text(encoding="utf-8"))
    bench.check_result(again)
    assert again == doc
    assert compare.beside(again, EMULATED_AS) == compare.beside(doc, EMULATED_AS)
    text = md.read_text(encoding="utf-8")
    assert "## Beside the roofline" in text and "no datasheet figures" in text
    # newest first by date; a broken file and a non-result are skipped
    later = _as_gpu(doc, "Tesla T4")
    later["date"] = "2099-01-01T00:00:00Z"
    earlier = _as_gpu(doc, "NVIDIA H200")
    bench.save(later, tmp_path)
    bench.save(earlier, tmp_path)
    (tmp_path / "broken.json").write_text("{")
    (tmp_path / "list.json").write_text("[]")
    names = [r["gpu"]["name"] for r in bench.committed_results(tmp_path)]
    assert names == ["Tesla T4", "NVIDIA H200"]
    assert bench.latest_result(tmp_path)["gpu"]["name"] == "Tesla T4"
    assert bench.latest_result(tmp_path / "none") is None


@pytest.mark.parametrize("damage", [
    lambda d: d.pop("git_commit"),
    lambda d: d.update(schema="something else"),
    lambda d: d["gpu"].pop("runtime"),
    lambda d: d["versions"].pop("torch"),
    lambda d: d["rows"][0].pop("time_ms"),
    lambda d: d["rows"][0].update(N="8192"),
    lambda d: d["rows"][0].update(time_ms="1.5"),
    lambda d: d["rows"][0].update(reads=1.5),
    lambda d: d["rows"][0].update(plan_options={"M": 0}),
    lambda d: d["rows"][0].update(plan_options={"M": 64, "block": [16]}),
    lambda d: d["rows"][0].update(plan_options={"M": 64, "tiles": 3}),
    lambda d: d["rows"][0].update(plan_options=[64]),
    lambda d: d["targets"][0].update(status="OK"),
])
def test_the_json_layout_rejects_damage(damage, emulated):
    doc = copy.deepcopy(emulated[0])
    bench.check_result(doc)
    damage(doc)
    with pytest.raises(ValueError):
        bench.check_result(doc)


def test_rows_without_plan_options_still_pass():
    """Results written before rows recorded their plans stay readable."""
    doc = _doc()
    assert all("plan_options" not in r for r in doc["rows"])
    bench.check_result(doc)


# ------------------------------------------------------------------------ which datasheet
@pytest.mark.parametrize("name,memory,key", [
    ("Tesla T4", None, "T4"),
    ("Tesla T4", 15_843_721_216, "T4"),
    ("NVIDIA A100-SXM4-80GB", None, "A100"),
    ("NVIDIA H100 80GB HBM3", None, "H100"),
    ("NVIDIA H100 SXM5 80GB", None, "H100"),
    ("NVIDIA H200", None, "H200"),
    ("NVIDIA H200", 150_122_102_784, "H200"),
    # other boards of a GPU whose datasheet is recorded: never that board's figures
    ("NVIDIA A100-SXM4-40GB", None, None),
    ("NVIDIA A100-PCIE-40GB", None, None),
    ("NVIDIA A100 80GB PCIe", None, None),
    ("NVIDIA H100 PCIe", None, None),
    ("NVIDIA H100 NVL", None, None),
    ("NVIDIA H200 NVL", None, None),
    ("NVIDIA H200", 100_000_000_000, None),        # not the 141 GB board
    ("NVIDIA H100", None, None),                   # which board? not guessed
    # other GPUs
    ("NVIDIA GH200 480GB", None, None),
    ("NVIDIA L4", None, None),
    ("NVIDIA GeForce RTX 4090", None, None),
    ("CPU emulator", None, None),
])
def test_a_measured_gpu_gets_a_datasheet_only_when_it_is_that_board(name, memory, key):
    board = compare.identify(name, memory)
    assert board.key == key == compare.datasheet_key(name, memory)
    if key is None:
        assert board.note.endswith("no prediction") and name in board.note
        if board.family is not None:              # says which board the figures are of
            assert GPUS[board.family].variant in board.note
    else:
        assert board.note == ""


def test_the_board_follows_the_recorded_variant(monkeypatch):
    """Which names match is read from ioattn.gpus's ``variant``, not fixed in the code: were
    the A100's figures those of the PCIe 40 GB board, that board would match, and the SXM4 80 GB
    would not."""
    import ioattn.gpu.compare as module

    gpus = dict(GPUS)
    gpus["A100"] = GPUS["A100"]._replace(variant="PCIe, 40 GB")
    monkeypatch.setattr(module, "GPUS", gpus)
    assert compare.datasheet_key("NVIDIA A100-PCIE-40GB") == "A100"
    assert compare.datasheet_key("NVIDIA A100-SXM4-80GB") is None
    assert compare.datasheet_key("NVIDIA A100-SXM4-40GB") is None


def test_a_name_is_a_string():
    with pytest.raises(TypeError, match="a GPU name is a str"):
        compare.identify(None)


# ------------------------------------------------------------------------ beside the roofline
def test_rows_beside_the_roofline_recomputed_from_the_datasheet(emulated):
    """Each measured kernel row beside the H200's roofline: the least time is recomputed here
    from the row's counted entries, its operation count and the datasheet (not by calling
    ioattn.roofline), and equals ioattn.roofline.predict for the row's recorded plan."""
    doc = emulated[0]
    spec = GPUS[EMULATED_AS]
    rows = compare.beside(doc, EMULATED_AS)
    measured = [r for r in doc["rows"] if r["impl"] in bench.KERNEL_IMPLS and r["time_ms"]]
    assert len(rows) == len(measured) >= 10
    for got, row in zip(rows, measured):
        assert (got["impl"], got["dtype"], got["N"], got["d"], got["heads"]) == \
            (row["impl"], row["dtype"], row["N"], row["d"], row["heads"])
        assert (got["time_ms"], got["tflops"], got["note"]) == (row["time_ms"], row["tflops"], "")
        per_read = 2 if row["impl"] in ("flash", "flash_fa2") and row["dtype"] != "float32" \
            else 4
        nbytes = per_read * row["reads"] + 4 * row["writes"]
        flops = 4 * row["N"] ** 2 * row["d"] * row["batch"] * row["heads"]
        memory, compute = nbytes / spec.bandwidth, flops / spec.peak[row["dtype"]]
        least = max(memory, compute)
        assert got["predicted_ms"] == pytest.approx(1e3 * least, rel=1e-12)
        assert got["attainable_tflops"] == pytest.approx(flops / least / 1e12, rel=1e-12)
        assert got["bound"] == ("memory" if memory > compute else "compute")
        assert got["fraction"] == pytest.approx(1e3 * least / row["time_ms"], rel=1e-12)
        assert got["fraction"] == pytest.approx(row["tflops"] / got["attainable_tflops"])
        opts = dict(row["plan_options"])
        M = opts.pop("M")
        if "block" in opts:
            opts["block"] = tuple(opts["block"])
        # flash_fa2 by flash's roofline with its blocks (they fit an H200 in flash's layout too)
        p = roofline.predict(bench.model_name(row["impl"]), row["N"], row["d"], M,
                             gpu=EMULATED_AS, dtype=row["dtype"],
                             heads=row["batch"] * row["heads"], **opts)
        assert (p.reads, p.writes, p.bytes, p.flops) == (row["reads"], row["writes"], nbytes,
                                                         flops)
        assert got["predicted_ms"] == 1e3 * p.time
    assert {r["impl"] for r in rows} == set(bench.KERNEL_IMPLS)


def test_no_datasheet_no_prediction(emulated):
    doc = emulated[0]
    for name in ("CPU emulator", "NVIDIA A100-PCIE-40GB", "NVIDIA H100 NVL"):
        rows = compare.beside(_as_gpu(doc, name))
        assert rows and all(r["predicted_ms"] is None and r["fraction"] is None for r in rows)
        text = compare.table(_as_gpu(doc, name))
        assert "no prediction" in text and "datasheet:" not in text
    # the same rows as an H100 80GB HBM3 get the H100's datasheet
    rows = compare.beside(_as_gpu(doc, "NVIDIA H100 80GB HBM3"))
    assert all(r["predicted_ms"] is not None for r in rows)
    text = compare.table(_as_gpu(doc, "NVIDIA H100 80GB HBM3"))
    assert "the H100 (SXM5, 80 GB) datasheet" in text
    with pytest.raises(ValueError, match="unknown GPU 'B200'"):
        compare.beside(doc, "B200")


def test_a_row_the_roofline_cannot_predict_says_why(emulated):
    doc = copy.deepcopy(emulated[0])
    flash = next(r for r in doc["rows"] if (r["impl"], r["dtype"]) == ("flash", "bfloat16"))
    square = next(r for r in doc["rows"] if r["impl"] == "square_tiling")
    square["reads"] += 1                                  # counted != the plan's count
    # a plan of the emulator's (an H200's 227 KB a block) that a T4's 64 KB cannot hold
    big = {**square, "N": 4096, "d": 64, "reads": None, "writes": None,
           "plan_options": {"M": 58112, "schedule": "blocked"}}
    doc["rows"].append(big)
    rows = {(r["impl"], r["dtype"], r["N"], r["d"]): r for r in compare.beside(doc, "T4")}
    assert "no bfloat16 peak" in rows["flash", "bfloat16", flash["N"], flash["d"]]["note"]
    assert "shared memory" in rows["square_tiling", "float32", 4096, 64]["note"]
    assert f"counted {square['reads']:,}/" in \
        rows["square_tiling", "float32", square["N"], square["d"]]["note"]
    assert all(rows[k]["predicted_ms"] is None for k in
               [("flash", "bfloat16", flash["N"], flash["d"]),
                ("square_tiling", "float32", 4096, 64),
                ("square_tiling", "float32", square["N"], square["d"])])
    with pytest.raises(ValueError, match="a causal pass"):
        compare.predict_row({**square, "causal": True}, EMULATED_AS)
    with pytest.raises(ValueError, match="baseline"):
        compare.predict_row(next(r for r in doc["rows"] if r["impl"] == "cupy materialised"),
                            EMULATED_AS)


def test_the_report_shows_the_kernels_beside_the_roofline(emulated):
    doc = _as_gpu(emulated[0], "NVIDIA H200")
    text = bench.render(doc)
    section = text.split("## Beside the roofline", 1)[1].split("##", 1)[0]
    assert "Predicted (not measured)" in section and "the H200 (SXM, 141 GB) datasheet" in section
    assert "| least time (ms) | attainable TFLOP/s |" in section
    assert section.count("| flash |") == sum(r["impl"] == "flash" for r in doc["rows"])


def test_measured_points_per_kernel_and_dtype(emulated):
    doc = copy.deepcopy(emulated[0])
    with pytest.raises(ValueError, match="pass d="):              # the run has d = 16 and 64
        compare.measured_points(doc)
    pts = compare.measured_points(doc, d=16)
    assert pts.gpu is None and pts.board.name == "CPU emulator" and pts.d == 16
    assert pts.label == f"CPU emulator, {doc['date'][:10]}"
    want = {}
    for r in doc["rows"]:
        if r["impl"] in bench.KERNEL_IMPLS and r["tflops"] is not None and r["d"] == 16:
            want.setdefault((r["impl"], r["dtype"]), []).append((r["N"], r["tflops"]))
    assert pts.series == {k: sorted(v) for k, v in want.items()}
    assert all(Ns == sorted(Ns) for Ns in pts.series.values())
    assert ("flash_fa2", "bfloat16") not in pts.series             # skipped at d = 16
    assert ("flash_fa2", "bfloat16") in compare.measured_points(doc, d=64).series
    assert ("cupy materialised", "float32") in compare.measured_points(
        doc, d=16, kernels_only=False).series
    assert compare.measured_points(_as_gpu(doc, "Tesla T4"), d=64).gpu == "T4"
    doc["rows"] += [{**r, "d": 32} for r in doc["rows"]]
    assert compare.measured_points(doc, d=32).d == 32
    with pytest.raises(ValueError, match="no measured rows with d = 99"):
        compare.measured_points(doc, d=99)


def test_predictions_for_the_runs_sizes():
    args = bench.parse_args(["--quick"])
    rows = compare.predictions("T4", args.N, args.d, args.heads, args.batch)
    kernels = [c for c in bench.CONFIGS if c[0] in bench.KERNEL_IMPLS]
    assert len(rows) == len(args.N) * len(args.d) * len(kernels)
    assert {r["impl"] for r in rows} == set(bench.KERNEL_IMPLS)
    spec = GPUS["T4"]
    for r in rows:
        if r["dtype"] == "bfloat16":
            assert r["predicted_ms"] is None and "no bfloat16 peak in the T4" in r["note"]
            continue
        if r["impl"] == "flash_fa2":
            # flash's closed form for the blocks the fast kernel takes on a T4, recomputed
            plan = gpu.gpu_plan("flash_fa2", r["N"], r["d"], dtype=r["dtype"],
                                budget=spec.shared_per_block)
            assert r["plan"] == f"M={plan.M} B_r={plan.B_r} B_c={plan.B_c}"
            cost = ioattn.io_cost("flash", r["N"], r["d"], plan.M, block=(plan.B_r, plan.B_c))
            reads, writes = args.heads * cost.reads, args.heads * cost.writes
            flops = 4 * r["N"] ** 2 * r["d"] * args.heads
            least = max((2 * reads + 4 * writes) / spec.bandwidth, flops / spec.peak["float16"])
            assert (r["reads"], r["writes"], r["flops"]) == (reads, writes, flops)
            assert r["bytes"] == 2 * reads + 4 * writes
            assert r["predicted_ms"] == pytest.approx(1e3 * least, rel=1e-12)
            continue
        p = roofline.predict(r["impl"], r["N"], r["d"], gpu="T4", dtype=r["dtype"],
                             heads=args.heads)
        assert r["predicted_ms"] == 1e3 * p.time and r["bytes"] == p.bytes
        assert (r["reads"], r["writes"], r["flops"]) == (p.reads, p.writes, p.flops)
    # at a d it is not compiled for, the fast kernel's prediction says why there is none
    (r16,) = [r for r in compare.predictions("H200", [1024], [32], 4)
              if (r["impl"], r["dtype"]) == ("flash_fa2", "float16")]
    assert r16["predicted_ms"] is None and "compiled for d = 64 or 128" in r16["note"]
    with pytest.raises(ValueError, match="no bfloat16 peak"):
        compare.predict_kernel("flash_fa2", 1024, 64, gpu="T4", dtype="bfloat16")
    text = compare.predictions_table("T4", args.N, args.d, args.heads)
    assert text.startswith("Predicted, not measured")
    with pytest.raises(ValueError, match="unknown GPU"):
        compare.predictions("V100", [1024], [64], 1)


# ------------------------------------------------------------------------ the notebook page
@pytest.mark.skipif(available(), reason="a GPU is available: the page would measure it")
def test_the_notebook_page_runs_without_a_gpu_and_says_so(tmp_path):
    """book/gpu_measure.md as a notebook, executed in a fresh kernel on this CPU-only machine:
    no error, the no-GPU message, the T4 example labelled as predictions, no file written."""
    import jupytext
    from nbclient import NotebookClient

    nb = jupytext.read(PAGE)
    NotebookClient(nb, timeout=300, kernel_name="python3",
                   resources={"metadata": {"path": str(tmp_path)}}).execute()
    texts = []
    for cell in nb.cells:
        for out in cell.get("outputs", []):
            assert out["output_type"] != "error", out
            texts.append(out.get("text", "") + out.get("data", {}).get("text/markdown", ""))
    text = "\n".join(texts)
    assert "No GPU here: " in text and "Runtime > Change runtime type > T4 GPU" in text
    assert "predictions, not measurements" in text
    assert "Predicted, not measured" in text and "T4 (PCIe, 16 GB) datasheet" in text
    assert "Nothing measured" in text
    assert list(tmp_path.iterdir()) == []


#: Put before the page's cells: the page's GPU branch, run with the emulator standing in for
#: the GPU (the result says "CPU emulator", backend "emulator": nothing is measured) and a
#: stand-in for Colab's download.
_STAND_IN = '''
import sys, types
import ioattn.gpu
from ioattn.gpu import benchmark as _bench

ioattn.gpu.why_unavailable = lambda: None
ioattn.gpu.device_info = lambda: {"name": "Tesla T4", "compute_capability": "7.5",
                                  "shared_memory_per_block": 65536, "runtime": "12.4",
                                  "memory_bytes": 15843721216}
_parse, _Device = _bench.parse_args, _bench.Device
_bench.parse_args = lambda argv=None: _parse([*(argv or []), "--backend", "emulator"])
_bench.Device = lambda backend: _Device("emulator")
downloads = []
colab = types.ModuleType("google.colab")
colab.files = types.SimpleNamespace(download=downloads.append)
sys.modules["google"] = types.ModuleType("google")
sys.modules["google"].colab = colab
sys.modules["google.colab"] = colab
'''


@pytest.mark.skipif(available(), reason="a GPU is available: the page would measure it")
def test_the_notebook_pages_gpu_branch_with_the_emulator_standing_in(tmp_path):
    """The cells a GPU runs (measure, compare, save, offer the downloads), executed with the
    emulator in the GPU's place: they run, write both files into the working directory under
    the benchmark's name, and offer both for download in Colab."""
    import jupytext
    import nbformat
    from nbclient import NotebookClient

    nb = jupytext.read(PAGE)
    nb.cells.insert(0, nbformat.v4.new_code_cell(_STAND_IN))
    nb.cells.append(nbformat.v4.new_code_cell("print('downloads:', downloads)"))
    NotebookClient(nb, timeout=300, kernel_name="python3",
                   resources={"metadata": {"path": str(tmp_path)}}).execute()
    text = "\n".join(out.get("text", "") + out.get("data", {}).get("text/markdown", "")
                     for cell in nb.cells for out in cell.get("outputs", [])
                     if out["output_type"] != "error")
    assert not [out for cell in nb.cells for out in cell.get("outputs", [])
                if out["output_type"] == "error"]
    assert "GPU: Tesla T4" in text and "Predictions use the T4 datasheet." in text
    assert "Measured on **CPU emulator**" in text and "no prediction" in text
    (js,) = tmp_path.glob("gpu-cpu-emulator-*.json")
    md = js.with_suffix(".md")
    assert md.is_file() and f"wrote {js.name} and {md.name}" in text
    bench.check_result(json.loads(js.read_text(encoding="utf-8")))
    assert f"downloads: [{str(js)!r}, {str(md)!r}]" in text


# ------------------------------------------------------------------------ honest timing
class _FakeDevice(bench.Device):
    """A device whose timeline is a log: marks and calls, in order."""

    def __init__(self):
        self.backend, self.log, self.clock = "fake", [], 0.0

    def synchronize(self):
        self.log.append("sync")

    def mark(self):
        self.log.append("mark")
        return self.clock

    def elapsed_ms(self, begin, end):
        return end - begin


def test_timing_puts_k_launches_and_nothing_else_between_two_events():
    dev = _FakeDevice()

    def call(i):
        def go():
            dev.log.append(f"call {i}")
            dev.clock += 2.0 + i            # set i takes 2 + i ms
        return go

    ms, n = dev.time([call(0), call(1)], warmup=3, reps=4, max_seconds=60, per_event=5)
    timed = dev.log[dev.log.index("sync") + 1:]
    assert timed.count("mark") == 8 and n == 20
    for k in range(4):
        window = timed[5 * k + 2 * k + 1: 5 * k + 2 * k + 6]
        assert timed[7 * k] == "mark" and timed[7 * k + 6] == "mark"
        assert all(e.startswith("call") for e in window)
    # groups of 5 cycling 0,1,0,1,0 / 1,0,1,0,1: (2+3+2+3+2)/5 and (3+2+3+2+3)/5
    assert ms == statistics.median([2.4, 2.6, 2.4, 2.6])


def test_a_wrong_output_marks_its_row_failed_and_counts_toward_no_target():
    rng = np.random.default_rng(3)
    Q, K, V = (rng.standard_normal((2, 40, 8)) for _ in range(3))
    scale = 1 / np.sqrt(8)
    ends = [tuple(bench._ends(x) for x in (Q, K, V))]
    S = scale * Q @ np.swapaxes(K, -1, -2)
    P = np.exp(S - S.max(-1, keepdims=True))
    right = (P / P.sum(-1, keepdims=True)) @ V
    row = {"N": 40, "dtype": "float32", "status": "ok"}
    bench.verify(row, [bench._ends(right.astype(np.float32))], ends, scale)
    assert row["status"] == "ok" and row["error"] <= 1e-6
    wrong = right.copy()
    wrong[-1, 39, 0] += 0.1                 # one entry of the last head's last row
    bench.verify(row, [bench._ends(wrong)], ends, scale)
    assert row["status"].startswith("failed") and row["error"] > bench.TOLERANCE["float32"]
    half = right.astype(np.float16).astype(np.float64)        # a float16 kernel's rounding
    row16 = {"N": 40, "dtype": "float16", "status": "ok"}
    bench.verify(row16, [bench._ends(half)], ends, scale)
    assert row16["status"] == "ok"
    rows = [dict(impl="flash", dtype="float32", N=4096, d=64, heads=16, time_ms=1.0,
                 status="failed: ..."),
            dict(impl="cupy materialised", dtype="float32", N=4096, d=64, heads=16,
                 time_ms=2.0, status="ok")]
    assert bench.targets(rows, "H200")[2]["status"] == "NOT RUN"
    rows[0]["status"] = "ok"
    assert bench.targets(rows, "H200")[2]["status"] == "PASS"


def test_input_sets_share_one_scratch():
    from ioattn.gpu.backend import get_backend

    be = get_backend("emulator")
    rng = np.random.default_rng(0)
    sets = [[rng.standard_normal((2, 24, 8)) for _ in range(3)] for _ in range(2)]
    with be.shared_scratch():
        inside = [be.scratch("S", (2, 24, 24), np.float32) for _ in range(2)]
        launches = [gpu.prepare("standard", *s, backend="emulator") for s in sets]
    assert inside[0] is inside[1]
    assert be.scratch("S", (2, 24, 24), np.float32) is not inside[0]   # outside: fresh
    for launch, s in zip(launches * 2, sets * 2):     # interleaved: each output still right
        launch()
    for launch, (Q, K, V) in zip(launches, sets):
        S = Q @ np.swapaxes(K, -1, -2) / np.sqrt(8)
        P = np.exp(S - S.max(-1, keepdims=True))
        want = (P / P.sum(-1, keepdims=True)) @ V
        assert np.abs(launch.result().output - want).max() < 1e-5


def test_a_kernel_sets_its_shared_memory_opt_in_once_not_at_every_launch():
    from ioattn.gpu.backend import Backend

    class Function:
        sets = calls = 0
        _value = 48 * 1024

        @property
        def max_dynamic_shared_size_bytes(self):
            return self._value

        @max_dynamic_shared_size_bytes.setter
        def max_dynamic_shared_size_bytes(self, v):
            Function.sets += 1
            self._value = v

        def __call__(self, grid, block, args, shared_mem=0):
            Function.calls += 1

    class Fake(Backend):
        name, xp, shared_memory_per_block = "fake", np, 227 * 1024

        def _module(self, file, count_io):
            return type("M", (), {"get_function": lambda self, k: Function()})()

    f = Fake().function("flash.cu", "flash_fwd_f32", False)
    for _ in range(5):
        f((1,), (32,), (), shared_mem=100 * 1024)
    assert (Function.sets, Function.calls) == (1, 5)
    f((1,), (32,), (), shared_mem=120 * 1024)
    assert Function.sets == 2


def test_the_fast_kernel_is_counted_by_flashs_model_and_runs_at_its_ds_only():
    assert bench.model_name("flash_fa2") == "flash" == bench.model_name("flash")
    assert {bench.model_name(i) for i in bench.KERNEL_IMPLS} == {"flash", "square_tiling",
                                                                 "standard"}
    with pytest.raises(ValueError, match="not a kernel of ioattn"):
        bench.model_name("torch sdpa")
    assert bench.fa2_skip(64) is None and bench.fa2_skip(128) is None
    assert bench.fa2_skip(32) == "skipped: flash_fa2 is compiled for d = 64 and 128 only, " \
                                 "not d = 32"
