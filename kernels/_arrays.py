# SPDX-License-Identifier: Apache-2.0
"""Array and stream adapters for the fused kernels: CuPy / PyTorch / Numba device arrays (zero
copy through ``__cuda_array_interface__``), NumPy arrays (copied to the device and back), and
the streams those packages use. Results come back as the caller's kind of array."""

from __future__ import annotations

import os

import numpy as np


def simulator() -> bool:
    """True when numba-cuda's CUDA simulator is enabled (NUMBA_ENABLE_CUDASIM)."""
    return os.environ.get("NUMBA_ENABLE_CUDASIM", "0") not in ("", "0")


def canonical(arr: np.ndarray) -> np.ndarray:
    """C-contiguous with the canonical strides: NumPy calls ``x[None, :]`` (strides (0, 4))
    C-contiguous, numba's device arrays do not, and then refuse views of another dtype."""
    arr = np.ascontiguousarray(arr)
    return arr.reshape(-1).reshape(arr.shape)


class Operand:
    """One input array on the device plus what is needed to hand results back."""

    def __init__(self, name, obj, dtypes, ndim, stream):
        self.name = name
        self.obj = obj
        if isinstance(obj, np.ndarray):
            arr = obj
            self.kind = "numpy"
        elif simulator() and type(obj).__name__ == "FakeCUDAArray":  # the simulator's device arrays
            arr = obj
            self.kind = "numba"
        elif hasattr(obj, "__cuda_array_interface__"):
            arr = obj
            mod = type(obj).__module__.split(".")[0]
            self.kind = mod if mod in ("cupy", "torch") else "numba"
        else:
            raise TypeError(
                f"{name} must be a NumPy array or a GPU array exposing __cuda_array_interface__ "
                f"(CuPy, PyTorch CUDA tensor, Numba device array); got {type(obj).__name__}"
            )
        shape, dtype = tuple(arr.shape), np.dtype(arr.dtype if self.kind != "torch" else _torch_dtype(arr))
        if dtype not in dtypes:
            raise TypeError(f"{name} must have dtype {' or '.join(d.name for d in dtypes)}, got {dtype.name}")
        if len(shape) not in ndim:
            raise ValueError(f"{name} must have {' or '.join(map(str, ndim))} dimension(s), got shape {shape}")
        self.shape, self.dtype = shape, dtype
        from numba import cuda

        if simulator():
            self.dev = np.ascontiguousarray(arr) if self.kind == "numpy" else arr
        elif self.kind == "numpy":
            self.dev = cuda.to_device(canonical(arr), stream=stream)
        else:
            # sync=False: numba would otherwise synchronise the host with the producer's stream on
            # every call; the kernel runs on the caller's (by default the producer's) stream instead
            self.dev = cuda.as_cuda_array(arr, sync=False)
            if not self.dev.is_c_contiguous():
                raise ValueError(f"{name} must be C-contiguous (got strides {self.dev.strides})")


def _torch_dtype(t):
    import torch

    return {torch.float32: np.float32, torch.float64: np.float64, torch.complex64: np.complex64,
            torch.complex128: np.complex128}.get(t.dtype, np.void)


def resolve_stream(stream, like: Operand):
    """A numba stream for ``stream`` (None: the current stream of ``like``'s package)."""
    from numba import cuda

    if simulator():
        if not (stream is None or hasattr(stream, "__cuda_stream__") or isinstance(stream, int)
                or type(stream).__module__.startswith(("numba", "cupy", "torch"))):
            raise TypeError("stream must be None, a Numba/CuPy/PyTorch stream, an object with __cuda_stream__, "
                            f"or a raw cudaStream_t handle (int); got {type(stream).__name__}")
        return 0
    if stream is None:
        if like.kind == "cupy":
            import cupy

            return cuda.external_stream(cupy.cuda.get_current_stream().ptr)
        if like.kind == "torch":
            import torch

            return cuda.external_stream(torch.cuda.current_stream().cuda_stream)
        return cuda.default_stream()
    if hasattr(stream, "__cuda_stream__"):
        _, handle = stream.__cuda_stream__()
        return cuda.external_stream(int(handle))
    if type(stream).__module__.startswith("numba"):
        return stream
    for attr in ("ptr", "cuda_stream"):  # CuPy, PyTorch
        if hasattr(stream, attr):
            return cuda.external_stream(int(getattr(stream, attr)))
    if isinstance(stream, int) and not isinstance(stream, bool):
        return cuda.external_stream(stream) if stream else cuda.default_stream()
    raise TypeError(
        "stream must be None, a Numba/CuPy/PyTorch stream, an object with __cuda_stream__, or a raw "
        f"cudaStream_t handle (int); got {type(stream).__name__}"
    )


def raw_handle(stream) -> int:
    """The cudaStream_t of a numba stream, as an int (0: the legacy default stream)."""
    h = getattr(stream, "handle", 0)
    try:
        return int(h)
    except TypeError:
        return int(getattr(h, "value", 0) or 0)


class Output:
    """A result array allocated by the caller's package (its pool, on the stream), seen by numba."""

    def __init__(self, shape, dtype, like: Operand, stream):
        from numba import cuda

        self.like = like
        if simulator():
            self.obj = np.full(shape, np.nan, dtype=dtype) if np.dtype(dtype).kind in "fc" else np.zeros(shape, dtype)
            self.dev = self.obj
        elif like.kind == "cupy":
            import cupy

            with cupy.cuda.ExternalStream(raw_handle(stream)):
                self.obj = cupy.empty(shape, dtype=dtype)
            self.dev = cuda.as_cuda_array(self.obj, sync=False)
        elif like.kind == "torch":
            import torch

            tdt = {np.dtype(np.float32): torch.float32, np.dtype(np.float64): torch.float64,
                   np.dtype(np.complex64): torch.complex64, np.dtype(np.complex128): torch.complex128,
                   np.dtype(np.int32): torch.int32}[np.dtype(dtype)]
            with torch.cuda.stream(torch.cuda.ExternalStream(raw_handle(stream))):
                self.obj = torch.empty(shape, dtype=tdt, device="cuda")
            self.dev = cuda.as_cuda_array(self.obj, sync=False)
        else:
            self.obj = self.dev = cuda.device_array(shape, dtype=dtype, stream=stream)

    def result(self, stream, shape=None):
        """The caller's kind of array (NumPy: copied back, blocking), optionally reshaped."""
        if self.like.kind == "numpy":
            out = np.asarray(self.dev) if simulator() else self.dev.copy_to_host(stream=stream)
            if not simulator():
                stream.synchronize()
        else:
            out = self.obj
        return out.reshape(shape) if shape is not None else out


_consts: dict = {}


def to_device_const(arr, stream, make=None):
    """A small host array (filter spectrum, window) on the device, kept for reuse (the 32 most
    recent). With ``make``, ``arr`` is only the key (e.g. the taps) and ``make(arr)`` computes the
    array on a miss: a repeated call skips the host computation too."""
    from numba import cuda

    arr = np.ascontiguousarray(arr)
    key = (arr.tobytes(), arr.dtype.str, arr.shape, make)
    dev = _consts.pop(key, None)
    if dev is None:
        value = np.ascontiguousarray(make(arr)) if make is not None else arr
        dev = value if simulator() else cuda.to_device(value, stream=stream)
        if len(_consts) >= 32:
            _consts.pop(next(iter(_consts)))
    _consts[key] = dev
    return dev
