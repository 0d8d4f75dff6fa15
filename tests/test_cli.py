"""The ``ioattn`` command."""

import json
import os
import subprocess
import sys

import pytest

import ioattn
from ioattn.cli import main


def test_sweep_prints_exact_costs_and_the_crossover(capsys):
    assert main(["sweep", "--N", "4096", "--d", "64"]) == 0
    out = capsys.readouterr().out
    flash_at_d2 = ioattn.io_cost("flash", 4096, 64, 4096).total
    assert f"{flash_at_d2:,}*" in out                        # flash is cheapest at M = d^2
    assert "<- d^2" in out and "crossover at M = " in out
    assert "lower bound" in out


def test_algorithm_subset_and_range(capsys):
    assert main(["sweep", "--N", "256", "--d", "16", "--M-min", "64", "--M-max", "1024",
                 "--algorithms", "flash,square_tiling"]) == 0
    out = capsys.readouterr().out
    assert "standard" not in out
    lines = [line for line in out.splitlines() if line.strip()[:1].isdigit()]
    assert [int(line.split()[0].replace(",", "")) for line in lines] == [64, 128, 256, 512, 1024]


def test_options_reach_the_algorithms(capsys):
    assert main(["sweep", "--N", "256", "--d", "16", "--M-min", "1024", "--M-max", "1024",
                 "--option", "square_tiling.schedule=outer", "--check"]) == 0
    out = capsys.readouterr().out
    outer = ioattn.io_cost("square_tiling", 256, 16, 1024, schedule="outer").total
    assert "options: square_tiling (schedule=outer)" in out and f"{outer:,}" in out
    assert "every count equals its closed form" in out


def test_square_tiling_runs_the_outer_schedule_unless_told_otherwise(capsys):
    # the book's crossover chapter sweeps with the outer schedule, and so does the command
    assert main(["sweep", "--N", "4096", "--d", "64"]) == 0
    out = capsys.readouterr().out
    outer = ioattn.io_cost("square_tiling", 4096, 64, 1024, schedule="outer").total
    blocked = ioattn.io_cost("square_tiling", 4096, 64, 1024).total
    assert outer < blocked
    assert "options: square_tiling (schedule=outer)" in out
    assert f"{outer:,}*" in out and f"{blocked:,}" not in out     # cheapest at M = 1024
    outer_options = {"square_tiling": {"schedule": "outer"}}
    last = ioattn.bounds.crossovers(4096, 64, 4, 32 * 64 * 64, options=outer_options)[-1]
    assert f"crossover at M = {last.M:,} " in out
    assert main(["sweep", "--N", "4096", "--d", "64",
                 "--option", "square_tiling.schedule=blocked"]) == 0
    out = capsys.readouterr().out
    assert "options: square_tiling (schedule=blocked)" in out
    assert f"{blocked:,}" in out and f"{outer:,}" not in out
    assert main(["sweep", "--N", "256", "--d", "16", "--algorithms", "flash,standard"]) == 0
    assert "options:" not in capsys.readouterr().out            # nothing swept has options


def test_backward_sweep_is_checked_against_the_simulation(capsys):
    assert main(["sweep", "--N", "64", "--d", "8", "--M-min", "128", "--M-max", "256",
                 "--backward", "--check"]) == 0
    out = capsys.readouterr().out
    flash = ioattn.io_cost("flash", 64, 8, 256, backward=True).total
    assert "backward pass" in out and f"{flash:,}" in out
    assert flash != ioattn.io_cost("flash", 64, 8, 256).total
    assert "checked 6 runs: every count equals its closed form" in out   # 3 algorithms x 2 M


def test_plot_is_written(tmp_path, capsys):
    target = tmp_path / "sweep.png"
    assert main(["sweep", "--N", "512", "--d", "16", "--plot", str(target)]) == 0
    assert target.read_bytes()[:8] == b"\x89PNG\r\n\x1a\n"
    assert f"plot saved to {target}" in capsys.readouterr().out


def test_check_simulates_every_point(capsys):
    assert main(["sweep", "--N", "24", "--d", "4", "--M-max", "256", "--check"]) == 0
    captured = capsys.readouterr()
    assert "every count equals its closed form" in captured.out
    assert "simulating" in captured.err                          # the progress bar


