"""The compiled exact search (ioattn.pebble.compiled) against the pure-Python one: the same search,
state for state, on random small DAGs and on the attention and matrix-product graphs; its limits,
its progress bar, its fallback to Python, and its run in a sandbox where no cache is writable."""

import os
import random
import subprocess
import sys
import textwrap

import pytest

from ioattn.pebble import (
    Graph,
    PebbleGame,
    SearchLimitError,
    attention_graph,
    matmul_graph,
    min_io,
)
from ioattn.pebble import compiled as compiled_search
from ioattn.pebble.search import _Search
from ioattn.pebble.upper import good_game

from .test_search import (
    REGRESSIONS,
    binary_tree,
    brute_force,
    narrow_dag,
    random_dag,
    wasteful,
)

pytestmark = pytest.mark.skipif(not compiled_search.available(), reason="numba is missing")


def both(graph, M, **options):
    """Both engines on one instance: the same optimum, states expanded and reached, lower
    bound and moves, and the compiled engine's moves replay to a complete game of that I/O."""
    fast = min_io(graph, M, progress=False, engine="compiled", **options)
    slow = min_io(graph, M, progress=False, engine="python", **options)
    assert (fast.engine, slow.engine) == ("compiled", "python")
    assert (fast.io, fast.states, fast.generated, fast.lower_bound) == \
        (slow.io, slow.states, slow.generated, slow.lower_bound)
    assert (fast.moves, fast.reads, fast.writes) == (slow.moves, slow.reads, slow.writes)
    game = PebbleGame.replay(graph, M, fast.moves)
    assert game.is_complete() and game.io == fast.io and game.peak <= M
    assert fast.memory > 0 and slow.memory == 0
    return fast


def test_same_search_on_random_small_dags():
    rng = random.Random(20240601)
    for _ in range(60):
        g = random_dag(rng, rng.randint(3, 12))
        low = g.max_in_degree + 1
        for M in range(low, min(low + 3, len(g)) + 1):
            both(g, M)


def test_same_search_where_the_heuristic_counts_reads_of_computed_values():
    """Narrow DAGs, whose tight and deep vertices make the heuristic's term E (and the memo of
    assembles) act; on the smaller ones, the optimum is also a plain search's."""
    rng = random.Random(7)
    deep = tight = 0
    while deep < 20 or tight < 20:
        g = narrow_dag(rng, rng.randint(5, 14))
        for M in (g.max_in_degree + 1, g.max_in_degree + 2):
            opt = both(g, M)
            search = _Search(g, M)
            deep += bool(search.deep)
            tight += bool(search.tight)
            if len(g) <= 9:
                assert opt.io == brute_force(g, M)


@pytest.mark.parametrize("g, M", REGRESSIONS)
def test_regressions(g, M):
    assert both(g, M).io == brute_force(g, M)


#: The attention and matrix-product graphs of benchmarks/pebble.py, each with every cache size M
#: at which the Python search finishes within a few seconds (about 2 s at most, measured; at the
#: smaller M it runs for minutes), up to M = every vertex.
FAMILY = [
    ("attention", (1, 1), range(3, 8)),
    ("attention", (1, 2), range(3, 15)),
    ("attention", (1, 3), range(3, 22)),
    ("attention", (2, 1), range(7, 25)),
    ("attention", (1, 4), range(3, 29)),
    ("attention", (2, 2), range(9, 47)),
    ("attention", (3, 1), range(11, 52)),
    ("matmul", (1, 1, 1), range(3, 4)),
    ("matmul", (1, 2, 1), range(3, 8)),
    ("matmul", (2, 1, 2), range(3, 9)),
    ("matmul", (1, 3, 1), range(3, 12)),
    ("matmul", (2, 2, 1), range(3, 13)),
    ("matmul", (1, 4, 1), range(3, 16)),
    ("matmul", (2, 2, 2), range(3, 21)),
    ("matmul", (3, 2, 2), range(8, 29)),
    ("matmul", (2, 3, 2), range(8, 33)),
    ("matmul", (3, 3, 3), range(15, 64)),
]


