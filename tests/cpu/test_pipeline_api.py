# SPDX-License-Identifier: Apache-2.0
"""Device/tile pipelines without a GPU: the host checks of DevicePipeline (each bad argument
named), Matmul's pipeline flags, typing errors in kernels, the launch extension, and kernels
that link to sm_90 cubins (2-D and 3-D arrays)."""

from __future__ import annotations

import pickle

import numpy as np
import pytest
from numba import cuda, types
from numba.core.errors import TypingError
from numba.cuda.typing.typeof import typeof

from nvmath_device import DevicePipeline, Matmul, TilePipeline, aot
from nvmath_device._numba.pipeline_numba import DevicePipelineType, PipelineArguments
from nvmath_device.cublasdx_numba import pipeline_extensions
from tests import pipeline_kernels as pk


class Dev:
    """A metadata-only device array (what __cuda_array_interface__ gives; no GPU needed)."""

    def __init__(self, shape, dtype, order="C", ptr=1 << 20, strides=None):
        dt = np.dtype(dtype)
        if strides is None:
            strides = np.empty(shape, dt, order=order).strides
        self.__cuda_array_interface__ = {"shape": tuple(shape), "typestr": dt.str, "data": (ptr, False),
                                         "strides": tuple(strides), "version": 3}


MM = pk.descriptor(sm=90)  # 32 x 32 x 16 f16/f16/f32, row/col/row, 64 threads, alignment 16


def _pipeline(m=128, n=128, k=64, depth=2, mm=MM, **kw):
    a = kw.pop("a", Dev((m, k), np.float16))
    b = kw.pop("b", Dev((k, n), np.float16, "F"))
    return mm.suggest_device_pipeline(depth, a, b)