def test_algorithms_command(capsys):
    assert main(["algorithms"]) == 0
    out = capsys.readouterr().out
    assert all(name in out for name in ioattn.algorithms())


@pytest.mark.parametrize("argv, message", [
    (["sweep", "--N", "0", "--d", "4"], "expected a positive integer"),
    (["sweep", "--N", "x", "--d", "4"], "expected a positive integer"),
    (["sweep", "--N", "8", "--d", "4", "--algorithms", "flsh"], "unknown algorithm 'flsh'"),
    (["sweep", "--d", "4"], "required: --N"),
    (["sweep", "--N", "8", "--d", "4", "--option", "flash.colour=red"], "no option 'colour'"),
    (["sweep", "--N", "8", "--d", "4", "--option", "flash"], "expected NAME.KEY=VALUE"),
])
def test_bad_arguments_exit_2_with_a_message(argv, message, capsys):
    with pytest.raises(SystemExit) as exc:
        main(argv)
    assert exc.value.code == 2
    assert message in capsys.readouterr().err


def test_bad_option_value(capsys):
    assert main(["sweep", "--N", "8", "--d", "4", "--option", "flash.variant=fa3"]) == 2
    assert "fa2, fa1" in capsys.readouterr().err


def test_empty_range(capsys):
    assert main(["sweep", "--N", "8", "--d", "4", "--M-min", "9", "--M-max", "15"]) == 2
    assert "no power of two" in capsys.readouterr().err


def _parallel_cells(out: str) -> dict:
    """(P, algorithm) -> the cells of its line in the table ``ioattn parallel`` prints."""
    cells, P = {}, None
    for line in out.splitlines()[4:]:
        P = int(line[:5]) if line[:5].strip() else P
        cells[P, line[7:19].strip()] = line[19:].split()
    return cells


def test_parallel_prints_the_costs(capsys):
    from ioattn.parallel import bounds, cost

    assert main(["parallel", "--N", "4096", "--d", "64", "--heads", "16", "--P", "4,16,64"]) == 0
    out = capsys.readouterr().out
    assert out.startswith("Attention on P processors: N = 4,096, d = 64, H = 16 heads, forward")
    got = _parallel_cells(out)
    assert len(got) == 12
    for P in (4, 16, 64):
        for name in ("ring", "striped", "all_to_all", "grid"):
            if name == "all_to_all" and P > 16:
                assert got[P, name] == ["—", "does", "not", "apply:", "needs", "H", "≥", "P"]
                continue
            c = cost(name, 4096, 64, P, heads=16)
            bound = bounds.lower_bound(4096, 64, P, c.max_memory, heads=16)
            # the least traffic at P is marked: all-to-all up to P = H, then the grid
            star = "*" if name == ("all_to_all" if P <= 16 else "grid") else ""
            assert got[P, name] == [f"{c.max_traffic:,}{star}", f"{c.max_received:,}",
                                    f"{c.max_messages}", f"{c.max_memory:,}",
                                    f"{int(bound):,}", f"{c.max_received / bound:.2f}"]


def test_parallel_powers_of_two_backward_and_causal(capsys):
    assert main(["parallel", "--N", "512", "--d", "16", "--P-max", "32", "--backward",
                 "--causal"]) == 0
    out = capsys.readouterr().out
    got = _parallel_cells(out)
    assert sorted({P for P, _ in got}) == [2, 4, 8, 16, 32]
    assert "backward pass, causal mask." in out and "balance" in out
    assert "does not apply" in out and "no backward pass" not in out    # all_to_all: H < P


def test_parallel_json_round_trips(capsys):
    from ioattn.parallel.table import data

    assert main(["parallel", "--N", "1000", "--d", "8", "--heads", "4", "--P", "8,1,3,3",
                 "--json"]) == 0
    got = json.loads(capsys.readouterr().out)
    assert got == data(1000, 8, [1, 3, 8], heads=4)              # sorted, without repeats
    assert got["Ps"] == [1, 3, 8] and len(got["rows"]) == 12
    assert [r["name"] for r in got["rows"] if r["P"] == 8 and r["fewest"]] == ["grid"]


