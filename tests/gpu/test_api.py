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


@pytest.mark.parametrize("call, error, match", [
    (lambda q: gpu.run("bogus", *q), ValueError, "no GPU kernels for 'bogus'; there are flash"),
    (lambda q: gpu.run("flsh", *q), ValueError, "'flsh' \\(did you mean 'flash'\\?\\)"),
    (lambda q: gpu.run("flash", *q, dtype="float64"), ValueError, "dtype must be one of"),
    (lambda q: gpu.run("flash", *q, causal="yes"), TypeError, "causal must be True or False"),
    (lambda q: gpu.run("flash", *q, count_io=1), TypeError, "count_io must be True or False"),
    (lambda q: gpu.run("flash", *q, save_lse="no"), TypeError, "save_lse must be True or"),
    (lambda q: gpu.run("flash", *q, M=300.5), TypeError, "M must be an integer"),
    (lambda q: gpu.run("flash", *q, M=0), ValueError, "M must be at least 1"),
    (lambda q: gpu.run("flash", *q, block=8), TypeError, "block must be a pair"),
    (lambda q: gpu.run("flash", *q, block=(8, -8)), ValueError, "B_c must be at least 1"),
    (lambda q: gpu.run("standard", *q, block=(8, 8)), ValueError, "block is an option of flash"),
    (lambda q: gpu.run("standard", *q, causal=True), ValueError, "for flash only"),
    (lambda q: gpu.run("flash", *q, scale="1"), ValueError, "scale must be"),
    (lambda q: gpu.run("flash", *q, backend="emulater"), ValueError,
     "backend must be one of .* \\(did you mean 'emulator'\\?\\)"),
    (lambda q: gpu.run("flash", *q, variant="fa1"), ValueError, "take no options"),
    (lambda q: gpu.run("square_tiling", *q, shedule="outer"), TypeError, "unknown option"),
    (lambda q: gpu.prepare("bogus", *q), ValueError, "no GPU kernels for 'bogus'"),
    (lambda q: gpu.gpu_plan("bogus", 16, 8), ValueError, "no GPU kernels for 'bogus'"),
    (lambda q: gpu.run_backward(*q, q[0], q[0], np.zeros(16), scale=-1.0), ValueError,
     "scale must be"),
    (lambda q: gpu.run_backward(*q, q[0], q[0], np.zeros(16), count_io="yes"), TypeError,
     "count_io must be True or False"),
    (lambda q: gpu.run_backward(*q, q[0], q[0], np.zeros(16), M=1.5), TypeError,
     "M must be an integer"),
    (lambda q: gpu.run_backward(*q, q[0], q[0], np.zeros(16), backend="tpu"), ValueError,
     "backend must be one of"),
])
def test_bad_arguments_are_named_before_the_device_is_looked_for(qkv, monkeypatch, call, error,
                                                                 match):
    """With or without a GPU: a bad name or argument is the error, not GPUUnavailableError."""
    import ioattn.gpu.api

    def no_device(*args, **kwargs):
        raise AssertionError("the device was looked for before the arguments were checked")

    monkeypatch.setattr(ioattn.gpu.api, "get_backend", no_device)
    with pytest.raises(error, match=match):
        call(qkv)
