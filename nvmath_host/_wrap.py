# SPDX-License-Identifier: Apache-2.0
"""The caller's arrays as operands: ``a``, ``b``, ``c`` and the epilog inputs by name."""

from __future__ import annotations

import numpy as np

from mathdx_operands import UINT8, Operand, pointer_device, wrap


def input_what(key) -> str:
    """``epilog_inputs[key]`` (how errors name the input), or TypeError for a non-str key."""
    if not isinstance(key, str):
        raise TypeError(
            f"epilog_inputs: keys are input names (str), e.g. 'bias', 'relu_aux', 'gelu_aux'; "
            f"got {key!r}"
        )
    return f"epilog_inputs[{key!r}]"


#: the epilog input that is a scale (of an FP8 gelu_aux), not an array: Matmul.plan takes it
AUX_SCALE_INPUT = "aux_quantization_scale"

# the ``what`` of the usual epilog inputs, made once (matmul() wraps them at each call)
_INPUT_WHAT = {k: f"epilog_inputs[{k!r}]" for k in ("bias", "relu_aux", "gelu_aux")}


def wrap_inputs(epilog_inputs) -> dict[str, Operand]:
    """``epilog_inputs`` (a dict or None) wrapped, by name."""
    if epilog_inputs is None:
        return {}
    if not isinstance(epilog_inputs, dict):
        raise TypeError(f"epilog_inputs: expected a dict; got {type(epilog_inputs).__name__}")
    out = {}
    for k, v in epilog_inputs.items():
        if k == AUX_SCALE_INPUT:
            continue
        what = _INPUT_WHAT.get(k) or input_what(k)
        out[k] = wrap_aux(v, what) if k == "relu_aux" else wrap(v, what)
    return out


def wrap_call(a, b, c, epilog_inputs):
    """``(a, b, c, inputs)`` of a call wrapped (``c`` None when not given)."""
    oa, ob = wrap(a, "a", conj=True), wrap(b, "b", conj=True)
    oc = wrap(c, "c") if c is not None else None
    return oa, ob, oc, wrap_inputs(epilog_inputs)


def wrap_aux(v, what) -> Operand:
    """Wrap a relu_aux bit-mask (uint8, which is no matmul dtype)."""
    pkg = type(v).__module__.split(".", 1)[0]
    if isinstance(v, np.ndarray) or pkg in ("cupy", "numba"):
        if isinstance(v, np.ndarray):
            dt, ptr, shape, st, dev, pk = v.dtype, v.ctypes.data, v.shape, v.strides, None, "numpy"
        else:
            cai = v.__cuda_array_interface__
            dt = np.dtype(cai["typestr"])
            ptr, shape = cai["data"][0], tuple(cai["shape"])
            st = cai.get("strides")
            if st is None:
                st = tuple(x * dt.itemsize for x in _c_strides_elems(shape))
            dev = v.device.id if pkg == "cupy" else pointer_device(ptr)
            pk = pkg
        if dt != np.uint8:
            raise ValueError(f"{what}: dtype {dt}; expected uint8 (a bit-mask)")
        return Operand(v, pk, ptr, shape, tuple(st), UINT8, dev)
    if pkg == "torch":
        if str(v.dtype) != "torch.uint8":
            raise ValueError(f"{what}: dtype {v.dtype}; expected uint8 (a bit-mask)")
        return Operand(v, "torch", v.data_ptr(), tuple(v.shape), v.stride(), UINT8, v.get_device())
    return wrap(v, what)


def _c_strides_elems(shape):
    out, acc = [], 1
    for n in reversed(shape):
        out.append(acc)
        acc *= max(n, 1)
    return tuple(reversed(out))