@pytest.mark.parametrize("argv, message", [
    (["--P", "2,x"], "argument --P: expected a comma-separated list of positive integers"),
    (["--P", "2.5"], "argument --P: expected a comma-separated list of positive integers"),
    (["--P", "0,2"], "argument --P: processor counts must be positive, got 0"),
    (["--P", ""], "argument --P: expected a comma-separated list"),
    (["--P", "2,128"], "argument --P: P = 128 is more than N = 64; every processor needs"),
    (["--P-max", "128"], "argument --P-max: P = 128 is more than N = 64"),
    (["--P-max", "1"], "argument --P-max: 1 is less than 2"),
    (["--P", "2", "--P-max", "4"], "argument --P-max: not allowed with argument --P"),
    (["--heads", "0"], "argument --heads: expected a positive integer, got 0"),
])
def test_parallel_bad_arguments(argv, message, capsys):
    with pytest.raises(SystemExit) as exc:
        main(["parallel", "--N", "64", "--d", "8", *argv])
    assert exc.value.code == 2
    err = capsys.readouterr().err
    assert err.startswith("ioattn parallel: error: ") and message in err
    assert err.count("\n") == 1 and "Traceback" not in err         # one line


@pytest.mark.parametrize("unbuffered", [False, True], ids=["buffered", "unbuffered"])
@pytest.mark.parametrize("command", [["sweep", "--N", "256", "--d", "16"],
                                     ["parallel", "--N", "256", "--d", "16", "--P-max", "16"]])
def test_output_cut_short_by_its_reader_is_no_traceback(command, unbuffered):
    # `ioattn sweep ... | true`: the reader has closed the pipe before anything is written, so
    # that every write fails whatever the speed of either side (a reader that stops after one
    # line, as `head -1`, may or may not stop before the whole output is in the pipe); with
    # Python's output buffered (the default) or not (PYTHONUNBUFFERED=1), set here either way
    read_end, write_end = os.pipe()
    os.close(read_end)
    env = {key: value for key, value in os.environ.items() if key != "PYTHONUNBUFFERED"}
    if unbuffered:
        env["PYTHONUNBUFFERED"] = "1"
    try:
        done = subprocess.run([sys.executable, "-m", "ioattn", *command], stdout=write_end,
                              stderr=subprocess.PIPE, env=env, timeout=300, check=False)
    finally:
        os.close(write_end)
    err = done.stderr.decode()
    assert "Traceback" not in err and "BrokenPipeError" not in err, err
    assert done.returncode == 1, err


def test_python_dash_m():
    done = subprocess.run([sys.executable, "-m", "ioattn", "sweep", "--N", "64", "--d", "8"],
                          capture_output=True, text=True, check=False)
    assert done.returncode == 0, done.stderr
    assert "crossover" in done.stdout


def _one_line_error(capsys, *needles):
    """stderr holds one line, ``ioattn sweep: error: ...`` with each of ``needles``; no output."""
    captured = capsys.readouterr()
    assert captured.out == ""                               # refused before computing
    err = captured.err
    assert err.startswith("ioattn sweep: error: ") and err.count("\n") == 1, err
    for needle in needles:
        assert needle in err, err
    return err


def test_a_range_where_nothing_runs_is_an_error(capsys):
    from ioattn.algorithms import get

    assert main(["sweep", "--N", "4096", "--d", "64", "--M-min", "2", "--M-max", "3"]) == 2
    _one_line_error(capsys, "argument --M-max: no algorithm can run", "M swept, 2 ",
                    *(f"{n} needs M >= {get(n).min_M(64):,}" for n in ioattn.algorithms()))
    assert main(["sweep", "--N", "64", "--d", "8", "--M-min", "2", "--M-max", "4",
                 "--backward", "--algorithms", "flash"]) == 2
    _one_line_error(capsys, f"flash needs M >= {get('flash', True).min_M(8)}")
    assert main(["sweep", "--N", "8", "--d", "4", "--M-min", "9", "--M-max", "3"]) == 2
    _one_line_error(capsys, "argument --M-max: 3 is less than --M-min = 9", "empty")
    # where one algorithm can run, the others' dashes are information, not an error
    assert main(["sweep", "--N", "64", "--d", "8", "--M-min", "4", "--M-max", "8"]) == 0