@pytest.mark.parametrize("family, shape, Ms", FAMILY,
                         ids=[f"{f}{s}".replace(" ", "") for f, s, _ in FAMILY])
def test_same_search_on_attention_and_matmul_graphs(family, shape, Ms):
    g = (attention_graph if family == "attention" else matmul_graph)(*shape)
    optima = [both(g, M).io for M in Ms]
    assert optima == sorted(optima, reverse=True)


def test_same_search_with_an_incumbent():
    """Both engines skip the same states with a good game known (its I/O the optimum, or more),
    on random DAGs and on attention and matrix-product graphs."""
    rng = random.Random(12)
    instances = [(matmul_graph(3, 2, 2), 8), (matmul_graph(2, 2, 2), 3),
                 (matmul_graph(2, 2, 1), 3), (attention_graph(1, 3), 3), (attention_graph(1, 2), 3)]
    for _ in range(30):
        g = random_dag(rng, rng.randint(3, 12))
        instances.append((g, g.max_in_degree + 1 + rng.randint(0, 1)))
    for g, M in instances:
        game = good_game(g, M, iterations=100)
        for incumbent in (game, wasteful(g, game, 1)):
            assert both(g, M, incumbent=incumbent).io == both(g, M).io


def test_64_vertices_the_most_a_word_holds():
    g = Graph([(i, i + 1) for i in range(63)] + [(0, 63)])       # a chain with a shortcut
    assert len(g) == 64
    for M in (3, 4):
        assert both(g, M).io == 2


def test_binary_trees():
    for leaves, Ms in ((4, (3, 4, 7)), (8, (3, 4, 5, 15))):
        g = binary_tree(leaves)
        for M in Ms:
            both(g, M)


def test_h_after_an_eviction_from_one_count_per_evicted_vertex():
    """compiled._h_evicting (the h of every successor that places x and evicts u, from one
    count of the state with u evicted) equals the full count, on every state (red, blue) of
    small graphs whose heuristic has no term E, for every u and x it is used for."""
    import numpy as np

    rng = random.Random(5)
    graphs = [attention_graph(1, 1), matmul_graph(1, 2, 1)]
    while len(graphs) < 12:
        g = random_dag(rng, rng.randint(4, 7))
        if not (_Search(g, 3).tight or _Search(g, 3).deep):
            graphs.append(g)
    checked = 0
    for g in graphs:
        s = _Search(g, len(g))
        assert not (s.tight or s.deep)
        n, inp, out = s.n, s.inp, s.out
        for red in range(1 << n):
            for blue in range(1 << n):
                pending = out & ~blue
                for u in range(n):
                    ubit = 1 << u
                    if not red & ubit or blue & ubit:
                        continue
                    h_u, seen_u, _ = s.needed(red ^ ubit, blue)
                    for x in range(n):
                        xbit = 1 << x
                        if red & xbit or pending & xbit:
                            continue
                        computed = not inp & xbit and not s.pm[x] & ~(red ^ ubit)
                        if not (blue & xbit or computed):
                            continue
                        h = compiled_search._h_evicting(h_u, np.uint64(seen_u), np.uint64(inp),
                                                        np.uint64(xbit))
                        assert h == s.needed(red ^ ubit | xbit, blue)[0]
                        checked += 1
    assert checked > 100_000


# ------------------------------------------------------------------------------------ threads
def threaded(graph, M, engine="compiled", **options):
    """The search on two threads: the optimum of the search on one (compiled, which the tests
    above prove the same as the Python search, or ``engine``), a legal complete game of that
    I/O, and the same result again."""
    opt = min_io(graph, M, progress=False, threads=2, **options)
    again = min_io(graph, M, progress=False, threads=2, **options)
    assert (opt.io, opt.states, opt.generated, opt.moves) == \
        (again.io, again.states, again.generated, again.moves)
    assert opt.io == min_io(graph, M, progress=False, engine=engine, **options).io
    game = PebbleGame.replay(graph, M, opt.moves)
    assert game.is_complete() and game.io == opt.io and game.peak <= M
    return opt


