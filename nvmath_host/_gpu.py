# SPDX-License-Identifier: Apache-2.0
"""The CUDA runtime as nvmath_host uses it: cuBLASLt handles, devices, pointer alignment.

Other modules call these through the module (``_gpu.handle(...)``), so that a test or a
CPU-only benchmark can replace them in one place.
"""

from __future__ import annotations

import threading

import mathdx_operands

from . import _cublaslt as lt

#: None: ask the driver (:func:`mathdx_operands.gpu_available`); True/False: what a test or a
#: CPU-only benchmark pretends
PRETEND: bool | None = None


def available() -> bool:
    """Whether a CUDA device can be used here (``PRETEND`` when a test or benchmark set it)."""
    return mathdx_operands.gpu_available() if PRETEND is None else PRETEND


_handles: dict[int, lt.Handle] = {}
_handles_lock = threading.Lock()


def handle(device: int) -> lt.Handle:
    """The cuBLASLt handle of ``device`` (one per device and process, made on first use)."""
    h = _handles.get(device)
    if h is None:
        with _handles_lock:
            h = _handles.get(device)
            if h is None:
                h = _handles[device] = lt.Handle()
    return h


_DEVICE_COUNT = None


def device_count() -> int:
    """How many CUDA devices there are (asked once)."""
    global _DEVICE_COUNT
    if _DEVICE_COUNT is None:
        _DEVICE_COUNT = check(rt().cudaGetDeviceCount(), "cudaGetDeviceCount")
    return _DEVICE_COUNT


#: alignment by a pointer's 4 low bits: 16 (all zero), 1, 2, 1, 4, 1, 2, 1, 8, 1, 2, ...
ALIGN16 = (16,) + tuple(i & -i for i in range(1, 16))


def alignment(ptr: int) -> int:
    """Alignment of ``ptr`` in bytes, capped at 16 (the most any cuBLASLt kernel needs)."""
    return ALIGN16[ptr & 15]


def rt():
    """``cuda.bindings.runtime`` (imported on first use)."""
    from cuda.bindings import runtime

    return runtime


def check(result, call):
    """The value(s) of a ``cuda.bindings.runtime`` call, or RuntimeError naming ``call``."""
    err = result[0]
    if int(err) != 0:
        raise RuntimeError(f"{call} failed: {err}")
    return result[1] if len(result) == 2 else result[1:]


def device_attribute(name: str, device: int) -> int:
    """``cudaDeviceGetAttribute(cudaDevAttr<name>, device)``."""
    r = rt()
    attr = getattr(r.cudaDeviceAttr, "cudaDevAttr" + name)
    return check(r.cudaDeviceGetAttribute(attr, device), "cudaDeviceGetAttribute")


def current_device() -> int:
    """The calling thread's current device."""
    return check(rt().cudaGetDevice(), "cudaGetDevice")


class DeviceScope:
    """Make ``device`` current for the block (cheap when it already is)."""

    __slots__ = ("device", "prev")

    def __init__(self, device):
        self.device = device
        self.prev = None

    def __enter__(self):
        r = rt()
        cur = check(r.cudaGetDevice(), "cudaGetDevice")
        if cur != self.device:
            self.prev = cur
            check(r.cudaSetDevice(self.device), "cudaSetDevice")
        return self

    def __exit__(self, *exc):
        if self.prev is not None:
            rt().cudaSetDevice(self.prev)
            self.prev = None


class StreamOrder:
    """Keeps a plan's own device buffers (the cuBLASLt workspace) used by one stream at a time.

    ``stream`` is the stream the plan last ran on (at first: the one its workspace was allocated
    on). :meth:`switch_to` a different stream records one reusable event on the previous stream
    and makes the new one wait for it (``cudaStreamWaitEvent``: no host synchronisation), so work
    enqueued there starts after everything enqueued before on the previous one. Switching back
    to the allocating stream before freeing the workspace returns it to that stream's pool in
    the right order.
    """

    __slots__ = ("stream", "_event")

    def __init__(self, stream: int):
        self.stream = stream
        self._event = None

    def switch_to(self, stream: int) -> bool:
        """Order ``stream`` after the previous one; False (no call) when it is the same stream."""
        if stream == self.stream:
            return False
        r = rt()
        if self._event is None:
            self._event = check(
                r.cudaEventCreateWithFlags(r.cudaEventDisableTiming), "cudaEventCreateWithFlags"
            )
        check(r.cudaEventRecord(self._event, self.stream), "cudaEventRecord")
        check(r.cudaStreamWaitEvent(stream, self._event, 0), "cudaStreamWaitEvent")
        self.stream = stream
        return True

    def destroy(self) -> None:
        """Release the event (work already ordered by it stays ordered)."""
        if self._event is not None:
            ev, self._event = self._event, None
            rt().cudaEventDestroy(ev)
