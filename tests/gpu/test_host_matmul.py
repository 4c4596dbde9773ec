# SPDX-License-Identifier: Apache-2.0
"""nvmath_host on a GPU, against the CPU reference (nvmath_host.epilogs.reference in float64).

Outputs are poisoned first: the memory pool is filled with NaN bytes (0xFF) and released
before every execute, so an element cuBLASLt does not write shows up as NaN.
"""

import contextlib
import importlib
import pickle
import time
from types import SimpleNamespace

import numpy as np
import pytest

from mathdx_operands import stream_handle
from nvmath_host import (
    Algorithm,
    AlgorithmCapabilities,
    CPUExecutionWarning,
    CublasLtError,
    Matmul,
    MatmulComputeType,
    MatmulEpilog,
    MatmulNumericalImplFlags,
    MatmulOptions,
    MatmulReductionScheme,
    matmul,
    matrix_qualifiers_dtype,
)
from nvmath_host import _cublaslt as lt
from nvmath_host.epilogs import EPILOGS, reference, relu_aux_shape, unpack_relu_mask

pytestmark = pytest.mark.gpu
cp = pytest.importorskip("cupy")
mm_mod = importlib.import_module("nvmath_host._function")  # the plan cache
E = MatmulEpilog
RNG = np.random.default_rng(20261130)
TOL = {
    "float16": 4e-3,
    "bfloat16": 2e-2,
    "float32": 2e-5,
    "float64": 1e-12,
    "complex64": 2e-5,
    "complex128": 1e-12,
}


def poison():
    """Fill (then free) pool memory with 0xFF bytes (NaN for every float type)."""
    x = cp.full((256 << 20,), 0xFF, dtype=cp.uint8)
    del x


def rel_err(got, want):
    got = np.asarray(got, dtype=np.complex128 if np.iscomplexobj(want) else np.float64)
    want = np.asarray(want, dtype=got.dtype)
    assert got.shape == want.shape, (got.shape, want.shape)
    assert not np.isnan(got).any(), "NaN in the result (an element was not written)"
    scale = max(np.abs(want).max(), 1e-30)
    return float(np.abs(got - want).max() / scale)


def host(x):
    if isinstance(x, np.ndarray):
        return x
    if type(x).__module__.startswith("torch"):
        return x.float().cpu().numpy() if str(x.dtype) in ("torch.bfloat16",) else x.cpu().numpy()
    if hasattr(x, "get"):
        return x.get()
    return x.copy_to_host()


