# SPDX-License-Identifier: Apache-2.0
"""The operand and stream layer shared by nvmath_host and kernels.

Arrays of NumPy, CuPy, PyTorch and Numba (and any object exposing
``__cuda_array_interface__``) are recognised from their type and protocol, read without copies
(pointer, shape, strides, dtype, device, owner) and results are made as the caller's kind of
array on the caller's stream. Streams are read from ``__cuda_stream__``, CuPy / torch / Numba
stream objects or raw ``cudaStream_t`` integers.

Importing this package imports neither CuPy nor torch (nor numba): an adapter is chosen from
the object and uses the package the object came from, which is then already imported. It
imports nothing of nvmath_device, nvmath_host or kernels.

Modules: ``_cuda`` (simulator switch, CUDA context, devices), ``_dtypes`` (element types),
``_arrays`` (recognising and reading arrays), ``_packages`` (per-package adapters, new arrays),
``_streams`` (stream handles and resolution).
"""

from ._arrays import (
    Operand,
    c_strides,
    caller_kind,
    check_torch_values,
    host_array,
    memory_order_bytes,
    on_device,
    package_of,
    wrap,
)
from ._cuda import current_context, ensure_context, gpu_available, pointer_device, simulator
from ._dtypes import (
    DTYPES,
    UINT8,
    DType,
    dtype_from_numpy,
    dtype_of_name,
    numpy_dtype,
    numpy_dtype_of_torch,
    torch_dtype,
    torch_dtype_name,
)
from ._handles import StreamProtocol, cupy_stream, stream_handle
from ._packages import Package, current_stream, device_empty, package
from ._streams import Stream, resolve_stream

__all__ = [
    # arrays
    "Operand",
    "wrap",
    "package_of",
    "caller_kind",
    "check_torch_values",
    "on_device",
    "c_strides",
    "memory_order_bytes",
    "host_array",
    # element types
    "DType",
    "DTYPES",
    "UINT8",
    "dtype_of_name",
    "dtype_from_numpy",
    "numpy_dtype",
    "numpy_dtype_of_torch",
    "torch_dtype",
    "torch_dtype_name",
    # packages and results
    "Package",
    "package",
    "current_stream",
    "device_empty",
    # streams
    "Stream",
    "stream_handle",
    "cupy_stream",
    "StreamProtocol",
    "resolve_stream",
    # CUDA
    "simulator",
    "current_context",
    "ensure_context",
    "gpu_available",
    "pointer_device",
]
