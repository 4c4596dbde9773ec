# SPDX-License-Identifier: Apache-2.0
"""cuBLASDx layouts of Matmul (nvmath_device._layouts.Layout): values read from compiled cuBLASDx,
checked against an independent NVRTC unit and cuBLASDx's formulas; Layouts in kernels linked for
sm_90 without a GPU; bad leading dimensions refused before any compiler runs."""

from __future__ import annotations

import copy
import pickle

import numpy as np
import pytest
from numba import cuda, types
from numba.core import errors as _core_errors
from numba.cuda.typing.typeof import typeof

from nvmath_device import Matmul
from nvmath_device._build import gemm_codegen
from nvmath_device._build.toolchain import read_u32_arrays
from nvmath_device._layouts import LAYOUT_NAMES, Layout
from nvmath_device._numba.layouts_numba import LayoutType
from nvmath_device.aot import compile_kernel

# the descriptor of tests/cpu/test_gemm_numba.py (its LTO-IR is likely cached already)
MM = Matmul(size=(32, 32, 32), precision=np.float32, arrangement=("row_major", "col_major", "col_major"), sm=90)
# nvmath-python's tensor example: mixed precision, a swizzled suggested shared layout on sm_90
TM = Matmul(size=(64, 32, 32), precision=(np.float16, np.float16, np.float32),
            arrangement=("col_major", "row_major", "row_major"), block_size=128, sm=90)
# padded ("suggested") leading dimensions: the shared layouts' cosize exceeds their size
PM = Matmul(size=(32, 16, 32), precision=np.float32, arrangement=("col_major", "col_major", "row_major"),
            leading_dimension="suggested", block_dim=64, sm=90)

# numba-cuda 0.30 raises its own TypingError for what its typing finds, ours for what we find
try:
    from numba.cuda.core import errors as _cuda_errors

    TypingError = (_core_errors.TypingError, _cuda_errors.TypingError)
except ImportError:  # pragma: no cover - a numba-cuda without its own errors module
    TypingError = _core_errors.TypingError

METHODS = tuple(LAYOUT_NAMES)
SHAPES = {"a": lambda d: (d.m, d.k), "b": lambda d: (d.k, d.n), "c": lambda d: (d.m, d.n)}


def _independent_values(mm):
    """size and cosize of every layout of ``mm``, from a separate NVRTC unit written here: the
    commondx ``cublasdx::size`` / ``cublasdx::cosize`` of the pointer layouts, and for the register
    C, of the partitioners' accumulator fragment tensors (not the codegen's expressions)."""
    desc = gemm_codegen._description(mm, tuple(mm.block_dim))
    vals = []
    for name in METHODS:
        memory, op, suggested = LAYOUT_NAMES[name]
        if memory == "rmem":
            p = "suggest_partitioner" if suggested else "get_partitioner"
            frag = f"cute::declval<decltype(X::{p}())>().make_accumulator_fragment().layout()"
            vals += [f"(unsigned)decltype(cublasdx::size({frag}))::value",
                     f"(unsigned)decltype(cublasdx::cosize({frag}))::value"]
        else:
            vals += [f"(unsigned)cublasdx::size(X::{name}())", f"(unsigned)cublasdx::cosize(X::{name}())"]
    src = (f"#include <cublasdx.hpp>\nusing X = decltype({desc});\n"
           f'extern "C" __device__ const unsigned layout_check[] = {{{", ".join(vals)}}};\n')
    ptx = gemm_codegen._compile(src, mm.sm, "ptx", "layout_check.cu")
    got = read_u32_arrays(ptx, {"layout_check"})["layout_check"]
    return {name: (got[2 * i], got[2 * i + 1]) for i, name in enumerate(METHODS)}


@pytest.mark.parametrize("mm", [MM, TM, PM], ids=["f32-rcc", "f16f16f32-crr-swizzle", "f32-padded"])
def test_values_match_an_independent_compile(mm):
    ref = _independent_values(mm)
    for name in METHODS:
        lay = getattr(mm, name)()
        assert (lay.size, lay.cosize) == ref[name], name