def make_inputs(spec, M, N, dtype, order, batch=()):
    """Random epilog inputs for spec in the layout the result order needs: (host, device)."""
    views = {}  # name -> (base array, view function)
    if spec.bias:
        shape = batch + ((1, N) if batch else (N,)) if order == "C" else batch + (M, 1)
        views["bias"] = (RNG.standard_normal(shape).astype(dtype), lambda x: x)
    if spec.gradient == "drelu":
        r, c = relu_aux_shape(M, N, order)
        if order == "C":
            views["relu_aux"] = (RNG.integers(0, 256, batch + (r, c), dtype=np.uint8), lambda x: x)
        else:  # each matrix F-ordered
            base = RNG.integers(0, 256, batch + (c, r), dtype=np.uint8)
            views["relu_aux"] = (base, lambda x: x.swapaxes(-1, -2))
    if spec.gradient == "dgelu":  # leading dimension padded to a multiple of 8
        if order == "C":
            base = RNG.standard_normal(batch + (M, -(-N // 8) * 8)).astype(dtype)
            views["gelu_aux"] = (base, lambda x: x[..., :N])
        else:
            base = RNG.standard_normal(batch + (N, -(-M // 8) * 8)).astype(dtype)
            views["gelu_aux"] = (base, lambda x: x[..., :M].swapaxes(-1, -2))
    host_in = {k: f(base) for k, (base, f) in views.items()}
    dev_in = {k: f(cp.asarray(base)) for k, (base, f) in views.items()}
    return host_in, dev_in


def tol_for(spec, dtype):
    tol = TOL[np.dtype(dtype).name]
    if np.dtype(dtype) == np.float64 and "gelu" in (
        spec.activation,
        spec.gradient and spec.gradient[1:],
    ):
        tol = 1e-9  # measured: cuBLASLt's float64 GELU is accurate to ~3e-10 (relative)
    return tol


def check_outputs(spec, got_d, got_outs, want_d, want_outs, dtype, order, M, N, x_ref=None):
    tol = tol_for(spec, dtype)
    errs = {"d": rel_err(host(got_d), want_d)}
    assert errs["d"] < tol, errs
    for name in spec.outputs:
        g = host(got_outs[name])
        if name == "relu_aux":
            mg = unpack_relu_mask(g, M, N, order)
            mw = unpack_relu_mask(want_outs[name], M, N, order)
            # bits may differ only where the pre-activation is ~0 (rounding)
            bad = (mg != mw) & (np.abs(x_ref) > 10 * tol * np.abs(x_ref).max())
            assert not bad.any(), f"relu_aux: {bad.sum()} bits differ"
        else:
            e = rel_err(g, want_outs[name])
            assert e < tol * (4 if name == "bgrad" else 1), (name, e)


def pre_activation(a, b, c, alpha, beta, inputs):
    x = alpha * np.matmul(a.astype(np.float64), b.astype(np.float64))
    if c is not None:
        x = x + beta * c.astype(np.float64)
    if "bias" in inputs:
        x = x + inputs["bias"].astype(np.float64)
    return x


SHAPES = {"odd": (67, 48, 133), "even": (64, 96, 128)}
LAYOUTS = ["CC", "FC", "CF", "FF"]  # orders of a and b


# every layout at the even shape; C/C and F/F at the odd one
SHAPE_LAYOUTS = [("even", lay) for lay in LAYOUTS] + [("odd", "CC"), ("odd", "FF")]


@pytest.mark.parametrize(
    "shape, layout", SHAPE_LAYOUTS, ids=[f"{lay}-{shp}" for shp, lay in SHAPE_LAYOUTS]
)
@pytest.mark.parametrize("dtype", ["float16", "float32", "float64"])
@pytest.mark.parametrize("epilog", list(E), ids=[e.name for e in E])
def test_epilog_cupy(epilog, dtype, layout, shape):
    M, K, N = SHAPES[shape]
    spec = EPILOGS[epilog]
    a = np.array(RNG.standard_normal((M, K)), dtype=dtype, order=layout[0])
    b = np.array(RNG.standard_normal((K, N)), dtype=dtype, order=layout[1])
    c = RNG.standard_normal((M, N)).astype(dtype)
    if (epilog == E.BGRADA and layout[0] == "C") or (epilog == E.BGRADB and layout[1] == "F"):
        # cuBLASLt runs BGRADA only for a column-major a, BGRADB only for a row-major b
        # (measured: NOT_SUPPORTED otherwise); nvmath_host says so before any CUDA call
        with pytest.raises(ValueError, match="^a: BGRADA needs|^b: BGRADB needs"):
            matmul(cp.asarray(a, order="A"), cp.asarray(b, order="A"), epilog=epilog)
        return
    alpha, beta = 0.5, -0.75
    inputs, dinputs = make_inputs(spec, M, N, dtype, "C")
    want_d, want_outs = reference(
        a,
        b,
        c=c,
        alpha=alpha,
        beta=beta,
        epilog=epilog,
        epilog_inputs=inputs,
        order="C",
        compute_dtype=np.float64,
    )
    da, db, dc = cp.asarray(a, order="A"), cp.asarray(b, order="A"), cp.asarray(c)
    assert da.flags.f_contiguous == (layout[0] == "F")
    poison()
    got = matmul(da, db, dc, alpha=alpha, beta=beta, epilog=epilog, epilog_inputs=dinputs)
    d, outs = got if spec.outputs else (got, {})
    assert isinstance(d, cp.ndarray) and d.dtype == np.dtype(dtype)
    check_outputs(
        spec,
        d,
        outs,
        want_d,
        want_outs,
        dtype,
        "C",
        M,
        N,
        pre_activation(a, b, c, alpha, beta, inputs),
    )


@pytest.mark.parametrize("epilog", list(E), ids=[e.name for e in E])
def test_epilog_f_ordered_result_batched(epilog):
    """A (M, 1)-bias / F-ordered result, batched, with a broadcast b."""
    M, K, N, batch = 72, 40, 56, (3,)
    spec = EPILOGS[epilog]
    dtype = "float32"
    if epilog == E.BGRADA:  # column-major a matrices (cuBLASLt's restriction)
        a_base = RNG.standard_normal(batch + (K, M)).astype(dtype)
        a, da = a_base.swapaxes(-1, -2), cp.asarray(a_base).swapaxes(-1, -2)
    else:
        a = RNG.standard_normal(batch + (M, K)).astype(dtype)
        da = cp.asarray(a)
    if epilog == E.BGRADB:  # row-major b (cuBLASLt's restriction)
        b = RNG.standard_normal((K, N)).astype(dtype)
        db = cp.asarray(b)
    else:
        b = np.asfortranarray(RNG.standard_normal((K, N)).astype(dtype))
        db = cp.asarray(b, order="F")
    inputs, dinputs = make_inputs(spec, M, N, dtype, "F", batch)
    want_d, want_outs = reference(
        a, b, epilog=epilog, epilog_inputs=inputs, order="F", compute_dtype=np.float64
    )
    poison()
    got = matmul(da, db, epilog=epilog, epilog_inputs=dinputs, options={"result_order": "F"})
    d, outs = got if spec.outputs else (got, {})
    assert d.shape == batch + (M, N) and d.strides[-2] == 4  # F-ordered matrices
    check_outputs(
        spec,
        d,
        outs,
        want_d,
        want_outs,
        dtype,
        "F",
        M,
        N,
        pre_activation(a, b, None, 1.0, 0.0, inputs),
    )


def test_forward_backward_chain_on_gpu():
    M, K, N = 96, 64, 80
    a, b = (cp.asarray(RNG.standard_normal(s).astype(np.float32)) for s in ((M, K), (K, N)))
    bias = cp.asarray(RNG.standard_normal(N).astype(np.float32))
    y, aux = matmul(a, b, epilog=E.RELU_AUX_BIAS, epilog_inputs={"bias": bias})
    dy = cp.asarray(RNG.standard_normal((M, K)).astype(np.float32))
    g, o = matmul(dy, b, epilog=E.DRELU_BGRAD, epilog_inputs={"relu_aux": aux["relu_aux"]})
    x = a.get().astype(np.float64) @ b.get() + bias.get()
    want = (dy.get().astype(np.float64) @ b.get()) * (x > 0)
    assert rel_err(g.get(), want) < 1e-4
    assert rel_err(o["bgrad"].get(), want.sum(0)) < 1e-4
    y, aux = matmul(a, b, epilog=E.GELU_AUX_BIAS, epilog_inputs={"bias": bias})
    g = matmul(dy, b, epilog=E.DGELU, epilog_inputs={"gelu_aux": aux["gelu_aux"]})
    from nvmath_host.epilogs import dgelu

    assert rel_err(g.get(), (dy.get().astype(np.float64) @ b.get()) * dgelu(x)) < 1e-4


@pytest.mark.parametrize("dtype", ["complex64", "complex128"])
def test_complex(dtype):
    M, K, N = 33, 20, 41
    a = (RNG.standard_normal((M, K)) + 1j * RNG.standard_normal((M, K))).astype(dtype)
    b = (RNG.standard_normal((K, N)) + 1j * RNG.standard_normal((K, N))).astype(dtype)
    c = (RNG.standard_normal((M, N)) + 1j * RNG.standard_normal((M, N))).astype(dtype)
    poison()
    d = matmul(
        cp.asarray(a),
        cp.asarray(np.asfortranarray(b), order="F"),
        cp.asarray(c),
        alpha=1 - 2j,
        beta=0.5j,
    )
    assert rel_err(d.get(), (1 - 2j) * (a.astype(complex) @ b) + 0.5j * c) < TOL[dtype]


@pytest.mark.parametrize(
    "dtype, ct, tol",
    [
        ("float32", MatmulComputeType.COMPUTE_32F_FAST_TF32, 5e-3),
        ("float32", MatmulComputeType.COMPUTE_32F_FAST_16F, 5e-3),
        ("float32", MatmulComputeType.COMPUTE_32F_FAST_16BF, 3e-2),
        ("float16", MatmulComputeType.COMPUTE_16F, 1e-2),
        ("float32", MatmulComputeType.COMPUTE_32F_PEDANTIC, 2e-5),
    ],
)
def test_compute_types(dtype, ct, tol):
    M, K, N = 128, 256, 64
    a = RNG.standard_normal((M, K)).astype(dtype)
    b = RNG.standard_normal((K, N)).astype(dtype)
    bias = RNG.standard_normal(N).astype(dtype)
    poison()
    d = matmul(
        cp.asarray(a),
        cp.asarray(b),
        epilog=E.BIAS,
        epilog_inputs={"bias": cp.asarray(bias)},
        options=MatmulOptions(compute_type=ct),
    )
    assert rel_err(d.get(), a.astype(np.float64) @ b + bias) < tol


def test_batched_c_broadcast_and_inplace():
    M, K, N, B = 40, 24, 48, 4
    a = RNG.standard_normal((B, M, K)).astype(np.float32)
    b = RNG.standard_normal((B, K, N)).astype(np.float32)
    c = RNG.standard_normal((M, N)).astype(np.float32)
    bias = RNG.standard_normal((B, 1, N)).astype(np.float32)
    poison()
    d = matmul(
        cp.asarray(a),
        cp.asarray(b),
        cp.asarray(c),
        beta=2.0,
        epilog=E.RELU_BIAS,
        epilog_inputs={"bias": cp.asarray(bias)},
    )
    assert rel_err(d.get(), np.maximum(a.astype(np.float64) @ b + 2 * c + bias, 0)) < 1e-5
    cf = cp.asarray(RNG.standard_normal((B, M, N)).astype(np.float32))
    c0 = cf.get()
    out = matmul(cp.asarray(a), cp.asarray(b), cf, alpha=0.5, beta=-1.0, options={"inplace": True})
    assert out is cf
    assert rel_err(cf.get(), 0.5 * (a.astype(np.float64) @ b) - c0) < 1e-5


@pytest.mark.parametrize("dtype", ["float32", "float64", "complex64"])
def test_column_c_broadcast_along_n(dtype):
    """nvmath-python's (..., M, 1) c (its example08): cuBLASLt reads it as a column-major
    M x N matrix of leading dimension 0; with a column bias too, batched or broadcast over
    the batch, on CuPy and torch, stateful with a reset."""
    M, K, N, B = 40, 24, 48, 3
    rnd = lambda *s: (RNG.standard_normal(s) + (1j * RNG.standard_normal(s) if dtype[0] == "c" else 0)).astype(dtype)  # noqa: E731
    a, b, col, bcol, bias = rnd(B, M, K), rnd(K, N), rnd(M, 1), rnd(B, M, 1), rnd(M, 1)
    want = a.astype(np.complex128) @ b
    poison()
    d = matmul(cp.asarray(a), cp.asarray(b), cp.asarray(col), beta=1.5)
    assert d.shape == (B, M, N) and d[0].flags.f_contiguous
    assert rel_err(d.get(), want + 1.5 * col) < TOL[dtype]
    d = matmul(cp.asarray(a), cp.asarray(b), cp.asarray(bcol), beta=-1.0)
    assert rel_err(d.get(), want - bcol) < TOL[dtype]
    if dtype == "float32":  # a column bias (also F-ordered)
        d = matmul(cp.asarray(a), cp.asarray(b), cp.asarray(col), epilog=E.BIAS, epilog_inputs={"bias": cp.asarray(bias)})
        assert rel_err(d.get(), want + col + bias) < TOL[dtype]
    with pytest.raises(ValueError, match=r"^c: shape \(40, 1\) is broadcast along N"):
        matmul(cp.asarray(a), cp.asarray(b), cp.asarray(col), options={"result_order": "C"})
    torch = pytest.importorskip("torch")
    ta, tb = torch.from_numpy(a[0]).cuda(), torch.from_numpy(b).cuda()
    with Matmul(ta, tb, torch.from_numpy(col).cuda(), beta=2.0) as mm:
        mm.plan()
        assert rel_err(host(mm.execute()), want[0] + 2.0 * col) < TOL[dtype]
        col2 = rnd(M, 1)
        mm.reset_operands(c=torch.from_numpy(col2).cuda())
        assert rel_err(host(mm.execute()), want[0] + 2.0 * col2) < TOL[dtype]


def test_stateful_autotune_reset_stream_pickle():
    M, K, N = 256, 128, 192
    host_a = [RNG.standard_normal((M, K)).astype(np.float16) for _ in range(3)]
    b = cp.asarray(RNG.standard_normal((K, N)).astype(np.float16))
    c = cp.asarray(RNG.standard_normal((M, N)).astype(np.float16))
    bias = cp.asarray(RNG.standard_normal(N).astype(np.float16))
    s = cp.cuda.Stream(non_blocking=True)
    a0 = cp.asarray(host_a[0])
    with Matmul(
        a0,
        b,
        c=c,
        alpha=2.0,
        beta=0.5,
        options=MatmulOptions(compute_type=MatmulComputeType.COMPUTE_32F),
    ) as mm:
        algos = mm.plan(epilog=E.GELU_AUX_BIAS, epilog_inputs={"bias": bias})
        assert algos and all(isinstance(x, Algorithm) for x in algos)
        tuned = mm.autotune(iterations=3)
        assert all(x.time_ms is not None for x in tuned)
        assert [x.time_ms for x in tuned] == sorted(x.time_ms for x in tuned)
        for ha in host_a:
            a = cp.asarray(ha)
            mm.reset_operands(a=a)
            poison()
            d, aux = mm.execute(stream=s)
            s.synchronize()
            want_d, want_o = reference(
                ha,
                b.get(),
                c=c.get(),
                alpha=2.0,
                beta=0.5,
                epilog=E.GELU_AUX_BIAS,
                epilog_inputs={"bias": bias.get()},
                compute_dtype=np.float64,
            )
            assert rel_err(d.get(), want_d) < 4e-3
            assert rel_err(aux["gelu_aux"].get(), want_o["gelu_aux"]) < 4e-3
        with pytest.raises(ValueError, match="^a: "):
            mm.reset_operands(a=cp.asarray(host_a[0][:, :64]))
        saved = pickle.dumps(mm.algorithms)
    with Matmul(a0, b, c=c, alpha=2.0, beta=0.5) as mm2:
        mm2.plan(
            algorithms=pickle.loads(saved), epilog=E.GELU_AUX_BIAS, epilog_inputs={"bias": bias}
        )
        d, _ = mm2.execute()
        want_d, _ = reference(
            host_a[0],
            b.get(),
            c=c.get(),
            alpha=2.0,
            beta=0.5,
            epilog=E.GELU_AUX_BIAS,
            epilog_inputs={"bias": bias.get()},
            compute_dtype=np.float64,
        )
        assert rel_err(d.get(), want_d) < 4e-3


def test_algorithm_capabilities_and_configuration():
    """nvmath-python's example15: the planned algorithms' capabilities, read from cuBLASLt, and
    their configuration set back (the same tile and stages, as the example does; another
    allowed custom option) before execute; the result stays right."""
    M, K, N = 256, 192, 320
    a, b = cp.asarray(RNG.standard_normal((M, K))), cp.asarray(RNG.standard_normal((K, N)))
    want = a.get() @ b.get()
    with Matmul(a, b) as mm:
        algos = mm.plan(preferences={"limit": 4})
        ids = set(mm.applicable_algorithm_ids(limit=64))
        for best in algos:
            caps = best.capabilities
            assert isinstance(caps, AlgorithmCapabilities) and "tile_ids" in str(caps)
            assert best.algorithm_id in ids
            assert caps.min_alignment_a_bytes >= 1 and caps.strided_batch_support in (0, 1)
            assert not caps.tile_ids or best.tile in caps.tile_ids, (best.tile, caps.tile_ids)
            assert not caps.stages_ids or best.stages in caps.stages_ids
            assert best.split_k >= 1 and 0 <= best.custom_option <= max(caps.custom_option_max, 0)
        best = algos[0]
        before = best.data
        best.tile = best.tile
        best.stages = best.stages
        best.cluster_shape = best.cluster_shape
        assert best.data == before
        assert rel_err(mm.execute().get(), want) < 1e-12
        if best.capabilities.custom_option_max > 0:
            # in the capability's range, yet cuBLASLt may still not run it for this problem:
            # then its launch says so (as nvmath-python's would), and the old value runs again
            orig = best.custom_option
            best.custom_option = (orig + 1) % (best.capabilities.custom_option_max + 1)
            assert best.data != before
            try:
                assert rel_err(mm.execute().get(), want) < 1e-12
            except CublasLtError as e:
                assert e.call == "cublasLtMatmul" and e.status == 15, e  # NOT_SUPPORTED
            best.custom_option = orig
            assert best.data == before
            assert rel_err(mm.execute().get(), want) < 1e-12


def test_nvmath_python_s_stateful_surface():
    """nvmath-python 1.0's Matmul methods and arguments: applicable_algorithm_ids, plan on a
    stream, execute with a chosen algorithm and with release_workspace (reallocated at the next
    launch, on another stream too), autotune on a stream releasing the workspace,
    release_operands + reset_operands, reset_operands_unchecked (CuPy and torch), matmul with
    algorithm=; each result against NumPy."""
    M, K, N = 384, 256, 320
    a_h, b_h = RNG.standard_normal((M, K)), RNG.standard_normal((K, N))
    a, b = cp.asarray(a_h.astype(np.float32)), cp.asarray(b_h.astype(np.float32))
    want = a.get().astype(np.float64) @ b.get()
    s1, s2 = cp.cuda.Stream(non_blocking=True), cp.cuda.Stream(non_blocking=True)
    with Matmul(a, b) as mm:
        ids = mm.applicable_algorithm_ids(limit=4)
        assert 1 <= len(ids) <= 4 and all(isinstance(i, int) and i >= 0 for i in ids)
        algos = mm.plan(preferences={"limit": 4}, stream=s1.ptr)
        assert mm._gpu.workspace_stream == s1.ptr
        for algo in algos:  # each planned algorithm, chosen for one call
            d = mm.execute(stream=s1, algorithm=algo)
            s1.synchronize()
            assert rel_err(d.get(), want) < 1e-5
        assert mm._exec.args.algorithm is algos[0]  # the default is back
        if mm._gpu.workspace_size:
            d = mm.execute(stream=s1, release_workspace=True)
            assert mm._gpu.workspace is None and mm._exec.args.workspace == 0
            d2 = mm.execute(stream=s2)  # a new workspace, in s2's order
            s2.synchronize()
            assert mm._gpu.workspace is not None and mm._gpu.workspace_stream == s2.ptr
            assert rel_err(d.get(), want) < 1e-5 and rel_err(d2.get(), want) < 1e-5
        tuned = mm.autotune(iterations=2, release_workspace=True, stream=s2.ptr)
        assert [x.time_ms for x in tuned] == sorted(x.time_ms for x in tuned)
        assert mm._gpu.workspace is None or not mm._gpu.workspace_size
        # released operands: the plan stays; execute refuses until every operand is back
        mm.release_operands()
        with pytest.raises(RuntimeError, match="were released"):
            mm.execute()
        a2 = cp.asarray(RNG.standard_normal((M, K)).astype(np.float32))
        with pytest.raises(ValueError, match=r"^after release_operands\(\), .*; missing b$"):
            mm.reset_operands_unchecked(a=a2)  # unchecked too: a null b would reach cuBLASLt
        mm.reset_operands(a=a2, b=b)
        assert rel_err(mm.execute().get(), a2.get().astype(np.float64) @ b.get()) < 1e-5
        # unchecked: the pointers only (the alignment is still checked)
        a3 = cp.asarray(RNG.standard_normal((M, K)).astype(np.float32))
        mm.reset_operands_unchecked(a=a3, alpha=2.0)
        assert rel_err(mm.execute().get(), 2 * (a3.get().astype(np.float64) @ b.get())) < 1e-5
        with pytest.raises(ValueError, match=r"^a: pointer .* is less aligned than the planned"):
            mm.reset_operands_unchecked(a=cp.zeros(M * K + 1, np.float32)[1:].reshape(M, K))
        best = mm.algorithms[0]
    d = matmul(a, b, algorithm=best)  # no heuristic: the given algorithm
    assert rel_err(d.get(), want) < 1e-5
    # blocking, an SM count target and the heuristic's filters
    prefs = {"max_waves_count": 8.0, "reduction_scheme_mask": MatmulReductionScheme.MASK,
             "numerical_impl_mask": MatmulNumericalImplFlags.ALL}
    with Matmul(a, b, options={"blocking": True, "sm_count_target": 32}) as mm:
        mm.plan(preferences=prefs)
        assert all(x.waves_count <= 8.0 for x in mm.algorithms)
        d = mm.execute(stream=s1)
        assert s1.done and rel_err(d.get(), want) < 1e-5
    torch = pytest.importorskip("torch")
    ta, tb = torch.from_dlpack(a), torch.from_dlpack(b)
    with Matmul(ta, tb) as mm:
        mm.plan()
        t2 = torch.randn(M, K, device="cuda")
        mm.reset_operands_unchecked(a=t2)
        got = mm.execute()
        assert isinstance(got, torch.Tensor)
        assert rel_err(got.cpu().numpy(), t2.double().cpu().numpy() @ b.get()) < 1e-5


def test_plan_cache_avoids_replanning(monkeypatch):
    mm_mod.clear_plan_cache()
    calls = []
    real = lt.heuristic
    monkeypatch.setattr(lt, "heuristic", lambda *a: calls.append(1) or real(*a))
    a = cp.asarray(RNG.standard_normal((64, 32)).astype(np.float32))
    b = cp.asarray(RNG.standard_normal((32, 16)).astype(np.float32))
    for i in range(5):
        d = matmul(a * (i + 1), b)
        assert rel_err(d.get(), (i + 1) * (a.get().astype(np.float64) @ b.get())) < 1e-5
    assert len(calls) == 1
    assert mm_mod.plan_cache_info()["size"] == 1
    for i in range(4):  # new bias and c arrays each call: their pointers are swapped in
        bias = cp.full((16,), float(i), dtype=cp.float32)
        c = cp.full((64, 16), 2.0 * i, dtype=cp.float32)
        d = matmul(a, b, c, beta=0.5, epilog=E.BIAS, epilog_inputs={"bias": bias})
        want = a.get().astype(np.float64) @ b.get() + 0.5 * 2.0 * i + i
        assert rel_err(d.get(), want) < 1e-5
    assert len(calls) == 2


def test_operand_kinds_return_their_kind():
    M, K, N = 48, 32, 40
    a = RNG.standard_normal((M, K)).astype(np.float32)
    b = RNG.standard_normal((K, N)).astype(np.float32)
    bias = RNG.standard_normal(N).astype(np.float32)
    want = np.maximum(a.astype(np.float64) @ b + bias, 0)
    kw = {"epilog": E.RELU_BIAS}
    # NumPy on the GPU: copied there and back
    d = matmul(a, b, epilog_inputs={"bias": bias}, **kw)
    assert type(d) is np.ndarray and rel_err(d, want) < 1e-5
    d = matmul(cp.asarray(a), cp.asarray(b), epilog_inputs={"bias": cp.asarray(bias)}, **kw)
    assert type(d) is cp.ndarray and rel_err(d.get(), want) < 1e-5
    torch = pytest.importorskip("torch")
    t = lambda x: torch.from_numpy(x).cuda()  # noqa: E731
    d = matmul(t(a), t(b), epilog_inputs={"bias": t(bias)}, **kw)
    assert isinstance(d, torch.Tensor) and d.is_cuda and rel_err(d.cpu().numpy(), want) < 1e-5
    b_f = torch.from_numpy(np.ascontiguousarray(b.T)).cuda().T  # F-ordered view
    d = matmul(t(a), b_f, epilog_inputs={"bias": t(bias)}, **kw)
    assert rel_err(d.cpu().numpy(), want) < 1e-5
    from numba import cuda

    d = matmul(
        cuda.to_device(a), cuda.to_device(b), epilog_inputs={"bias": cuda.to_device(bias)}, **kw
    )
    assert cuda.is_cuda_array(d) and type(d).__module__.startswith("numba")
    assert rel_err(d.copy_to_host(), want) < 1e-5
    with pytest.raises(TypeError, match="^b: a cupy array; a is a torch"):
        matmul(t(a), cp.asarray(b))


def _conjugating(*names):
    q = np.zeros(3, dtype=matrix_qualifiers_dtype)
    for n in names:
        q["abc".index(n)]["is_conjugate"] = 1
    return q


@pytest.mark.parametrize("dtype", [np.complex64, np.complex128])
def test_conjugated_operands_qualifiers_and_torch_conjugate_bit(dtype):
    """cuBLASLt's conjugate transpose (OP_C) where an operand is conjugated: by a qualifier
    (CuPy) or by torch's conjugate bit (x.mH, x.conj()), batched too, stateful with a reset;
    each against NumPy's product of the conjugates. c's conjugate bit and a negative bit are
    refused, named."""
    torch = pytest.importorskip("torch")
    rng = np.random.default_rng(5)
    tol = 1e-5 if dtype == np.complex64 else 1e-12

    def cplx(*shape):
        return (rng.standard_normal(shape) + 1j * rng.standard_normal(shape)).astype(dtype)

    M, K, N = 48, 40, 24
    x, y = cplx(K, M), cplx(K, N)  # x^H y: x.mH is column-major with the conjugate bit
    tx, ty = torch.from_numpy(x).cuda(), torch.from_numpy(y).cuda()
    d = matmul(tx.mH, ty)
    assert d.is_contiguous()  # a column-major conjugated a: a C-ordered result
    assert rel_err(d.cpu().numpy(), x.conj().T @ y) < tol
    a = cplx(M, K)
    d = matmul(torch.from_numpy(a).cuda().conj(), ty[:, :N])  # row-major conjugated: F-ordered result
    assert d.stride() == (1, M) and rel_err(d.cpu().numpy(), a.conj() @ y) < tol
    # CuPy, qualifiers: both operands conjugated, one of them column-major
    for qa, qb, b_arr in (("a", None, y), ("a", "b", y), (None, "b", np.asfortranarray(y))):
        q = _conjugating(*[n for n in (qa, qb) if n])
        d = matmul(cp.asarray(np.asfortranarray(a)) if qa and qb is None else cp.asarray(a), cp.asarray(b_arr),
                   qualifiers=q)
        want = (a.conj() if qa else a) @ (y.conj() if qb else y)
        assert rel_err(d.get(), want) < tol, (qa, qb)
    # a qualifier on a tensor with the conjugate bit conjugates it back: the memory's values
    d = matmul(tx.mH, ty, qualifiers=_conjugating("a"))
    assert rel_err(d.cpu().numpy(), x.T @ y) < tol
    # batched: 3 x (K, M) -> mH is (3, M, K) column-major matrices
    xb, yb = cplx(3, K, M), cplx(3, K, N)
    d = matmul(torch.from_numpy(xb).cuda().mH, torch.from_numpy(yb).cuda())
    assert rel_err(d.cpu().numpy(), np.conj(xb).transpose(0, 2, 1) @ yb) < tol
    # stateful: plan once, reset to new conjugated tensors of the same layout
    with Matmul(tx.mH, ty) as mm:
        mm.plan()
        assert rel_err(mm.execute().cpu().numpy(), x.conj().T @ y) < tol
        x2 = cplx(K, M)
        mm.reset_operands(a=torch.from_numpy(x2).cuda().mH)
        assert rel_err(mm.execute().cpu().numpy(), x2.conj().T @ y) < tol
        with pytest.raises(ValueError, match=r"^a: .* does not match the planned .*\(conjugate bit set\)$"):
            mm.reset_operands(a=torch.from_numpy(x2.conj().T.copy()).cuda())
    c = torch.from_numpy(cplx(M, N)).cuda()
    with pytest.raises(ValueError, match=r"^c: a torch tensor with the conjugate bit set .*\.resolve_conj\(\)"):
        matmul(tx.mH, ty, c.conj())
    with pytest.raises(ValueError, match=r"^b: a torch tensor with the negative bit set .*\.resolve_neg\(\)"):
        matmul(torch.from_numpy(a.real.copy()).cuda(), ty.conj().imag)


@pytest.mark.filterwarnings("ignore::nvmath_host.CPUExecutionWarning")
@pytest.mark.parametrize("path", ["gpu", "cpu"])
def test_torch_cpu_tensors(path, monkeypatch):
    """torch CPU tensors (nvmath-python's example01_torch / example04_stateful_torch_cpu):
    computed on the GPU from device copies (or on the CPU without one), returned as torch CPU
    tensors; in place into the user's tensor; bfloat16, a conjugate-bit operand, an epilog."""
    torch = pytest.importorskip("torch")
    if path == "cpu":
        from nvmath_host import _gpu

        monkeypatch.setattr(_gpu, "available", lambda: False)
    warn = pytest.warns(CPUExecutionWarning) if path == "cpu" else contextlib.nullcontext()
    M, K, N = 33, 20, 17
    a, b = torch.randn(M, K, dtype=torch.float64), torch.randn(K, N, dtype=torch.float64)
    with warn:
        d = matmul(a, b)
    assert isinstance(d, torch.Tensor) and d.device.type == "cpu" and d.dtype == torch.float64
    assert rel_err(d.numpy(), a.numpy() @ b.numpy()) < 1e-12
    bias = torch.randn(N, dtype=torch.float64)
    d, aux = matmul(a, b, epilog=E.RELU_AUX_BIAS, epilog_inputs={"bias": bias})
    assert aux["relu_aux"].device.type == "cpu"
    assert rel_err(d.numpy(), np.maximum(a.numpy() @ b.numpy() + bias.numpy(), 0)) < 1e-12
    ab, bb = a.to(torch.bfloat16), b.to(torch.bfloat16)
    d = matmul(ab, bb)
    assert d.dtype == torch.bfloat16 and d.device.type == "cpu"
    assert rel_err(d.float().numpy(), ab.double().numpy() @ bb.double().numpy()) < TOL["bfloat16"]
    x = torch.randn(K, M, dtype=torch.complex64)
    y = torch.randn(K, N, dtype=torch.complex64)
    d = matmul(x.mH, y)  # a conjugate-bit operand: its conjugated values
    assert rel_err(d.numpy(), x.numpy().conj().T @ y.numpy()) < TOL["complex64"]
    c = torch.randn(M, N, dtype=torch.float64)
    c0 = c.clone()
    with Matmul(a, b, c, beta=0.5, options={"inplace": True}) as mm:
        mm.plan()
        assert mm.execute() is c
        assert rel_err(c.numpy(), a.numpy() @ b.numpy() + 0.5 * c0.numpy()) < 1e-12
        a2 = torch.randn(M, K, dtype=torch.float64)
        c2 = torch.randn(M, N, dtype=torch.float64)
        c20 = c2.clone()
        mm.reset_operands(a=a2, c=c2)
        assert mm.execute() is c2
        assert rel_err(c2.numpy(), a2.numpy() @ b.numpy() + 0.5 * c20.numpy()) < 1e-12
    if path == "gpu":
        with pytest.raises(TypeError, match=r"^b: a torch tensor on cuda:0; a is a torch tensor on cpu"):
            matmul(a, b.cuda())


def test_torch_bfloat16_and_streams():
    torch = pytest.importorskip("torch")
    M, K, N = 128, 64, 96
    a = torch.randn(M, K, device="cuda", dtype=torch.bfloat16)
    b = torch.randn(N, K, device="cuda", dtype=torch.bfloat16).T  # transposed view
    bias = torch.randn(N, device="cuda", dtype=torch.bfloat16)
    s = torch.cuda.Stream()
    with torch.cuda.stream(s):  # default: the package's current stream
        d = matmul(a, b, epilog=E.GELU_BIAS, epilog_inputs={"bias": bias})
    s.synchronize()
    want, _ = reference(
        a.float().cpu().numpy(),
        b.float().cpu().numpy(),
        epilog=E.GELU_BIAS,
        epilog_inputs={"bias": bias.float().cpu().numpy()},
        compute_dtype=np.float64,
    )
    assert d.dtype == torch.bfloat16 and rel_err(d.float().cpu().numpy(), want) < 2e-2
    # explicit streams of every kind
    proto = SimpleNamespace(__cuda_stream__=lambda: (0, s.cuda_stream))
    # a CuPy stream over the torch one: CuPy 14's Stream.from_external (ExternalStream is deprecated)
    for stream in (s, s.cuda_stream, cp.cuda.Stream.from_external(proto), proto):
        d = matmul(a, b, stream=stream)
        s.synchronize()
        assert (
            rel_err(d.float().cpu().numpy(), a.double().cpu().numpy() @ b.double().cpu().numpy())
            < 2e-2
        )


def _fp8_torch():
    torch = pytest.importorskip("torch")
    if torch.cuda.get_device_capability() < (8, 9):
        pytest.skip("FP8 needs compute capability >= 8.9")
    return torch


FP8_MAX = {"float8_e4m3fn": 448.0, "float8_e5m2": 57344.0}
FP8_BITS = {"float8_e4m3fn": (3, -6), "float8_e5m2": (2, -14)}  # mantissa bits, min exponent


def _e4m3_pair(torch, M, K, N):
    """Random float8_e4m3fn ``a`` (M, K) and column-major ``b`` (K, N) on the GPU, their
    exact product ``x`` and the sum of its term magnitudes ``mag`` (float64, on the CPU)."""
    a = torch.randn(M, K, device="cuda").to(torch.float8_e4m3fn)
    b = torch.randn(N, K, device="cuda").to(torch.float8_e4m3fn).T
    return a, b, a.double().cpu() @ b.double().cpu(), a.double().cpu().abs() @ b.double().cpu().abs()


def fp8_steps(got, want, rtype):
    """max |got - want| in FP8 steps (the spacing of rtype's grid at ``want``)."""
    mbits, emin = FP8_BITS[rtype]
    e = np.floor(np.log2(np.maximum(np.abs(want), 2.0**emin)))
    return float(np.max(np.abs(got - want) / 2.0 ** (e - mbits)))


def check_fp8_result(torch, d, x, sd, rtype, mag, steps=1, min_same=0.90):
    """d (an FP8 tensor) against scale_d * x (float64, pre-scale result), saturated.

    Hopper's FP8 tensor cores do not accumulate in full float32 (partial sums keep about 14
    mantissa bits; DeepSeek-V3 report, sec. 3.3.2), so where the sum cancels the error is not
    bounded by the result's FP8 spacing but by the size of the summed terms: every element is
    within one FP8 step plus ``2**-10 * scale_d * (|a| @ |b|)`` (``mag``, the sum of the term
    magnitudes) of the exact value, and at least 90% are bit-identical to the exact value
    rounded to nearest (a wrong rounding mode or scale fails both).
    """
    tdt = getattr(torch, rtype)
    assert d.dtype == tdt and tuple(d.shape) == tuple(x.shape)
    big = FP8_MAX[rtype]
    want = (x * sd).clamp(-big, big)
    got = d.cpu()
    assert not torch.isnan(got.double()).any(), "NaN in the FP8 result"
    g, w = got.double().numpy(), want.numpy()
    mbits, emin = FP8_BITS[rtype]
    step = 2.0 ** (np.floor(np.log2(np.maximum(np.abs(w), 2.0**emin))) - mbits)
    acc = 2.0**-10 * sd * mag.numpy()
    excess = np.abs(g - w) - steps * step
    worst = float(np.max(excess / acc))
    want_q = want.float().to(tdt)
    same = (got.view(torch.uint8) == want_q.view(torch.uint8)).double().mean().item()
    diag = f"steps={fp8_steps(g, w, rtype):.3g} acc-ratio={worst:.3g} same={same:.4f}"
    assert worst <= 1.0, diag
    assert same >= min_same, diag


FP8_RESULT_CASES = [  # (a, b, result): the combinations cuBLASLt's FP8 table allows
    ("float8_e4m3fn", "float8_e4m3fn", "float8_e4m3fn"),
    ("float8_e4m3fn", "float8_e5m2", "float8_e5m2"),
    ("float8_e4m3fn", "float8_e5m2", "float8_e4m3fn"),
    ("float8_e5m2", "float8_e4m3fn", "float8_e5m2"),
]


@pytest.mark.parametrize("result_type", ["bfloat16", "float16", "float32"])
def test_fp8_scales(result_type):
    """FP8 e4m3 operands with per-tensor scales (verified on the H200: bf16/fp16/fp32 results)."""
    torch = _fp8_torch()
    M, K, N = 64, 128, 96
    a = torch.randn(M, K, device="cuda").to(torch.float8_e4m3fn)
    b = torch.randn(N, K, device="cuda").to(torch.float8_e4m3fn).T  # column-major (K, N)
    sa, sb = 0.5, 2.0
    mm = Matmul(a, b, quantization_scales={"a": sa, "b": sb}, options={"result_type": result_type})
    d = mm.execute()
    assert str(d.dtype) == "torch." + result_type
    x = (a.double() * sa) @ (b.double() * sb)
    err = ((d.double() - x).abs().max() / x.abs().max()).item()
    assert err < 1e-2, err
    # new scales for the next execute: a float and a one-element device array
    mm.reset_operands(quantization_scales={"a": 0.25, "b": torch.full((1,), 8.0, device="cuda")})
    x = (a.double() * 0.25) @ (b.double() * 8.0)
    err = ((mm.execute().double() - x).abs().max() / x.abs().max()).item()
    assert err < 1e-2, err
    mm.free()


@pytest.mark.parametrize("atype, btype", [("float8_e4m3fn", "float8_e4m3fn"), ("float8_e5m2", "float8_e4m3fn")])
def test_fp8_default_result_is_a_dtype(atype, btype):
    """Without c or result_type an FP8 product has a's dtype (nvmath-python's default): the
    same bytes as the result_type=a's-dtype call."""
    torch = _fp8_torch()
    M, K, N = 64, 128, 96
    a = torch.randn(M, K, device="cuda").to(getattr(torch, atype))
    b = torch.randn(N, K, device="cuda").to(getattr(torch, btype)).T
    scales = {"a": 0.5, "b": 2.0, "d": 0.25}
    d = matmul(a, b, quantization_scales=scales)
    assert str(d.dtype) == "torch." + atype
    want = matmul(a, b, quantization_scales=scales, options={"result_type": atype})
    assert torch.equal(d.view(torch.uint8), want.view(torch.uint8))
    with pytest.raises(ValueError, match=r"missing \['d'\] \(the result is " + atype):
        matmul(a, b, quantization_scales={"a": 0.5, "b": 2.0})


@pytest.mark.parametrize("amax", [False, True], ids=["no_amax", "amax"])
@pytest.mark.parametrize("atype, btype, rtype", FP8_RESULT_CASES)
def test_fp8_result_d_scale_amax(atype, btype, rtype, amax):
    """FP8 results: D = scale_d * (scale_a a @ scale_b b), rounded and saturated to FP8.

    cuBLASLt sees C as bfloat16 (its FP8 table) pointed at its A operand, not at D (cuBLASLt
    13 rejects C == D with different layouts); amax is max |D| before scale_d.
    """
    torch = _fp8_torch()
    M, K, N = 64, 128, 96
    a = torch.randn(M, K, device="cuda").to(getattr(torch, atype))
    b = torch.randn(N, K, device="cuda").to(getattr(torch, btype)).T  # column-major (K, N)
    sa, sb = 0.5, 2.0
    x = (a.double().cpu() * sa) @ (b.double().cpu() * sb)
    mag = (a.double().cpu().abs() * sa) @ (b.double().cpu().abs() * sb)
    sd = 0.5 * FP8_MAX[rtype] / x.abs().max().item()  # uses the range, never saturates
    out = matmul(
        a,
        b,
        quantization_scales={"a": sa, "b": sb, "d": sd},
        options={"result_type": rtype, "result_amax": amax},
    )
    if amax:
        d, aux = out
        assert set(aux) == {"result_amax"}
        got = aux["result_amax"]
        assert got.dtype == torch.float32 and tuple(got.shape) == (1,) and got.is_cuda
        want = x.abs().max().item()
        assert abs(got.item() - want) <= 1e-3 * want, (got.item(), want)
    else:
        d = out
    check_fp8_result(torch, d, x, sd, rtype, mag)


@pytest.mark.parametrize("aux_type", ["float8_e4m3fn", "float16"])
def test_fp8_gelu_aux_type_scale_and_amax(aux_type):
    """nvmath-python's example24: GELU_AUX with an FP8 result, its gelu_aux stored as
    preferences.epilog.aux_type, scaled by the epilog input "aux_quantization_scale" (FP8
    only), with its amax; a reset changes the aux scale. cuBLASLt's FP8 GELU is not the tanh
    formula to the last FP8 step: D is checked within two steps, half of it bit-exact."""
    from nvmath_host.epilogs import gelu

    torch = _fp8_torch()
    M, K, N = 64, 128, 96
    a, b, x, mag = _e4m3_pair(torch, M, K, N)
    sd = 0.5 * FP8_MAX["float8_e4m3fn"] / x.abs().max().item()
    scales = {"a": 1.0, "b": 1.0, "d": sd}
    fp8_aux = aux_type == "float8_e4m3fn"
    prefs = {"epilog": {"aux_type": aux_type, "aux_amax": fp8_aux}}
    sx = 0.5 * FP8_MAX["float8_e4m3fn"] / x.abs().max().item()
    inputs = {"aux_quantization_scale": sx} if fp8_aux else {}
    with Matmul(a, b, quantization_scales=scales) as mm:
        mm.plan(preferences=prefs, epilog=E.GELU_AUX, epilog_inputs=inputs)
        d, aux = mm.execute()
        assert list(aux) == ["gelu_aux"] + (["gelu_aux_amax"] if fp8_aux else [])
        gx = torch.from_numpy(gelu(x.numpy()))
        check_fp8_result(torch, d, gx, sd, "float8_e4m3fn", mag, steps=2, min_same=0.5)
        g = aux["gelu_aux"][:, :N]
        if not fp8_aux:
            assert g.dtype == torch.float16
            assert rel_err(g.double().cpu().numpy(), x.numpy()) < 2e-3
            return
        check_fp8_result(torch, g.contiguous(), x, sx, "float8_e4m3fn", mag)
        got = aux["gelu_aux_amax"].item()
        assert abs(got - x.abs().max().item()) <= 1e-3 * x.abs().max().item()
        mm.reset_operands(epilog_inputs={"aux_quantization_scale": sx / 4})
        g = mm.execute()[1]["gelu_aux"][:, :N]
        check_fp8_result(torch, g.contiguous(), x, sx / 4, "float8_e4m3fn", mag)
    with pytest.raises(ValueError, match=r"^preferences.epilog.aux_type: GELU_AUX with an FP8 result"):
        matmul(a, b, quantization_scales=scales, epilog=E.GELU_AUX)


def test_fp8_result_saturates():
    """An FP8 result out of range is clamped to the largest finite value (no NaN)."""
    torch = _fp8_torch()
    M, K, N = 64, 128, 96
    a, b, x, mag = _e4m3_pair(torch, M, K, N)
    sd = 4.0 * 448.0 / x.abs().max().item()
    d, aux = matmul(
        a,
        b,
        quantization_scales={"a": 1.0, "b": 1.0, "d": sd},
        options={"result_type": "float8_e4m3fn", "result_amax": True},
    )
    check_fp8_result(torch, d, x, sd, "float8_e4m3fn", mag)
    assert d.double().abs().max().item() == 448.0
    assert abs(aux["result_amax"].item() - x.abs().max().item()) <= 1e-3 * x.abs().max().item()


@pytest.mark.parametrize("case", ["c_bfloat16", "c_float16", "relu_bias_float16", "bias_bfloat16"])
def test_fp8_result_with_c_or_bias_autotune(case):
    """FP8 result with a 16-bit c (beta != 0) or bias; C type = c's / the bias's; autotune and
    a second execute rebuild the arguments (C pointer) for every algorithm."""
    torch = _fp8_torch()
    M, K, N = 64, 128, 96
    rtype = "float8_e4m3fn"
    a = torch.randn(M, K, device="cuda").to(torch.float8_e4m3fn)
    b = torch.randn(N, K, device="cuda").to(torch.float8_e4m3fn).T
    sa, sb = 0.5, 2.0
    x = (a.double().cpu() * sa) @ (b.double().cpu() * sb)
    mag = (a.double().cpu().abs() * sa) @ (b.double().cpu().abs() * sb)
    c, beta, epilog, inputs = None, None, None, None
    kind, dt = case.rsplit("_", 1)
    tdt = getattr(torch, dt)
    if kind == "c":
        c = torch.randn(M, N, device="cuda").to(tdt)
        beta = 0.5
        x = x + beta * c.double().cpu()
        mag = mag + beta * c.double().cpu().abs()
    else:
        bias = torch.randn(N, device="cuda").to(tdt)
        epilog = E.RELU_BIAS if kind == "relu_bias" else E.BIAS
        inputs = {"bias": bias}
        x = x + bias.double().cpu()
        mag = mag + bias.double().cpu().abs()
        if epilog == E.RELU_BIAS:
            x = x.clamp(min=0)
    sd = 0.5 * FP8_MAX[rtype] / x.abs().max().item()
    with Matmul(
        a,
        b,
        c,
        beta=beta,
        quantization_scales={"a": sa, "b": sb, "d": sd},
        options={"result_type": rtype, "result_amax": True},
    ) as mm:
        mm.plan(epilog=epilog, epilog_inputs=inputs)
        assert mm._problem.layout_c.dtype.name == dt  # c's type, or the bias's without c
        mm.autotune(iterations=2)
        d, aux = mm.execute()
        torch.cuda.synchronize()
    check_fp8_result(torch, d, x, sd, rtype, mag)
    want = x.abs().max().item()
    assert abs(aux["result_amax"].item() - want) <= 1e-3 * want


@pytest.mark.parametrize("order", ["w.T", "fortran"])
def test_fp8_numpy_operands_keep_their_layout(order):
    """NumPy FP8 operands (ml_dtypes) on a GPU are mirrored in their own memory order: a
    column-major ``b`` stays column-major (cuBLASLt's FP8 kernels need A row-major, B
    column-major), and the result comes back as a NumPy array."""
    ml = pytest.importorskip("ml_dtypes")
    _fp8_torch()  # compute capability >= 8.9
    rng = np.random.default_rng(11)
    M, K, N = 64, 128, 96
    a = rng.standard_normal((M, K)).astype(ml.float8_e4m3fn)
    w = rng.standard_normal((N, K)).astype(ml.float8_e4m3fn)
    b = w.T if order == "w.T" else np.asfortranarray(w.T)
    assert b.flags.f_contiguous and not b.flags.c_contiguous
    sa, sb = 0.5, 2.0
    d = matmul(a, b, quantization_scales={"a": sa, "b": sb}, options={"result_type": "bfloat16"})
    assert isinstance(d, np.ndarray) and d.dtype.name == "bfloat16" and d.shape == (M, N)
    x = (a.astype(np.float64) * sa) @ (b.astype(np.float64) * sb)
    err = float(np.abs(d.astype(np.float64) - x).max() / np.abs(x).max())
    assert err < 1e-2, err


def test_numba_chain_one_stream_no_host_sync():
    """Numba kernel -> matmul -> Numba kernel on one non-default stream, no host sync."""
    from cuda.bindings import driver
    from numba import cuda

    @cuda.jit
    def spin(n):
        for _ in range(n):
            cuda.nanosleep(1000)

    @cuda.jit
    def fill(x, k):
        i, j = cuda.grid(2)
        if i < x.shape[0] and j < x.shape[1]:
            x[i, j] = ((i * 7 + j * 3 + k) % 11) - 5.0

    @cuda.jit
    def consume(d, out):
        i, j = cuda.grid(2)
        if i < d.shape[0] and j < d.shape[1]:
            out[i, j] = 2.0 * d[i, j] + 1.0

    M, K, N = 96, 64, 80
    s = cuda.stream()
    a = cuda.device_array((M, K), np.float32)
    b = cuda.to_device(RNG.standard_normal((K, N)).astype(np.float32))
    bias = cuda.to_device(RNG.standard_normal(N).astype(np.float32))
    out = cuda.device_array((M, N), np.float32)
    # compile every kernel and plan the matmul first: JIT compilation on the host would let
    # the spin kernel finish and hide what we test
    spin[1, 1, s](1)
    fill[(12, 10), (8, 8), s](a, 0)
    d0 = matmul(a, b, epilog=E.RELU_BIAS, epilog_inputs={"bias": bias}, stream=s)
    consume[(12, 10), (8, 8), s](d0, out)
    s.synchronize()
    spin[1, 1, s](200_000)  # ~0.2 s of GPU time ahead of our work
    fill[(12, 10), (8, 8), s](a, 3)
    t0 = time.perf_counter()
    d = matmul(a, b, epilog=E.RELU_BIAS, epilog_inputs={"bias": bias}, stream=s)
    host_s = time.perf_counter() - t0
    handle = driver.CUstream(stream_handle(s))
    (err,) = driver.cuStreamQuery(handle)
    assert err == driver.CUresult.CUDA_ERROR_NOT_READY, "drained by matmul: a hidden sync?"
    consume[(12, 10), (8, 8), s](d, out)
    (err,) = driver.cuStreamQuery(handle)
    assert err == driver.CUresult.CUDA_ERROR_NOT_READY, "the stream was drained"
    assert host_s < 0.05, host_s
    s.synchronize()
    ha = np.fromfunction(lambda i, j: ((i * 7 + j * 3 + 3) % 11) - 5.0, (M, K)).astype(np.float32)
    want = 2 * np.maximum(ha.astype(np.float64) @ b.copy_to_host() + bias.copy_to_host(), 0) + 1
    assert rel_err(out.copy_to_host(), want) < 1e-5


def test_no_sync_cupy_execute():
    """Matmul.execute on a busy cupy stream returns before the stream drains."""
    from numba import cuda

    @cuda.jit
    def spin(n):
        for _ in range(n):
            cuda.nanosleep(1000)

    s = cp.cuda.Stream(non_blocking=True)
    a = cp.asarray(RNG.standard_normal((128, 128)).astype(np.float16))
    with Matmul(a, a) as mm:
        mm.plan()
        mm.execute(stream=s)
        s.synchronize()
        spin[1, 1, cuda.external_stream(s.ptr)](200_000)
        for _ in range(10):
            mm.execute(stream=s)
        assert not s.done
        s.synchronize()


def test_stateful_matmul_alternating_streams_keeps_every_result():
    """One Matmul executed alternately on two non-blocking streams with no host sync between
    (each change of stream waits on the previous one: the workspace is never shared in flight);
    every result equals the float64 reference, and free() needs no device synchronisation."""
    M, K, N = 1024, 4096, 512  # a long K: split-K algorithms that use the workspace qualify
    ha = RNG.standard_normal((M, K)).astype(np.float32)
    hb = RNG.standard_normal((K, N)).astype(np.float32)
    hbias = RNG.standard_normal(N).astype(np.float32)
    a, b, bias = cp.asarray(ha), cp.asarray(hb), cp.asarray(hbias)
    streams = [cp.cuda.Stream(non_blocking=True) for _ in range(2)]
    want, _ = reference(ha, hb, epilog=E.RELU_BIAS, epilog_inputs={"bias": hbias})
    mm = Matmul(a, b, options={"device_id": 0})
    mm.plan(epilog=E.RELU_BIAS, epilog_inputs={"bias": bias})
    outs = [mm.execute(stream=streams[i % 2]) for i in range(24)]
    mm.free()
    for s in streams:
        s.synchronize()
    for i, d in enumerate(outs):
        err = float(np.max(np.abs(d.get() - want)) / np.max(np.abs(want)))
        assert err < TOL["float32"] * 10, f"execute {i} on stream {i % 2}: rel. err {err:.2e}"
