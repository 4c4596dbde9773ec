# SPDX-License-Identifier: Apache-2.0
"""Raw ``cudaStream_t`` handles from any package's stream object."""

from __future__ import annotations


def stream_handle(stream, what: str = "stream") -> int:
    """The raw ``cudaStream_t`` of a stream object.

    Parameters
    ----------
    stream : int or stream object
        A raw handle (``int``; ``bool`` is refused), an object with ``__cuda_stream__``
        (a method or attribute giving ``(version, handle)``), a CuPy stream (``.ptr``), a torch
        stream (``.cuda_stream``) or a Numba stream (``.handle``, a ``ctypes.c_void_p``).
    what : str
        The argument being read, named in the error.

    Returns
    -------
    int
        The handle (0: the legacy default stream).

    Raises
    ------
    TypeError
        ``stream`` is none of these.
    """
    if isinstance(stream, int) and not isinstance(stream, bool):
        return stream
    proto = getattr(stream, "__cuda_stream__", None)
    if proto is not None:
        value = proto() if callable(proto) else proto
        return int(value[1])
    for attr in ("ptr", "cuda_stream"):  # CuPy, torch
        v = getattr(stream, attr, None)
        if isinstance(v, int) and not isinstance(v, bool):
            return v
    handle = getattr(stream, "handle", None)  # Numba: a ctypes c_void_p
    if handle is not None:
        v = getattr(handle, "value", handle)
        return int(v or 0)
    raise TypeError(
        f"{what}: expected an int handle, an object with __cuda_stream__, or a CuPy, torch or "
        f"Numba stream; got {type(stream).__qualname__}"
    )


class StreamProtocol:
    """A raw ``cudaStream_t`` handle dressed in the CUDA stream protocol (``__cuda_stream__``),
    for APIs that take only such objects (CuPy 14's ``Stream.from_external``).

    Parameters
    ----------
    handle : int
        The raw handle; ``__cuda_stream__()`` gives ``(0, handle)``.
    """

    __slots__ = ("handle",)

    def __init__(self, handle: int):
        self.handle = handle

    def __cuda_stream__(self) -> tuple[int, int]:
        return (0, self.handle)


def cupy_stream(cp, handle: int):
    """A CuPy stream over a raw handle, through ``cupy.cuda.Stream.from_external`` (CuPy 14
    deprecates ``ExternalStream``).

    Parameters
    ----------
    cp : module
        The ``cupy`` module.
    handle : int
        The raw ``cudaStream_t``; CuPy does not own it, and its device is left unknown, as
        ``ExternalStream(handle)`` left it.

    Returns
    -------
    cupy.cuda.Stream
        A context that makes the stream current.
    """
    return cp.cuda.Stream.from_external(StreamProtocol(handle))