def test_attributes_follow_the_tile_and_depth():
    """buffer_size = depth stages of cuBLASDx's suggested shared A and B tiles (each 128-byte
    aligned), block_dim = the Matmul's, K slices = K / k; no device-side state."""
    dp = _pipeline(depth=3)
    stage = -(-MM.suggest_layout_smem_a().cosize * 2 // 128) * 128 + -(-MM.suggest_layout_smem_b().cosize * 2 // 128) * 128
    assert dp.buffer_size == 3 * stage and dp.buffer_alignment == 128
    assert tuple(dp.block_dim) == (64, 1, 1) and dp.k_tiles == 4
    assert dp.a_strides == (64, 1) and dp.b_strides == (1, 64)
    assert (dp.storage_bytes, dp.storage_alignment) == (0, 1)
    assert isinstance(TilePipeline(dp), TilePipeline)


@pytest.mark.parametrize("kwargs, err, match", [
    (dict(depth=0), ValueError, "pipeline_depth must be an int from 1 to 16"),
    (dict(depth=2.0), ValueError, "pipeline_depth must be an int"),
    (dict(a=np.zeros((128, 64), np.float16)), TypeError, "a must be a device array"),
    (dict(a=Dev((128, 64), np.float32)), TypeError, "a holds float32, but A of this Matmul is float16"),
    (dict(a=Dev((128,), np.float16)), ValueError, "a must be 2-D"),
    (dict(a=Dev((128, 64, 2), np.float16)), ValueError, "a and b must both be 2-D or both 3-D"),
    (dict(b=Dev((32, 128), np.float16, "F")), ValueError, "their K differ"),
    (dict(m=100), ValueError, r"M \(a.shape\[0\]\) = 100 must be a positive multiple of the tile's m = 32"),
    (dict(a=Dev((128, 64), np.float16, "F")), ValueError, "a is row_major in this Matmul, so its stride along axis 1"),
    (dict(b=Dev((64, 128), np.float16, "C")), ValueError, "b is col_major in this Matmul, so its stride along axis 0"),
    (dict(a=Dev((128, 64), np.float16, ptr=(1 << 20) + 8)), ValueError, "a must be aligned as the Matmul's alignment"),
    (dict(a=Dev((128, 60), np.float16, strides=(120, 2)), b=Dev((60, 128), np.float16, "F"), k=60), ValueError,
     "must be a positive multiple of the tile's k = 16"),
    (dict(depth=16, mm=pk.descriptor(tile=(128, 128, 64), sm=90, block_size=128)), ValueError,
     "pipeline_depth=16 needs .* bytes of shared memory"),
])
def test_bad_arguments_are_named(kwargs, err, match):
    with pytest.raises(err, match=match):
        _pipeline(**kwargs)


def test_pipelines_need_with_pipeline():
    mm = Matmul(size=(32, 32, 16), precision=(np.float16, np.float16, np.float32), arrangement=("row_major",
                "col_major", "row_major"), block_size=64, sm=90)
    with pytest.raises(ValueError, match="with_pipeline=True"):
        _pipeline(mm=mm)
    with pytest.raises(TypeError, match="mm must be a Matmul"):
        DevicePipeline(object(), 2, None, None)


def test_matmul_pipeline_flags_are_part_of_the_descriptor():
    """with_pipeline / enable_input_streaming / static_block_dim: checked, compared, hashed,
    pickled, shown; static_block_dim changes the generated code (and its symbol)."""
    kw = dict(size=(32, 32, 16), precision=np.float32, block_size=64, sm=90)
    plain, piped = Matmul(**kw), Matmul(**kw, with_pipeline=True)
    assert plain != piped and hash(plain) != hash(piped) and not plain.with_pipeline and piped.with_pipeline
    assert pickle.loads(pickle.dumps(piped)) == piped and "with_pipeline=True" in repr(piped)
    static = Matmul(**kw, static_block_dim=True)
    from nvmath_device._build.gemm_codegen import _description

    assert "StaticBlockDim" in _description(static, (64, 1, 1)) and "StaticBlockDim" not in _description(plain, (64, 1, 1))
    assert static.symbol != plain.symbol
    with pytest.raises(TypeError, match="static_block_dim must be True or False"):
        Matmul(**kw, static_block_dim=1)


def test_static_block_dim_gemm_compiles():
    """cuBLASDx 0.4's experimental StaticBlockDim with the descriptor's BlockDim: NVRTC compiles it."""
    mm = Matmul(size=(16, 16, 16), precision=np.float32, block_size=64, static_block_dim=True, sm=90)
    assert mm.ltoir()


def test_launch_extension_passes_the_two_addresses():
    dp = _pipeline()
    ty, val = PipelineArguments().prepare_args(typeof(dp), dp)
    assert ty == types.UniTuple(types.uint64, 2) and val == (1 << 20, 1 << 20)
    assert PipelineArguments().prepare_args(types.int32, 3) == (types.int32, 3)
    assert isinstance(pipeline_extensions[0], PipelineArguments)


def test_pipeline_type_is_everything_but_the_addresses():
    t1 = typeof(_pipeline())
    t2 = typeof(_pipeline(a=Dev((128, 64), np.float16, ptr=1 << 30)))
    assert isinstance(t1, DevicePipelineType) and t1 == t2  # another address: the same compiled kernel
    assert typeof(_pipeline(depth=3)) != t1 and typeof(_pipeline(k=128)) != t1


def _compile(kernel, dp):
    args = (types.float64, types.float64, types.float32[:, ::1], types.float32[:, ::1], typeof(dp))
    return aot.compile_kernel(kernel, args, sm=90)


def test_pipeline_kernel_links_for_sm90():
    """get_tile / execute / the accumulator epilogue: the pipeline unit and the tensor units link;
    no spills."""
    dp = _pipeline(depth=2)
    out = _compile(pk.pipeline_gemm(MM, 128), dp)
    assert any(n.startswith("nvmathdx_pipeline_") for n in out.linked) and out.frame_bytes == 0


def test_3d_pipeline_kernel_with_reset_tile_links_for_sm90():
    """nvmath-python's 3-D pattern: column-major A (M x K x steps), B made by moveaxis of a
    C-order (steps, K, N) array, (tile, batch) indices and reset_tile."""
    mm = pk.descriptor(arrangement=("col_major", "row_major", "row_major"), sm=90)
    m = n = k = 64
    a = Dev((m, k, 2), np.float16, "F")
    b = Dev((k, n, 2), np.float16, strides=(n * 2, 2, k * n * 2))
    dp = mm.suggest_device_pipeline(3, a, b)
    assert dp.a_strides == (1, m, m * k) and dp.b_strides == (n, 1, k * n)
    out = _compile(pk.pipeline_gemm_3d(mm, n, 2), dp)
    assert any(n.startswith("nvmathdx_pipeline_") for n in out.linked)


def _typing_error(body, dp, match):
    with pytest.raises(TypingError, match=match):
        aot.compile_kernel(body, (types.float32[:, ::1], typeof(dp)), sm=90)


def test_typing_errors_name_the_argument():
    dp = _pipeline()

    def bad_tuple(c, p):
        smem = cuda.shared.array(shape=(0,), dtype=np.byte, alignment=p.buffer_alignment)
        p.get_tile(smem, (0, 1), 0)

    def bad_smem(c, p):
        p.get_tile(c, 0, 0)

    def bad_acc(c, p):
        smem = cuda.shared.array(shape=(0,), dtype=np.byte, alignment=p.buffer_alignment)
        t = p.get_tile(smem, 0, 0)
        t.execute(c)

    def other_mm(c, p):
        smem = cuda.shared.array(shape=(0,), dtype=np.byte, alignment=p.buffer_alignment)
        t = p.get_tile(smem, 0, 0)
        t.execute(OTHER.get_accumulator())

    _typing_error(bad_tuple, dp, r"blockIdx_x is a \(tile, batch\) pair, but the pipeline's arrays are 2-D")
    _typing_error(bad_smem, dp, "smem must be a 1-D shared array")
    _typing_error(bad_acc, dp, r"execute\(accumulator\) takes one accumulator")
    _typing_error(other_mm, dp, "the accumulator belongs to another Matmul")


OTHER = pk.descriptor(tile=(32, 32, 32), sm=90)


def test_device_methods_outside_kernels_say_so():
    dp = _pipeline()
    with pytest.raises(RuntimeError, match="get_tile is a device function"):
        dp.get_tile(None, 0, 0)
    with pytest.raises(RuntimeError, match="TilePipeline.execute is a device function"):
        TilePipeline(dp).execute(None)


def test_prepare_compiles_pipeline_units_together(tmp_path, monkeypatch):
    """nvmath_device.prepare takes DevicePipelines: their K-loop units (as a kernel on the suggested
    accumulator links them) are built in the same parallel batch as the descriptors'."""
    import nvmath_device
    from nvmath_device._build import cache, parallel, pipeline_codegen
    from nvmath_device._pipeline import PipelineOp

    monkeypatch.setenv("NUMBA_MATHDX_CACHE_DIR", str(tmp_path))
    monkeypatch.setattr(cache, "_memory", {})  # units other tests built in this process: forgotten
    batches = []
    real_run = parallel._run

    def run(todo, workers):  # in this process (the test's subject is what is built, not where)
        batches.append([kind for kind, _ in todo])
        real_run(todo, 1)

    monkeypatch.setattr(parallel, "_run", run)
    dps = [_pipeline(depth=2), _pipeline(depth=3), _pipeline(depth=3)]  # two distinct units
    nvmath_device.prepare(*dps)
    assert batches == [["tensor", "tensor"]]
    for dp in dps:
        op = PipelineOp(dp.mm, dp._spec)
        assert cache.get(pipeline_codegen.pipeline_key(op.mm, op.spec)) == op.ltoir()
    nvmath_device.prepare(*dps)  # all cached: nothing to build
    assert batches[-1] == []
    with pytest.raises(TypeError, match="argument 1 is a str"):
        nvmath_device.prepare(dps[0], "pipeline")
