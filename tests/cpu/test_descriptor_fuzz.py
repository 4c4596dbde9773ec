# SPDX-License-Identifier: Apache-2.0
"""Bad-input fuzzing of the descriptors' constructors (hypothesis, deterministic).

A known-good FFT / Matmul gets one or two of its arguments replaced by a value from a pool of
valid alternatives and garbage (0, negative, huge, non-int, bool, float, str, wrong-length
tuples, bad dict keys...). Every failure must be ValueError, TypeError or NotImplementedError
whose message names one of the replaced arguments; a descriptor that is accepted must hash.
NVRTC, nvJitLink and child compiles raise a sentinel throughout: validation never compiles.
"""

from __future__ import annotations

import re

import numpy as np
import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from nvmath_device import FFT, Matmul
from nvmath_device._build import toolchain

SETTINGS = settings(max_examples=2500, derandomize=True, deadline=None, database=None,
                    suppress_health_check=[HealthCheck.too_slow])
ALLOWED = (ValueError, TypeError, NotImplementedError)
HUGE = 10**5000  # str() of it raises ValueError: messages must not format it in full


class CompilerCalled(BaseException):
    """Raised by every compiler entry point during the fuzz (BaseException: nothing swallows it)."""


@pytest.fixture(scope="module", autouse=True)
def _no_compiler():
    from cuda.bindings import nvjitlink, nvrtc

    def forbidden(*args, **kwargs):
        raise CompilerCalled("a descriptor constructor ran the compiler")

    with pytest.MonkeyPatch.context() as mp:
        for mod, names in ((nvrtc, ("nvrtcCreateProgram", "nvrtcCompileProgram")),
                           (nvjitlink, ("create",)),
                           (toolchain, ("compile_source", "_compile_here", "compile_source_in_child",
                                        "_run_child", "link_cubin"))):
            for name in names:
                mp.setattr(mod, name, forbidden)
        yield


class Opaque:
    def __repr__(self):
        return "Opaque()"


GARBAGE = st.one_of(
    st.sampled_from([None, True, False, 0, -1, -(2**63), 2**64, HUGE, -HUGE, 1.5, float("nan"),
                     float("inf"), 0j, "", "x", "suggested", b"c2c", (), [], {}, Opaque(),
                     np.bool_(True), np.int64(-3), np.float32(8.0), np.array([1, 2]), np.array(16),
                     np.complex64, np.int32, slice(1)]),
    st.integers(), st.floats(allow_nan=False), st.text(max_size=6),
    st.lists(st.integers(-2, 70), max_size=4),
)


def _check(ctor, base, changes):
    kw = {**base, **changes}
    try:
        d = ctor(**kw)
    except ALLOWED as e:
        msg = str(e)
        assert any(re.search(rf"\b{name}\b", msg) for name in changes), (
            f"{type(e).__name__} names none of the changed arguments {sorted(changes)}: {msg}"
        )
    except CompilerCalled:
        raise AssertionError(f"{ctor.__name__}(**{changes!r}) ran the compiler") from None
    except Exception as e:
        raise AssertionError(f"{ctor.__name__}(**{changes!r}) raised {type(e).__name__}: {e}") from e
    else:
        assert d == ctor(**kw) and hash(d) == hash(ctor(**kw))


# ------------------------------------------------------------------------------------ FFT
FFT_BASE = dict(size=64, precision=np.float32, fft_type="c2c", direction="forward",
                elements_per_thread="suggested", ffts_per_block="suggested", execution="Block",
                sm=90, real_fft_options=None)
SM = st.sampled_from([90, 80, 70, 75, 86, 89, 100, 120, (9, 0), (8, 0), "sm_90", "sm_90a", "compute_80",
                      " SM_80 ", "91", 91, 0, -90, 9.0, (9,), (9, 0, 0), ("9", "0"), "sm_xx", "sm_"])