@pytest.mark.parametrize("mm", [MM, TM, PM], ids=["f32-rcc", "f16f16f32-crr-swizzle", "f32-padded"])
def test_values_follow_cublasdx_formulas(mm):
    for op in "abc":
        rows, cols = SHAPES[op](mm)
        i = "abc".index(op)
        col_major = mm.arrangement[i] == "col_major"
        inner, outer = (rows, cols) if col_major else (cols, rows)
        g = getattr(mm, f"get_layout_gmem_{op}")()
        assert g.size == rows * cols and g.leading_dimension == inner
        assert g.cosize == g.leading_dimension * (outer - 1) + inner
        s = getattr(mm, f"get_layout_smem_{op}")()
        assert s.size == rows * cols
        assert s.cosize == getattr(mm, f"{op}_size")  # cuBLASDx's a_size: ld * (outer - 1) + inner
        assert s.cosize == mm.leading_dimension[i] * (outer - 1) + inner
        sg = getattr(mm, f"suggest_layout_smem_{op}")()
        assert sg.size == rows * cols and sg.cosize >= rows * cols
    assert mm.get_layout_rmem_c().size == mm.accumulator_size
    threads = mm.max_threads_per_block
    for lay in (mm.get_layout_rmem_c(), mm.suggest_layout_rmem_c()):
        assert lay.cosize >= lay.size >= 1
        assert lay.size * threads >= mm.m * mm.n


def test_padded_shared_layouts_are_larger_than_their_size():
    assert PM.lda > PM.m  # cuBLASDx padded it
    lay = PM.get_layout_smem_a()
    assert lay.cosize == PM.lda * (PM.k - 1) + PM.m > lay.size == PM.m * PM.k


@pytest.mark.parametrize("op,ld", [("a", 40), ("b", 33), ("c", 100)])
def test_gmem_layout_with_a_leading_dimension(op, ld):
    lay = getattr(MM, f"get_layout_gmem_{op}")(ld)
    rows, cols = SHAPES[op](MM)
    col_major = MM.arrangement["abc".index(op)] == "col_major"
    inner, outer = (rows, cols) if col_major else (cols, rows)
    assert lay.leading_dimension == ld and lay.size == rows * cols
    assert lay.cosize == ld * (outer - 1) + inner
    # numpy integers too; the tight one equals the default (read from the traits)
    assert getattr(MM, f"get_layout_gmem_{op}")(np.int64(ld)) == lay
    assert getattr(MM, f"get_layout_gmem_{op}")(inner) == getattr(MM, f"get_layout_gmem_{op}")()


def test_default_gmem_layout_equals_its_own_compile():
    # the default global layout comes from the traits; the same ld through the separate unit
    assert gemm_codegen.gemm_gmem_layout_sizes(TM, "b", TM.n) == (
        TM.get_layout_gmem_b().size, TM.get_layout_gmem_b().cosize)


def test_layout_is_immutable_hashable_picklable_and_knows_its_origin():
    for name in METHODS:
        lay = getattr(MM, name)()
        memory, op, suggested = LAYOUT_NAMES[name]
        assert isinstance(lay, Layout)
        assert (lay.descriptor, lay.name, lay.memory, lay.operand, lay.suggested) == (MM, name, memory, op, suggested)
        assert lay == getattr(MM, name)() and hash(lay) == hash(getattr(MM, name)())
        assert pickle.loads(pickle.dumps(lay)) == lay
        assert copy.deepcopy(lay) is lay
        assert name in repr(lay) and f"size={lay.size}" in repr(lay) and f"cosize={lay.cosize}" in repr(lay)
        for attr in ("size", "cosize", "_size", "name"):
            with pytest.raises(AttributeError, match="immutable|can't set|has no setter|object has no"):
                setattr(lay, attr, 1)
        with pytest.raises(AttributeError):
            del lay._cosize
        if memory != "gmem":
            assert lay.leading_dimension is None
    # different descriptors, operands, kinds or leading dimensions: different layouts
    assert MM.get_layout_smem_a() != TM.get_layout_smem_a()
    assert MM.get_layout_smem_a() != MM.get_layout_smem_b()
    assert MM.get_layout_smem_a() != MM.suggest_layout_smem_a()
    assert MM.get_layout_gmem_a() != MM.get_layout_gmem_a(64)
    assert len({getattr(MM, n)() for n in METHODS}) == len(METHODS)