def test_threads_find_the_optimum_on_random_small_dags():
    rng = random.Random(31)
    for k in range(50):
        g = (random_dag if k % 2 else narrow_dag)(rng, rng.randint(3, 10))
        M = g.max_in_degree + 1 + rng.randint(0, 1)
        opt = threaded(g, M, engine="python")
        if len(g) <= 8:
            assert opt.io == brute_force(g, M)
        threaded(g, M, engine="python", incumbent=good_game(g, M, iterations=20))


@pytest.mark.parametrize("g, Ms", [(attention_graph(2, 1), (3, 4, 7)), (matmul_graph(2, 2, 2),
                                   (3, 4)), (matmul_graph(3, 2, 2), (8,)), (binary_tree(8), (3,))])
def test_threads_find_the_optimum_on_attention_and_matmul_graphs(g, Ms):
    for M in Ms:
        threaded(g, M)
        threaded(g, M, incumbent=good_game(g, M))


def test_threads_with_full_buffers_put_states_back(monkeypatch):
    """Buffers with room for a few states' successors: each thread expands what fits and puts
    the rest of its share back on the queue; the optimum stays."""
    g = matmul_graph(2, 2, 2)
    margin = 2 * len(g) * 3 + 2
    monkeypatch.setattr(compiled_search, "_COLUMNS", 3 * margin)
    calls = []
    unpop = compiled_search._unpop
    monkeypatch.setattr(compiled_search, "_unpop", lambda *a: calls.append(a) or unpop(*a))
    assert threaded(g, 3).io == 25
    assert calls


def test_threads_budget():
    for budget in (1, 50, 3000):
        with pytest.raises(SearchLimitError, match="too large for exact search") as info:
            min_io(attention_graph(2, 1), 3, max_states=budget, progress=False, threads=2)
        assert info.value.states == budget and info.value.bound <= 24


def test_threads_time_limit(ticking_clock):
    # the clock moves only when read: the search stops at the same state on every machine
    with pytest.raises(SearchLimitError, match="time_limit") as info:
        min_io(attention_graph(2, 2), 5, time_limit=0.2, progress=False, threads=2)
    assert info.value.seconds > 0.2 and info.value.states > 0


def test_threads_must_be_a_positive_integer():
    g = matmul_graph(1, 2, 1)
    with pytest.raises(ValueError, match="threads must be at least 1"):
        min_io(g, 3, threads=0)
    with pytest.raises(TypeError, match="threads must be an integer"):
        min_io(g, 3, threads="2")


# ------------------------------------------------------------------------------------ limits
@pytest.mark.parametrize("g, M, budget", [(matmul_graph(2, 2, 2), 4, 50),
                                          (matmul_graph(2, 2, 2), 4, 1),
                                          (attention_graph(2, 1), 3, 5000)])
def test_state_budget_gives_up_as_the_python_search_does(g, M, budget):
    errors = {}
    for engine in ("compiled", "python"):
        with pytest.raises(SearchLimitError, match="too large for exact search") as info:
            min_io(g, M, max_states=budget, progress=False, engine=engine)
        errors[engine] = info.value
    fast, slow = errors["compiled"], errors["python"]
    assert fast.states == slow.states == budget
    assert (fast.bound, fast.generated) == (slow.bound, slow.generated)
    assert f"{budget} states explored" in str(fast)
    assert fast.memory > 0 and slow.memory is None
    assert fast.bound <= min_io(g, M, progress=False).io          # a proven lower bound


