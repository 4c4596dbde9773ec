# SPDX-License-Identifier: Apache-2.0
"""nvmath_device.common's tensor API without a GPU: the C++ each operation compiles, typing (each
bad argument named), and the kernels of tests/tensor_kernels.py linked to sm_90 cubins."""

from __future__ import annotations

import os
import pickle

import numpy as np
import pytest
from numba import cuda, types
from numba.core import errors as _core_errors

import nvmath_device
from nvmath_device._build import tensor_codegen
from nvmath_device._tensor_code import TensorOp
from nvmath_device.aot import compile_kernel
from nvmath_device.common import (
    axpby,
    clear,
    copy,
    copy_fragment,
    copy_wait,
    make_fragment_like,
    make_tensor,
)
from nvmath_device.cublasdx import MAX_ALIGNMENT, SharedStorageCalc
from tests import tensor_kernels as tk

try:
    from numba.cuda.core import errors as _cuda_errors

    TypingError = (_core_errors.TypingError, _cuda_errors.TypingError)
except ImportError:  # pragma: no cover
    TypingError = _core_errors.TypingError

MM = tk.descriptor()  # 64 x 64 x 32, f16 f16 f32, col/row/row, 128 threads
A_G, B_G, C_G = MM.get_layout_gmem_a(), MM.get_layout_gmem_b(), MM.get_layout_gmem_c()
A_S, B_S = MM.suggest_layout_smem_a(), MM.suggest_layout_smem_b()
C_R = MM.suggest_layout_rmem_c()
ARGS = tk.argtypes(MM)


# ---------------------------------------------------------------------------- host side
def test_functions_outside_kernels_say_where_they_run():
    for fn, args in ((make_tensor, (np.zeros(4), A_G)), (copy, (1, 2)), (copy_fragment, (1, 2)), (copy_wait, ()),
                     (clear, (1,)), (axpby, (1, 2, 3, 4)), (make_fragment_like, (1, np.float32))):
        with pytest.raises(RuntimeError, match=rf"nvmath_device.common.{fn.__name__} runs inside @cuda.jit kernels"):
            fn(*args)
    p = MM.suggest_partitioner()
    with pytest.raises(RuntimeError, match=r"Partitioner.map_fragment_index\(\) runs inside @cuda.jit kernels"):
        p.map_fragment_index(0)


def test_partitioners_are_values_with_their_fragment_layout():
    p, q = MM.suggest_partitioner(), MM.get_partitioner()
    assert p == MM.suggest_partitioner() and hash(p) == hash(MM.suggest_partitioner()) and p != q
    assert p.layout == C_R and q.layout == MM.get_layout_rmem_c()
    assert pickle.loads(pickle.dumps(p)) == p
    acc = MM.get_accumulator()
    assert isinstance(acc, nvmath_device.Accumulator) and acc != q  # same layout, other kind
    with pytest.raises(AttributeError, match="immutable"):
        p._suggested = False


def test_layout_alignment_is_the_operands():
    assert (A_G.alignment, B_S.alignment, C_R.alignment) == tuple(MM.alignment)
    assert MAX_ALIGNMENT == 16 and nvmath_device.MAX_ALIGNMENT == 16


def test_shared_storage_calc_adds_aligned_buffers():
    calc = SharedStorageCalc()
    calc.add(16, 2, A_S)           # 4096 half -> 8192... (A_S.cosize elements of 2 bytes)
    calc.add(16, 2, B_S.cosize)
    calc.add(8, 3)
    assert calc.get() == 2 * A_S.cosize + 2 * B_S.cosize + 3
    calc.add(16, 1)
    assert calc.get() == (2 * A_S.cosize + 2 * B_S.cosize + 3 + 15) // 16 * 16 + 1
    with pytest.raises(ValueError, match="alignment must be a power of 2"):
        calc.add(12, 4)
    with pytest.raises(TypeError, match=r"takes \(alignment, nbytes\)"):
        calc.add(16)
    assert MM.get_shared_storage_size_ab(A_S, B_S) == 2 * A_S.cosize + 2 * B_S.cosize