@pytest.mark.parametrize("target, needle", [
    ("/nonexistent/x.png", "there is no folder '/nonexistent'"),
    ("x.xyz", "matplotlib cannot write .xyz files; use one of"),
    ("plot", "cannot tell the format of 'plot'"),
])
def test_plot_to_where_it_cannot_go_is_refused_first(target, needle, capsys):
    assert main(["sweep", "--N", "64", "--d", "8", "--plot", target]) == 2
    _one_line_error(capsys, "argument --plot: ", needle, ".png")


def test_plot_into_a_folder_is_refused(tmp_path, capsys):
    assert main(["sweep", "--N", "64", "--d", "8", "--plot", str(tmp_path)]) == 2
    _one_line_error(capsys, "is a folder")


def test_option_values_are_parsed_not_iterated(capsys):
    from ioattn.algorithms import get
    from ioattn.cli import _value

    assert _value("8,8") == (8, 8) and _value("-3") == -3 and _value("16") == 16
    assert _value("outer") == "outer" and _value("None") is None and _value(" 4, -2") == (4, -2)
    least = get("flash").min_M(16, block=(8, 8))
    M = 1 << least.bit_length()
    assert main(["sweep", "--N", "256", "--d", "16", "--M-min", str(M), "--M-max", str(M),
                 "--option", "flash.block=8,8"]) == 0
    out = capsys.readouterr().out
    assert "options: flash (block=(8, 8))" in out
    assert f"{ioattn.io_cost('flash', 256, 16, M, block=(8, 8)).total:,}" in out
    assert main(["sweep", "--N", "256", "--d", "16", "--option", "flash.block=-3"]) == 2
    _one_line_error(capsys, "argument --option: block must be a pair (B_r, B_c), got -3")
    assert main(["sweep", "--N", "256", "--d", "16", "--option", "flash.block=8,-3"]) == 2
    _one_line_error(capsys, "B_c must be at least 1, got -3")
    with pytest.raises(SystemExit) as exc:
        main(["sweep", "--N", "256", "--d", "16", "--option", "flash.block=8,x"])
    assert exc.value.code == 2
    _one_line_error(capsys, "expected a comma-separated list of integers (e.g. 8,8)")


@pytest.mark.parametrize("argv, needle", [
    (["--algorithms", "flsh"], "unknown algorithm 'flsh' (did you mean 'flash'?)"),
    (["--algorithms", ","], "expected comma-separated algorithm names"),
    (["--option", "flash.blok=8"], "no option 'blok' (did you mean 'block'?)"),
    (["--M-min", "-4"], "argument --M-min: expected a positive integer"),
    (["--M-max", "2.5"], "argument --M-max: expected a positive integer"),
])
def test_parse_errors_are_one_line(argv, needle, capsys):
    with pytest.raises(SystemExit) as exc:
        main(["sweep", "--N", "64", "--d", "8", *argv])
    assert exc.value.code == 2
    _one_line_error(capsys, needle)


def test_bad_arguments_from_a_shell_are_one_line_no_traceback(tmp_path):
    done = subprocess.run([sys.executable, "-m", "ioattn", "sweep", "--N", "64", "--d", "8",
                           "--plot", str(tmp_path / "missing" / "x.png")],
                          capture_output=True, text=True, check=False)
    assert done.returncode == 2 and done.stdout == ""
    assert done.stderr.count("\n") == 1 and "Traceback" not in done.stderr
    assert done.stderr.startswith("ioattn sweep: error: argument --plot: there is no folder")


def test_a_sweep_out_of_memory_is_one_line(monkeypatch, capsys):
    import ioattn.cli

    def too_wide(*args, **kwargs):
        raise MemoryError("Unable to allocate 2.00 TiB")

    monkeypatch.setattr(ioattn.cli, "sweep", too_wide)
    assert main(["sweep", "--N", "64", "--d", "8"]) == 2
    _one_line_error(capsys, "not enough memory for the sweep over M = 4 to 2,048",
                    "2.00 TiB", "--M-min and --M-max")