def test_shared_storage_size_from_layouts():
    a, b, c = TM.suggest_layout_smem_a(), TM.suggest_layout_smem_b(), TM.suggest_layout_smem_c()
    isz = [np.dtype(t).itemsize for t in (TM.a_value_type, TM.b_value_type, TM.c_value_type)]
    ab = -(-a.cosize * isz[0] // TM.alignment.b) * TM.alignment.b + b.cosize * isz[1]
    assert TM.get_shared_storage_size_ab(a, b) == ab
    assert TM.get_shared_storage_size(a, b, c) == -(-ab // TM.alignment.c) * TM.alignment.c + c.cosize * isz[2]
    # the descriptor's own layouts give the descriptor's own sizes
    assert PM.get_shared_storage_size(PM.get_layout_smem_a(), PM.get_layout_smem_b(),
                                      PM.get_layout_smem_c()) == PM.shared_memory_size
    assert PM.get_shared_storage_size_ab(PM.get_layout_smem_a(), PM.get_layout_smem_b()) == PM.shared_memory_size_ab
    with pytest.raises(ValueError, match="layout_b must be a shared-memory layout of B"):
        TM.get_shared_storage_size_ab(a, TM.get_layout_gmem_b())
    with pytest.raises(ValueError, match="layout_a must be a shared-memory layout of A"):
        TM.get_shared_storage_size_ab(b, a)
    with pytest.raises(TypeError, match="layout_b must be a Layout"):
        TM.get_shared_storage_size_ab(a, 32)


# ---------------------------------------------------------------------------- bad input
# a descriptor no other test uses: any compile would reach the patched compiler below
FRESH = Matmul(size=(24, 8, 40), precision=np.float64, arrangement=("row_major", "col_major", "row_major"),
               block_dim=32, sm=90)


@pytest.mark.parametrize(
    "method,ld,exc,match",
    [
        ("get_layout_gmem_a", "40", TypeError, r"get_layout_gmem_a: leading_dimension must be None or an int \(at least 40, the columns of A\)"),
        ("get_layout_gmem_a", 40.0, TypeError, r"leading_dimension must be None or an int"),
        ("get_layout_gmem_b", True, TypeError, r"get_layout_gmem_b: leading_dimension must be None or an int \(at least 40, the rows of B\)"),
        ("get_layout_gmem_c", (8,), TypeError, r"get_layout_gmem_c: leading_dimension must be None or an int"),
        ("get_layout_gmem_a", 39, ValueError, r"get_layout_gmem_a: leading_dimension=39 is smaller than the 40 columns of A \(24 x 40, row_major\); it must be an int >= 40"),
        ("get_layout_gmem_b", 0, ValueError, r"leading_dimension=0 is smaller than the 40 rows of B"),
        ("get_layout_gmem_c", -8, ValueError, r"get_layout_gmem_c: leading_dimension=-8 is smaller than the 8 columns of C"),
        ("get_layout_gmem_a", 2**40, ValueError, r"leading_dimension=1099511627776 makes A's layout span \d+ elements; at most 2147483647"),
    ],
)
def test_bad_leading_dimension_is_named_before_any_compile(monkeypatch, method, ld, exc, match):
    def no_compiler(*a, **k):
        raise AssertionError("a compiler ran for a bad leading_dimension")

    monkeypatch.setattr(gemm_codegen, "_compile", no_compiler)
    monkeypatch.setattr(gemm_codegen, "compile_source", no_compiler)
    with pytest.raises(exc, match=match):
        getattr(FRESH, method)(ld)


def test_shared_and_register_layouts_take_no_arguments():
    for name in METHODS:
        if not name.startswith("get_layout_gmem"):
            with pytest.raises(TypeError):
                getattr(MM, name)(32)


# ---------------------------------------------------------------------------- in kernels
f2 = types.float32[:, :]
A_LAYOUT = MM.get_layout_smem_a()  # a global constant
B_LAYOUT = MM.get_layout_smem_b()


def test_layouts_as_constants_in_a_kernel_link_for_sm90():
    c_layout = MM.get_layout_rmem_c()  # a closure constant
    g_layout = MM.get_layout_gmem_c(40)

    def k(A, B, C, out):
        smem = cuda.shared.array(0, dtype=np.float32)
        sa, rest = smem[:A_LAYOUT.cosize], smem[A_LAYOUT.cosize:]
        sb = rest[:B_LAYOUT.cosize]
        MM.load_a(A, sa)
        MM.load_b(B, sb)
        cuda.syncthreads()
        acc = cuda.local.array(c_layout.cosize, dtype=MM.c_value_type)
        rows = cuda.local.array(shape=(c_layout.size,), dtype=np.int32)
        cols = cuda.local.array(c_layout.size, dtype=np.int32)
        for i in range(c_layout.size):
            acc[i] = 0
        MM.execute(sa, sb, acc)
        MM.fragment_coordinates(rows, cols)
        for i in range(c_layout.size):
            if rows[i] >= 0:
                C[rows[i], cols[i]] = acc[i]
        tmp = cuda.local.array(MM.suggest_layout_rmem_c().cosize, dtype=np.float32)  # made in the kernel
        tmp[0] = MM.get_layout_gmem_a().cosize + MM.get_layout_gmem_a(40).cosize
        out[0] = tmp[0] + g_layout.cosize + MM.suggest_layout_smem_b().size

    ck = compile_kernel(k, (f2, f2, f2, types.float32[::1]), sm=90)
    assert ck.cubin[:4] == b"\x7fELF"
    assert f"{MM.symbol}.ltoir" in ck.linked


def test_layout_attributes_are_integer_literals_in_kernels():
    lay = TM.suggest_layout_rmem_c()
    ty = typeof(lay)
    assert isinstance(ty, LayoutType) and ty == typeof(TM.suggest_layout_rmem_c())
    assert ty != typeof(TM.get_layout_gmem_c())

    def k(out):
        buf = cuda.local.array(lay.cosize, dtype=np.int32)  # a local array needs a constant shape
        for i in range(lay.cosize):
            buf[i] = i
        out[0] = buf[lay.cosize - 1] + lay.size

    assert compile_kernel(k, (types.int32[::1],), sm=90).cubin[:4] == b"\x7fELF"


@pytest.mark.parametrize(
    "body,match",
    [
        ("n = out.shape[0]\n    out[0] = MM.get_layout_gmem_a(n).cosize", "leading_dimension must be a compile-time integer constant"),
        ("out[0] = MM.get_layout_gmem_a(3).cosize", r"leading_dimension=3 is smaller than the 32 columns of A"),
        ("out[0] = MM.get_layout_smem_a(32).cosize", r"get_layout_smem_a\(\) takes no arguments"),
        ("out[0] = A_LAYOUT.leading_dimension", "Unknown attribute 'leading_dimension' of type Layout"),
    ],
)
def test_bad_layout_use_in_kernels_is_a_typing_error(body, match):
    ns = {"cuda": cuda, "np": np, "MM": MM, "A_LAYOUT": A_LAYOUT}
    exec(f"def k(out):\n    {body}\n", ns)
    with pytest.raises(TypingError, match=match):
        compile_kernel(ns["k"], (types.float32[::1],), sm=90)


def test_fragment_coordinates_table_covers_c_once():
    """The host table of every thread's fragment coordinates (no GPU): each element of C is one
    thread's one value, for a tensor-core (float64) and an FFMA (float32) descriptor; the fp64
    DMMA fragments hold neighbours in a row, the float32 ones here do not."""
    from kernels.gemm import _pair_stride

    for precision, size, threads, stride in ((np.float64, (64, 64, 16), 256, 4), (np.float32, (8, 16, 4), 64, None)):
        mm = Matmul(size=size, precision=precision, arrangement=("row_major",) * 3, block_dim=threads,
                    alignment=(16, 16, 16), leading_dimension="suggested", sm=90)
        table = mm.fragment_coordinates_table()
        assert table.shape == (threads, mm.accumulator_size, 2) and table.dtype == np.int32
        assert not table.flags.writeable
        used = table[(table[..., 0] >= 0)]
        m, n, _ = size
        assert len(used) == m * n
        assert len({(int(r), int(c)) for r, c in used}) == m * n  # every element exactly once
        assert used[:, 0].max() == m - 1 and used[:, 1].max() == n - 1
        assert _pair_stride(mm) == stride