# ---------------------------------------------------------------------------- the C++ of each operation
def test_each_operation_renders_cublasdx_calls_on_the_descriptors_layouts():
    copy_src = tensor_codegen.render_tensor_source(
        MM, "copy", ((A_G.name, A_G.leading_dimension, "float16"), (A_S.name, None, "float16")))
    assert f"MM::get_layout_gmem_a(cute::Int<{A_G.leading_dimension}>{{}})" in copy_src
    assert "MM::suggest_layout_smem_a()" in copy_src
    assert "cublasdx::copy<MM, cublasdx::alignment_of<MM>::a>(ts, td)" in copy_src
    assert "reinterpret_cast<const __half*>(s)" in copy_src
    frag = tensor_codegen.render_tensor_source(
        MM, "copy_fragment", ((C_R.name, None, "float64"), (C_G.name, C_G.leading_dimension, "float64")), 16)
    assert "cublasdx::copy_fragment<16>(ts, td, nmdx_part<LS>())" in frag
    assert "cute::make_rmem_ptr(reinterpret_cast<const double*>(s))" in frag
    ex = tensor_codegen.render_tensor_source(
        MM, "execute_rmem", ((A_S.name, None, "float16"), (B_S.name, None, "float16"), (C_R.name, None, "float32")))
    assert "MM().execute(ta, tb, tc);" in ex
    part = tensor_codegen.render_tensor_source(MM, "partitioner", (("get_layout_rmem_c", None, "float32"),))
    for fn in ("_active", "_predicated", "_map", "_in_bounds"):
        assert fn + "(void*" in part
    assert "nmdx_part<LG>().map_fragment_index" in part
    with pytest.raises(ValueError, match="copy takes 2 tensor"):
        tensor_codegen.render_tensor_source(MM, "copy", ())
    with pytest.raises(ValueError, match="kind must be one of"):
        tensor_codegen.render_tensor_source(MM, "gemm", ())


def test_tensor_ops_are_hashable_picklable_and_named_by_what_they_do():
    t = ((A_G.name, A_G.leading_dimension, "float16"), (A_S.name, None, "float16"))
    op = TensorOp(MM, "copy", t)
    assert op == TensorOp(MM, "copy", [list(x) for x in t]) and hash(op) == hash(TensorOp(MM, "copy", t))
    assert op != TensorOp(MM, "copy", t, alignment=16)
    assert pickle.loads(pickle.dumps(op)) == op
    assert op.symbol == TensorOp(MM, "copy", t).symbol != TensorOp(MM, "copy", t, 16).symbol
    assert op.symbol.startswith("nvmathdx_tensor_")


# ---------------------------------------------------------------------------- typing errors
def _kernel(body):
    ns = {"cuda": cuda, "np": np, "MM": MM, "make_tensor": make_tensor, "copy": copy,
          "copy_fragment": copy_fragment, "copy_wait": copy_wait, "clear": clear, "axpby": axpby,
          "make_fragment_like": make_fragment_like, "A_S": A_S, "B_S": B_S, "C_R": C_R,
          "ACC": MM.get_accumulator()}
    src = "def k(alpha, a, b, beta, c, out):\n" + "".join(f"    {line}\n" for line in body.splitlines())
    exec(src, ns)
    return ns["k"]


SMEM = "sm = cuda.shared.array(4096, dtype=np.float16)\n"
FRAG = "fr = make_tensor(cuda.local.array(C_R.cosize, dtype=np.float32), C_R)\n"


