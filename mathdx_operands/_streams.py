# SPDX-License-Identifier: Apache-2.0
"""The stream a call runs on: ``None`` resolved to the current stream of the operand's package."""

from __future__ import annotations

from ._cuda import simulator
from ._handles import stream_handle
from ._packages import current_stream

_STREAM_MODULES = ("numba", "cupy", "torch")


class Stream:
    """The stream a call runs on.

    Parameters
    ----------
    handle : int
        Its ``cudaStream_t`` (0: the legacy default stream).
    numba_stream : numba stream, optional
        The Numba stream object for ``handle`` when the caller gave one; otherwise it is made
        on first use of :attr:`numba` (copies and numba-cuda's launch need one).
    owner : object, optional
        The caller's stream object ``handle`` came from: whoever holds it keeps the handle
        valid (``kernels``' constant cache records events on its readers' streams later).
    """

    __slots__ = ("handle", "_numba", "owner")

    def __init__(self, handle: int = 0, numba_stream=None, owner=None):
        self.handle, self._numba, self.owner = int(handle), numba_stream, owner

    @property
    def numba(self):
        """Numba's stream object for :attr:`handle` (``0`` under the simulator)."""
        if self._numba is None:
            if simulator():
                return 0
            from numba import cuda

            self._numba = (
                cuda.external_stream(self.handle) if self.handle else cuda.default_stream()
            )
        return self._numba

    def synchronize(self) -> None:
        """Block the host until the work queued on the stream is done (no-op simulated)."""
        if not simulator():
            self.numba.synchronize()

    def __repr__(self) -> str:
        return f"Stream({self.handle:#x})"


def _stream_error(stream, what: str) -> TypeError:
    return TypeError(
        f"{what} must be None, a Numba/CuPy/PyTorch stream, an object with __cuda_stream__, "
        f"or a raw cudaStream_t handle (int); got {type(stream).__name__}"
    )


def resolve_stream(stream, like=None, what: str = "stream") -> Stream:
    """The :class:`Stream` a call on ``like``'s data runs on.

    Parameters
    ----------
    stream : None, int or stream object
        None: the current stream of ``like``'s package (CuPy's / torch's current stream on
        ``like``'s device, else the current device; Numba's default stream for Numba and NumPy
        arrays). Otherwise anything :func:`stream_handle` takes; a Numba stream object is kept.
    like : Operand, object with ``package`` (and ``device``), str or None
        The operand whose package decides the default (or that package's name).
    what : str
        The argument being read, named in the error.

    Returns
    -------
    Stream
        Under the simulator always ``Stream()`` (the argument is still type-checked).

    Raises
    ------
    TypeError
        ``stream`` is not a stream (``bool`` included).
    """
    if simulator():
        if not (
            stream is None
            or hasattr(stream, "__cuda_stream__")
            or (isinstance(stream, int) and not isinstance(stream, bool))
            or type(stream).__module__.startswith(_STREAM_MODULES)
        ):
            raise _stream_error(stream, what)
        return Stream()
    if stream is None:
        pkg = like if isinstance(like, str) or like is None else getattr(like, "package", None)
        if pkg in ("cupy", "torch"):
            return Stream(current_stream(pkg, getattr(like, "device", None)))
        from numba import cuda

        default = cuda.default_stream()
        return Stream(stream_handle(default), default)
    try:
        handle = stream_handle(stream, what)
    except TypeError:
        raise _stream_error(stream, what) from None
    if isinstance(stream, int):
        return Stream(handle)
    if not hasattr(stream, "__cuda_stream__") and type(stream).__module__.startswith("numba"):
        return Stream(handle, stream, stream)
    return Stream(handle, owner=stream)