def test_time_limit(ticking_clock):
    # the clock moves only when read: the search stops at the same state on every machine
    with pytest.raises(SearchLimitError, match="time_limit") as info:
        min_io(attention_graph(2, 2), 5, time_limit=0.2, progress=False)
    assert info.value.seconds > 0.2 and info.value.states > 0


def test_progress_bar(capsys):
    opt = min_io(matmul_graph(1, 2, 1), 3, progress=True)
    out, err = capsys.readouterr()
    assert opt.engine == "compiled" and out == "" and "min_io" in err
    min_io(matmul_graph(1, 2, 1), 3, progress=False)
    assert capsys.readouterr() == ("", "")


def test_compile_seconds_is_measured_once():
    first = compiled_search.compile_seconds()
    assert first > 0 and compiled_search.compile_seconds() == first


# ---------------------------------------------------------------------------------- engines
def test_bad_engine_is_refused():
    with pytest.raises(ValueError, match="engine must be one of 'compiled', 'python'"):
        min_io(matmul_graph(1, 1, 1), 3, engine="numba")
    with pytest.raises(ValueError, match="engine"):
        min_io(matmul_graph(1, 1, 1), 3, engine=None)


def test_more_than_64_vertices_fall_back_to_python():
    g = attention_graph(2, 3)                        # 68 vertices
    opt = min_io(g, len(g), max_vertices=68, progress=False)
    assert opt.engine == "python" and opt.io == len(g.inputs) + len(g.outputs)


def test_falls_back_to_python_without_numba(monkeypatch):
    monkeypatch.setattr(compiled_search, "available", lambda: False)
    assert min_io(matmul_graph(1, 2, 1), 3, progress=False).engine == "python"


def run_python(code: str, **env) -> str:
    result = subprocess.run([sys.executable, "-c", textwrap.dedent(code)], capture_output=True,
                            text=True, timeout=600, env={**os.environ, **env})
    assert result.returncode == 0, result.stderr
    return result.stdout


def test_numba_not_importable():
    out = run_python("""
        import sys
        sys.modules["numba"] = None                  # import numba raises ImportError
        from ioattn.pebble import matmul_graph, min_io
        opt = min_io(matmul_graph(1, 2, 2), 3, progress=False)
        print(opt.engine, opt.io)
        """)
    assert out.split() == ["python", str(min_io(matmul_graph(1, 2, 2), 3, progress=False).io)]


def test_runs_where_no_cache_location_is_writable(tmp_path):
    """Under Landlock (as ioattn.teach confines a graded notebook) nothing outside a fresh
    folder is writable: Numba cannot cache the kernels, and compiles them in memory."""
    sandbox = pytest.importorskip("ioattn.teach.sandbox")
    if sandbox.abi() == 0:
        pytest.skip("the kernel has no Landlock")
    out = run_python(f"""
        import os
        from ioattn.teach.sandbox import confine
        os.chdir({str(tmp_path)!r})
        print(confine(os.getcwd()))
        import ioattn
        try:                                         # the confinement holds
            open(os.path.join(os.path.dirname(ioattn.__file__), "probe"), "w")
        except PermissionError:
            print("package not writable")
        from ioattn.pebble import matmul_graph, min_io
        opt = min_io(matmul_graph(1, 3, 1), 3, progress=False)
        print(opt.engine, opt.io)
        """, NUMBA_CACHE_DIR="", HOME=str(tmp_path / "absent"), OMP_NUM_THREADS="1",
        OPENBLAS_NUM_THREADS="1")
    assert "package not writable" in out
    assert out.split()[-2:] == ["compiled", "11"]


@pytest.mark.parametrize("g, M", [(attention_graph(2, 1), 7), (binary_tree(8), 4),
                                  (matmul_graph(2, 2, 2), 4)], ids=["attention", "tree", "matmul"])
def test_same_search_without_merging_mirror_images(g, M):
    assert both(g, M, symmetry=False).symmetries == 1
    assert both(g, M).symmetries > 1
