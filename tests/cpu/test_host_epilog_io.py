# SPDX-License-Identifier: Apache-2.0
"""The epilog table drives the inputs and outputs: one handler per kind (``_epilog_io``).

Each test builds a ``_problem.Problem`` (no GPU, no CUDA call) and checks the handlers it
bound: which class handles each input/output, the cuBLASLt attributes each sets, the output
arrays it describes.
"""

import numpy as np
import pytest

import mathdx_operands
from nvmath_host import MatmulEpilog, MatmulOptions
from nvmath_host import _epilog_io as io
from nvmath_host._cublaslt import MatmulDescAttribute as A
from nvmath_host._problem import Problem
from nvmath_host._wrap import wrap_inputs
from nvmath_host.epilogs import DATA, EPILOGS, relu_aux_shape

E = MatmulEpilog
M, K, N = 6, 4, 200


def problem(epilog, inputs=None, a=None, b=None, **opts):
    w = mathdx_operands.wrap
    a = np.zeros((M, K), np.float32) if a is None else a
    b = np.zeros((K, N), np.float32) if b is None else b
    ins = {k: _wrap_input(k, v) for k, v in (inputs or {}).items()}
    return Problem(w(a, "a"), w(b, "b"), None, MatmulOptions(**opts), epilog, ins, {})


def _wrap_input(k, v):
    return wrap_inputs({k: v})[k]


def inputs_for(spec, order="C"):
    out = {}
    for name in spec.inputs:
        if name == "bias":
            out[name] = np.zeros(N if order == "C" else (M, 1), np.float32)
        elif name == "relu_aux":
            out[name] = np.zeros(relu_aux_shape(M, N, order), np.uint8)
        else:
            out[name] = np.zeros((M, N), np.float32)
    return out


@pytest.mark.parametrize("epilog", list(E), ids=lambda e: e.name)
def test_every_epilog_gets_one_handler_per_input_and_output_of_its_kind(epilog):
    spec = EPILOGS[epilog]
    a = np.asfortranarray(np.zeros((M, K), np.float32))  # BGRADA needs a column-major a
    p = problem(epilog, inputs_for(spec), a=a)
    assert list(p.input_handlers) == list(spec.inputs)
    for name, h in p.input_handlers.items():
        assert type(h) is io.INPUTS[DATA[name].kind] and h.name == name
    assert [h.name for h in p.output_handlers] == list(spec.outputs)
    for h in p.output_handlers:
        assert type(h) is io.OUTPUTS[DATA[h.name].kind]
        assert h.out.name == h.name and h.out.attr == h.pointer_attr
    assert [o.name for o in p.outputs] == list(spec.outputs)


def test_bit_mask_output_and_input_agree_on_cublaslt_leading_dimension():
    p = problem(E.RELU_AUX)
    (h,) = p.output_handlers
    rows, cols = relu_aux_shape(M, N, "C")  # (6, 32): 200 bits padded to 256 per row
    assert h.out.shape == (rows, cols) and h.out.strides == (cols, 1)
    assert h.attrs == {
        int(A.EPILOGUE_AUX_LD): cols * 8,
        int(A.EPILOGUE_AUX_BATCH_STRIDE): M * cols * 8,
    }
    q = problem(E.DRELU, {"relu_aux": np.zeros((rows, cols), np.uint8)})
    ld = int(A.EPILOGUE_AUX_LD)  # what RELU_AUX wrote, DRELU reads (in bits)
    assert q.input_handlers["relu_aux"].attrs[ld] == h.attrs[ld] == cols * 8


def test_gelu_aux_output_pads_its_leading_dimension_not_its_shape():
    p = problem(E.GELU_AUX, result_order="F")
    (h,) = p.output_handlers
    ld = 8  # M = 6 padded to a multiple of 8
    assert h.out.shape == (M, N) and h.out.strides == (1, ld) and h.out.nelems == N * ld
    assert h.attrs[int(A.EPILOGUE_AUX_LD)] == ld


def test_bias_vector_sets_its_batch_stride_and_bgrad_its_length():
    bias = np.zeros((3, 1, N), np.float32)
    p = problem(E.BIAS, {"bias": bias}, a=np.zeros((3, M, K), np.float32))
    assert p.input_handlers["bias"].attrs == {int(A.BIAS_BATCH_STRIDE): N}
    q = problem(E.BGRADB, b=np.zeros((K, N), np.float32))
    (h,) = q.output_handlers
    assert h.out.shape == (N,) and h.attrs == {int(A.BIAS_BATCH_STRIDE): N}
    assert q.lt_epilog.name == "BGRADA"  # handed over transposed: sides swap


def test_matrix_input_only_hints_the_order_and_the_bias_binds_it():
    assert (
        io.MatrixIn.order("gelu_aux", _wrap_input("gelu_aux", np.zeros((M, N), order="F")), M, N)
        == "F"
    )
    assert not io.MatrixIn.binds_order and io.VectorIn.binds_order
    with pytest.raises(ValueError, match=r"^epilog_inputs\['bias'\]: shape \(5,\); expected"):
        io.VectorIn.order("bias", _wrap_input("bias", np.zeros(5, np.float32)), M, N)


def test_matrix_shape_of_the_table_is_the_bit_mask_format():
    for m in (1, 7, 128, 129, 300):
        for n in (1, 9, 128, 257):
            for order in "CF":
                assert DATA["relu_aux"].matrix_shape(m, n, order) == (
                    (m, -(-n // 128) * 16) if order == "C" else (-(-m // 128) * 16, n)
                )
                assert DATA["gelu_aux"].matrix_shape(m, n, order) == (m, n)
