"""ioattn.gpu's entry points: clear errors for bad input, and a clear error without a GPU."""

import numpy as np
import pytest

import ioattn
import ioattn.gpu as gpu


@pytest.fixture
def qkv(rng):
    return tuple(rng.standard_normal((16, 8)) for _ in range(3))


def run(*args, **kw):
    return gpu.run(*args, backend="emulator", **kw)


def test_available_is_a_bool_and_agrees_with_the_reason():
    assert gpu.available() is (gpu.why_unavailable() is None)


@pytest.mark.skipif(gpu.available(), reason="a GPU is available here")
def test_without_a_gpu_every_call_says_what_to_do(qkv):
    for call in (lambda: gpu.run("flash", *qkv), lambda: gpu.device_info(),
                 lambda: gpu.run_backward(*qkv, qkv[0], qkv[0], np.zeros(16))):
        with pytest.raises(gpu.GPUUnavailableError) as err:
            call()
        message = str(err.value)
        assert gpu.why_unavailable() in message and "Colab" in message
        assert "backend='emulator'" in message


@pytest.mark.parametrize("bad, match", [
    (lambda q: q[:, :, None], "K has shape"),
    (lambda q: np.zeros(5), "must be \\(N, d\\)"),
    (lambda q: q.astype(int), "floating-point"),
    (lambda q: np.where(q > 1, np.nan, q), "non-finite"),
    (lambda q: q[:0], "empty"),
])
def test_bad_arrays(qkv, bad, match):
    Q, K, V = qkv
    with pytest.raises((ValueError, TypeError), match=match):
        run("flash", bad(Q), K, V)


def test_bad_options(qkv):
    with pytest.raises(ValueError, match="no GPU kernels for 'nope'"):
        run("nope", *qkv)
    with pytest.raises(ValueError, match="dtype must be one of"):
        run("flash", *qkv, dtype="float64")
    with pytest.raises(ValueError, match="for flash only"):
        run("standard", *qkv, dtype="float16")
    with pytest.raises(ValueError, match="causal=True is implemented for flash only"):
        run("standard", *qkv, causal=True)
    with pytest.raises(ValueError, match="scale must be"):
        run("flash", *qkv, scale=-1.0)
    with pytest.raises(ValueError, match="backend must be"):
        gpu.run("flash", *qkv, backend="tpu")
    with pytest.raises(ValueError, match="take no options"):
        run("flash", *qkv, variant="fa1")


def test_too_large_a_head(rng):
    Q = rng.standard_normal((4, 257))
    with pytest.raises(ValueError, match="d <= 256"):
        run("flash", Q, Q, Q)


def test_M_too_small_names_the_least_M(qkv):
    with pytest.raises(ValueError, match="M"):
        run("flash", *qkv, M=10)


def test_M_beyond_the_shared_memory(rng):
    Q = rng.standard_normal((2000, 64))
    with pytest.raises(ValueError, match="bytes of shared memory per block.*use M <= ") as err:
        run("flash", Q, Q, Q, M=10**6)
    largest = int(str(err.value).rsplit("M <= ", 1)[1])
    budget = gpu.backend.get_backend("emulator").shared_memory_per_block
    assert 4 * ioattn.plan("flash", 2000, 64, largest).footprint <= budget
    assert 4 * ioattn.plan("flash", 2000, 64, largest + 1).footprint > budget