INTS = st.one_of(st.integers(-3, 70), st.sampled_from([2**31, HUGE, np.int64(8), np.int32(2)]))
OPTION = st.sampled_from(["natural", "packed", "full", "normal", "folded", "bad", None, 1, ["natural"]])
FFT_VALUES = {
    "size": st.one_of(st.integers(-3, 5000), st.sampled_from([2**15, 2**16, 1 << 20, np.int64(128),
                                                             np.uint8(16), 64.0, "64", True])),
    "precision": st.sampled_from([np.float16, np.float32, np.float64, "float32", "float64", "f4", "<f8",
                                  ">f4", np.dtype("f8"), np.complex64, np.int32, "bfloat16", "fp32",
                                  "float", float, "f4,f4", (np.float32, np.float32), [np.float32]]),
    "fft_type": st.sampled_from(["c2c", "r2c", "c2r", "C2C", "r2r", " c2c"]),
    "direction": st.sampled_from(["forward", "inverse", None, "Forward", "backward"]),
    "elements_per_thread": INTS,
    "ffts_per_block": INTS,
    "execution": st.sampled_from(["Block", "Thread", "block", "Warp"]),
    "sm": SM,
    "real_fft_options": st.one_of(
        st.dictionaries(st.sampled_from(["complex_layout", "real_mode", "layout", 1, None, ("x",)]),
                        OPTION, max_size=3),
        st.sampled_from([None, "natural", [("complex_layout", "full")], 1])),
}


@st.composite
def fft_changes(draw):
    names = draw(st.lists(st.sampled_from(sorted(FFT_VALUES)), min_size=1, max_size=2, unique=True))
    return {n: draw(st.one_of(FFT_VALUES[n], GARBAGE) if draw(st.booleans()) else FFT_VALUES[n])
            for n in names}


@SETTINGS
@given(fft_changes())
def test_fft_constructor_fuzz(changes):
    _check(FFT, FFT_BASE, changes)


# ------------------------------------------------------------------------------------ GEMM
MM_BASE = dict(size=(16, 16, 16), precision=np.float32, data_type="real",
               arrangement=("col_major", "col_major", "col_major"), leading_dimension=None,
               block_dim="suggested", block_size=None, alignment=None, execution="Block", sm=90)
DIM = st.one_of(st.integers(-2, 300), st.sampled_from([0, 4096, 2**40, HUGE, np.int64(32), 16.0, True]))
PREC = st.sampled_from([np.float16, np.float32, np.float64, "float16", "bfloat16", "float32", "f8",
                        np.dtype("f4"), np.complex64, np.int8, "fp32", "half", float])
ARR = st.sampled_from(["row_major", "col_major", "ROW_MAJOR", "row", None])
MM_VALUES = {
    "size": st.one_of(st.tuples(DIM, DIM, DIM), st.lists(DIM, max_size=4),
                      st.lists(DIM, max_size=4).map(tuple), DIM),
    "precision": st.one_of(PREC, st.lists(PREC, min_size=1, max_size=4).map(tuple),
                           st.lists(PREC, min_size=3, max_size=3)),
    "data_type": st.sampled_from(["real", "complex", "Real", "cplx"]),
    "arrangement": st.one_of(ARR, st.lists(ARR, max_size=4).map(tuple), st.lists(ARR, min_size=3, max_size=3)),
    "leading_dimension": st.one_of(st.sampled_from([None, "suggested", "tight"]),
                                   st.lists(DIM, min_size=2, max_size=4).map(tuple)),
    "block_dim": st.one_of(st.sampled_from(["suggested", None, "Suggested"]), DIM,
                           st.lists(st.integers(-1, 1100), max_size=4).map(tuple)),
    "block_size": st.one_of(st.sampled_from([None, "suggested"]), DIM),
    "alignment": st.one_of(st.none(), st.lists(st.sampled_from([0, 1, 2, 3, 4, 8, 16, 32, 16.0, True]),
                                               min_size=2, max_size=4).map(tuple)),
    "execution": st.sampled_from(["Block", "Thread", "block"]),
    "sm": SM,
}


@st.composite
def mm_changes(draw):
    names = draw(st.lists(st.sampled_from(sorted(MM_VALUES)), min_size=1, max_size=2, unique=True))
    return {n: draw(st.one_of(MM_VALUES[n], GARBAGE) if draw(st.booleans()) else MM_VALUES[n])
            for n in names}


@SETTINGS
@given(mm_changes())
def test_matmul_constructor_fuzz(changes):
    _check(Matmul, MM_BASE, changes)


def test_the_sentinel_is_armed():
    """The fuzz would not notice a compile if the patched entry points were not the real ones."""
    from cuda.bindings import nvrtc

    with pytest.raises(CompilerCalled):
        toolchain.compile_source("int x;", 90, "ltoir")
    with pytest.raises(CompilerCalled):
        nvrtc.nvrtcCreateProgram(b"int x;", b"x.cu", 0, [], [])