@pytest.mark.parametrize(
    "body,match",
    [
        ("t = make_tensor(a, 3)", r"make_tensor: layout \(2nd argument\) must be a Layout"),
        ("t = make_tensor(alpha, MM.get_layout_gmem_a())", r"make_tensor: array \(1st argument\) must be an array"),
        ("t = make_tensor(c, MM.get_layout_gmem_a())",
         r"A is col_major, so its 2-D global array must be F \(Fortran\)-contiguous, got a C-contiguous"),
        ("t = make_tensor(cuda.local.array((4, 4), dtype=np.float32), C_R)",
         r"a register \(local\)-memory buffer must be a 1-D array"),
        ("t = make_tensor(cuda.local.array(64, dtype=np.complex64), C_R)", "holds complex64 but C of this GEMM is real"),
        (SMEM + "copy(make_tensor(a, MM.get_layout_gmem_a()), make_tensor(a, MM.get_layout_gmem_a()))",
         "copies one operand between global and shared memory"),
        (SMEM + "copy(make_tensor(b, MM.get_layout_gmem_b()), make_tensor(sm, A_S))",
         "src and dst must be layouts of the same operand"),
        (SMEM + "copy(make_tensor(a, MM.get_layout_gmem_a()), make_tensor(sm, A_S), alignment=3)",
         r"alignment must be one of \(1, 2, 4, 8, 16\) bytes"),
        (SMEM + "n = a.shape[0]\ncopy(make_tensor(a, MM.get_layout_gmem_a()), make_tensor(sm, A_S), alignment=n)",
         "alignment must be a compile-time integer constant"),
        (FRAG + "copy_fragment(fr, make_tensor(a, MM.get_layout_gmem_a()))", "the memory tensor must be a C tensor"),
        (FRAG + "copy_fragment(fr, fr)", "copies between a register fragment and a C tensor"),
        (FRAG + "copy_fragment(fr, make_tensor(out, MM.get_layout_gmem_c()))" + "\nclear(make_tensor(a, MM.get_layout_gmem_a()))",
         "clear: tensor must be a register-memory tensor"),
        (SMEM + FRAG + "MM.execute(make_tensor(sm, B_S), make_tensor(sm, B_S), fr)",
         r"a \(1st argument\) must be a shared-memory tensor of A"),
        (SMEM + "MM.execute(make_tensor(sm, A_S), make_tensor(sm, B_S), make_tensor(c, MM.get_layout_gmem_c()))",
         r"c \(3rd argument\) must be a register-memory tensor"),
        (SMEM + "t = make_tensor(sm, A_S)\nx = t[0]", "is opaque"),
        (FRAG + "axpby(1j, fr, 1.0, fr)", r"alpha is complex \(complex128\) but the fragment holds float32"),
        (FRAG + "g = make_fragment_like(fr, 3)", "dtype must be a NumPy scalar type"),
        ("acc = ACC\nx = acc.get_results()", "an accumulator holds registers of the thread, so make it inside the kernel"),
        ("acc = MM.get_accumulator()\nx, y = acc.map_fragment_index(1.5)", r"map_fragment_index\(index\) takes one integer"),
        ("acc = MM.get_accumulator()\nx = acc.make_partition_and_copy(make_tensor(a, MM.get_layout_gmem_a()))",
         "tensor must be a C tensor of the same Matmul"),
        (FRAG + "p = MM.suggest_partitioner().partition_like_C(fr)",
         "partition_like_C: gmem_c must be a global-memory tensor"),
    ],
)
def test_bad_tensor_use_is_a_typing_error_naming_it(body, match):
    with pytest.raises(TypingError, match=match):
        compile_kernel(_kernel(body), ARGS, sm=90)


# ---------------------------------------------------------------------------- whole kernels, linked for sm_90
@pytest.mark.parametrize("name", list(tk.KERNELS))
def test_tensor_kernels_link_for_sm90(name):
    c = np.float64 if name == "fragment_like" else None
    k = compile_kernel(tk.KERNELS[name](MM), tk.argtypes(MM, c), sm=90)
    assert k.cubin[:4] == b"\x7fELF"
    assert any(s.startswith("nvmathdx_tensor_") for s in k.linked)