def test_parallel_lists_every_scheme_with_schemes(capsys):
    from ioattn.parallel import ALGORITHMS, NAMES

    assert main(["parallel", "--N", "1024", "--d", "8", "--heads", "4", "--P", "4"]) == 0
    plain = _parallel_cells(capsys.readouterr().out)
    assert [n for _, n in plain] == list(ALGORITHMS)
    assert main(["parallel", "--N", "1024", "--d", "8", "--heads", "4", "--P", "4",
                 "--schemes"]) == 0
    assert [n for _, n in _parallel_cells(capsys.readouterr().out)] == list(NAMES)
    with pytest.raises(SystemExit):
        main(["parallel", "--help"])
    help_text = " ".join(capsys.readouterr().out.split())
    assert "--schemes adds the schemes run in practice (zigzag, all_gather, usp, " \
        "usp_zigzag)" in help_text


def test_parallel_backward_schemes(capsys):
    # the backward pass of every scheme is printed, equal to its cost
    from ioattn.parallel import NAMES, WITH_BACKWARD, cost

    assert main(["parallel", "--N", "1024", "--d", "8", "--heads", "4", "--P", "2,4",
                 "--backward", "--causal", "--schemes"]) == 0
    got = _parallel_cells(capsys.readouterr().out)
    assert [n for P, n in got if P == 4] == list(NAMES)
    for (P, name), cells in got.items():
        c = cost(name, 1024, 8, P, heads=4, causal=True, backward=True)
        assert [cells[0].rstrip("*")] + cells[1:4] == [
            f"{c.max_traffic:,}", f"{c.max_received:,}", f"{c.max_messages}",
            f"{c.max_memory:,}"], (P, name, cells)
    assert {n for _, n in got} == set(WITH_BACKWARD) == set(NAMES)
    with pytest.raises(SystemExit):
        main(["parallel", "--help"])
    help_text = " ".join(capsys.readouterr().out.split())
    assert "--backward the backward pass (every algorithm and scheme has one)" in help_text


def test_parallel_overlap_column(capsys):
    from ioattn.parallel.overlap import smallest

    argv = ["parallel", "--N", "32768", "--d", "128", "--heads", "8", "--P", "4,8", "--schemes",
            "--causal", "--overlap", "H100"]
    assert main(argv) == 0
    out = capsys.readouterr().out
    assert "on H100 over NVLink 4 (a time model" in out and "N/P to hide" in out
    lines = out.splitlines()[6:]
    seen = 0
    P = None
    for line in lines:
        P = int(line[:5]) if line[:5].strip() else P
        name = line[7:19].strip()
        cells = line.split()
        if name in ("ring", "striped", "zigzag"):
            n = smallest(name, "H100", "NVLink 4", 128, P, heads=8, causal=True).n
            assert cells[-2:] == [f"{n:,}", "(yes)" if 32768 // P >= n else "(no)"]
            seen += 1
        else:
            assert cells[-1] == "—"
    assert seen == 6
    assert main(argv + ["--link", "InfiniBand NDR", "--json"]) == 0
    got = json.loads(capsys.readouterr().out)
    assert (got["overlap"], got["link"]) == ("H100", "InfiniBand NDR")
    ring8 = [r for r in got["rows"] if r["P"] == 8 and r["name"] == "ring"][0]
    assert ring8["hide_n"] == smallest("ring", "H100", "InfiniBand NDR", 128, 8, heads=8,
                                       causal=True).n and ring8["hides"] is False


@pytest.mark.parametrize("argv, message", [
    (["--link", "NVLink 4"], "argument --link: it is the link of --overlap GPU"),
    (["--overlap", "V100"], "argument --overlap: invalid choice: 'V100'"),
])
def test_parallel_overlap_bad_arguments(argv, message, capsys):
    with pytest.raises(SystemExit) as exc:
        main(["parallel", "--N", "64", "--d", "8", *argv])
    assert exc.value.code == 2
    assert message in capsys.readouterr().err