# ---------------------------------------------------------------------------- the simulator's layouts
def test_swizzle_evaluation_matches_cute_known_answers():
    from nvmath_device._build.gemm_sim_layouts import evaluate

    # Swizzle<2, 3, 3>: bits 6-7 of the offset flip bits 3-4 (CuTe: x ^ ((x & (3 << 6)) >> 3))
    st = {"swizzle": [2, 3, 3], "offset": 0, "mode0": ([256], [1]), "mode1": ([1], [0]), "rows": 256, "cols": 1}
    off = evaluate(st)[:, 0]
    assert off[64] == 72 and off[200] == 200 ^ ((200 & 192) >> 3) and off[7] == 7
    # a hierarchical mode splits its index colexicographically: (4, 8):(64, 256) -> r % 4 * 64 + r // 4 * 256
    st = {"swizzle": None, "offset": 0, "mode0": ([4, 8], [64, 256]), "mode1": ([64], [1]), "rows": 32, "cols": 64}
    off = evaluate(st)
    assert off[5, 3] == (5 % 4) * 64 + (5 // 4) * 256 + 3


def test_simulator_layouts_come_from_compiled_cublasdx_and_are_checked():
    from nvmath_device._build import gemm_sim_layouts as gl
    from nvmath_device._build.toolchain import read_u32_arrays
    from nvmath_device._errors import CompileError

    structs = gl.layout_structures(MM)
    assert structs["suggest_layout_smem_a"]["swizzle"] is not None  # sm_90 fp16: a swizzled tile
    for name in gl.SIM_LAYOUTS:
        lay = getattr(MM, name)()
        off = gl.layout_offsets(MM, name)
        assert off.shape == ({"a": (MM.m, MM.k), "b": (MM.k, MM.n), "c": (MM.m, MM.n)}[lay.operand])
        assert off.max() + 1 == lay.cosize and len(np.unique(off)) == off.size
    # a global layout with another leading dimension: the same map with that stride
    ld = MM.get_layout_gmem_a().leading_dimension + 8
    assert gl.layout_offsets(MM, "get_layout_gmem_a", ld)[3, 2] == 3 + 2 * ld  # A is col_major
    # the check can fail: one compiled sample changed -> the evaluation no longer agrees
    ptx = gl._compile(gl.render_layouts_source(MM), MM.sm, "ptx", "check.cu")
    arrays = read_u32_arrays(ptx, set(gl._names(MM).values()))
    assert gl._assemble(MM, arrays)["suggest_layout_smem_a"] == structs["suggest_layout_smem_a"]
    sym = gl._names(MM)["suggest_layout_smem_a"]
    arrays[sym] = list(arrays[sym])
    arrays[sym][-1] ^= 8
    with pytest.raises(CompileError, match="disagrees with cuBLASDx's L"):
        gl._assemble(MM, arrays)


def test_tensor_units_build_in_child_interpreters(tmp_path, monkeypatch):
    """build_tensor_ops (run while a tensor-API kernel links, on machines with cores to spare)
    compiles pending units in fresh interpreters into the disk cache: the parent compiles nothing."""
    from nvmath_device._build import cache as dcache
    from nvmath_device._build import parallel, toolchain

    monkeypatch.setenv("NUMBA_MATHDX_CACHE_DIR", str(tmp_path))
    monkeypatch.setattr(dcache, "_memory", {})  # earlier tests of this process may hold these units in memory
    ops = [TensorOp(MM, "partitioner", ((name, None, "float32"),))
           for name in ("get_layout_rmem_c", "suggest_layout_rmem_c")]
    keys = [tensor_codegen.tensor_key(op.mm, op.kind, op.tensors, op.alignment) for op in ops]
    on_disk = [dcache._path(str(tmp_path), k) for k in keys]
    assert not any(os.path.exists(p) for p in on_disk)
    before = toolchain.stats["nvrtc_compiles"]
    parallel.build_tensor_ops(ops, workers=2)
    assert all(os.path.exists(p) for p in on_disk)
    assert all(dcache.get(k) is not None for k in keys)
    assert toolchain.stats["nvrtc_compiles"] == before


def test_a_captured_partitioner_is_a_compile_time_value():
    P = MM.suggest_partitioner()

    def k(out):
        t = cuda.threadIdx.x
        out[t] = 1 if P.is_thread_active() else 0

    assert compile_kernel(k, (types.int32[::1],), sm=90).cubin[:4] == b"\x7fELF"
