# SPDX-License-Identifier: Apache-2.0
"""The current GPU's compute capability, read through the CUDA driver API (no numba).

The names follow nvmath-python's ``nvmath.device.common_cuda``: :class:`ComputeCapability`,
:class:`Dim3`, :func:`get_current_device_cc` and :func:`current_device_sm`.
"""

from __future__ import annotations

import functools
import numbers
from collections import namedtuple

from ._errors import DriverError

__all__ = ["ComputeCapability", "Dim3", "current_device_sm", "get_current_device_cc", "shared_memory_limit"]


class ComputeCapability(namedtuple("ComputeCapability", ("major", "minor", "arch"), defaults=("",))):
    """A GPU's compute capability, as nvmath-python 1.0's: ``major`` and ``minor`` (ints) and
    ``arch`` (``""``, or ``"a"`` / ``"f"`` for an architecture- / family-specific target), e.g.
    ``ComputeCapability(9, 0)`` for sm_90. A 3-tuple: it equals ``(9, 0, "")``, not ``(9, 0)``
    (compare ``.major`` / ``.minor``, or with another ComputeCapability)."""

    __slots__ = ()

    def __new__(cls, major, minor, arch=""):
        for name, v in (("major", major), ("minor", minor)):
            if isinstance(v, bool) or not isinstance(v, numbers.Integral):
                raise TypeError(f"ComputeCapability: {name} must be a non-negative integer, got {v!r}")
            if v < 0:
                raise ValueError(f"ComputeCapability: {name} must be a non-negative integer, got {v}")
        if arch not in ("", "a", "f"):
            raise ValueError(f"ComputeCapability: arch must be '', 'a' or 'f', got {arch!r}")
        return super().__new__(cls, int(major), int(minor), arch)

    @classmethod
    def _make(cls, iterable):
        return cls(*iterable)

    @property
    def integer(self) -> int:
        """``major * 100 + minor * 10``: 900 for sm_90 (nvmath-python's ``integer``)."""
        return self.major * 100 + self.minor * 10

    def __str__(self) -> str:
        return f"{self.major}.{self.minor}{self.arch}"


class Dim3(namedtuple("Dim3", ("x", "y", "z"), defaults=(1, 1, 1))):
    """A block or grid shape ``(x, y, z)`` (ints; ``y`` and ``z`` default to 1), as nvmath-python's.

    A tuple: a kernel launch takes it (``kernel[grid, fft.block_dim, 0, smem](...)``), and it
    unpacks and compares like ``(x, y, z)``. ``FFT.block_dim`` and ``Matmul.block_dim`` return one.

    Each of ``x``, ``y``, ``z`` must be a positive integer (Python or NumPy integer, stored as a
    Python int): anything else is a TypeError (not an integer: floats, bools, strings ...) or a
    ValueError (zero or negative) naming the argument.
    """

    __slots__ = ()

    def __new__(cls, x=1, y=1, z=1):
        return super().__new__(cls, *(_dim(name, v) for name, v in (("x", x), ("y", y), ("z", z))))

    @classmethod
    def _make(cls, iterable):
        return cls(*iterable)


def _dim(name: str, value) -> int:
    """``value`` of Dim3's ``name`` as a positive Python int (TypeError / ValueError otherwise)."""
    if isinstance(value, bool) or not isinstance(value, numbers.Integral):
        raise TypeError(f"Dim3: {name} must be a positive integer, got {value!r} "
                        f"({type(value).__name__})")
    if value < 1:
        raise ValueError(f"Dim3: {name} must be a positive integer (>= 1), got {int(value)}")
    return int(value)


def _driver():
    """``cuda.bindings.driver`` (a function, so that tests can hand in a fake driver)."""
    from cuda.bindings import driver

    return driver


def current_device(driver):
    """``(err, device)``: the device of the current context, else device 0.

    ``cuCtxGetDevice`` is only asked when a context is current: without one it fails with
    CUDA_ERROR_INVALID_CONTEXT, which compute-sanitizer reports as an API error of the
    program. ``cuCtxGetCurrent`` returns a null context (and success) when none is current.
    """
    err, ctx = driver.cuCtxGetCurrent()
    if err == driver.CUresult.CUDA_SUCCESS and ctx is not None and int(ctx) != 0:
        err, dev = driver.cuCtxGetDevice()
        if err == driver.CUresult.CUDA_SUCCESS:
            return err, dev
    return driver.cuDeviceGet(0)


def _query_cc(driver) -> ComputeCapability:
    """The compute capability of the current context's device (else device 0); DriverError
    naming the call that failed."""

    def check(err, call):
        if err != driver.CUresult.CUDA_SUCCESS:
            name = getattr(err, "name", None) or repr(err)
            raise DriverError(f"numba-mathdx: {call} failed with {name} while reading the current "
                              "GPU's compute capability (is there a CUDA GPU and driver?)")

    (err,) = driver.cuInit(0)
    check(err, "cuInit")
    err, dev = current_device(driver)
    check(err, "cuDeviceGet/cuCtxGetDevice")
    attr = driver.CUdevice_attribute
    err, major = driver.cuDeviceGetAttribute(attr.CU_DEVICE_ATTRIBUTE_COMPUTE_CAPABILITY_MAJOR, dev)
    check(err, "cuDeviceGetAttribute(COMPUTE_CAPABILITY_MAJOR)")
    err, minor = driver.cuDeviceGetAttribute(attr.CU_DEVICE_ATTRIBUTE_COMPUTE_CAPABILITY_MINOR, dev)
    check(err, "cuDeviceGetAttribute(COMPUTE_CAPABILITY_MINOR)")
    return ComputeCapability(int(major), int(minor))


def get_current_device_cc() -> ComputeCapability:
    """The compute capability of the current GPU.

    The device of the current CUDA context, else device 0 (as nvmath-python's
    ``get_current_device_cc``). Never initialises numba's CUDA context.

    Returns
    -------
    ComputeCapability
        e.g. ``ComputeCapability(major=9, minor=0, arch='')`` for sm_90.

    Raises
    ------
    DriverError
        There is no CUDA GPU or driver here (the message names the driver call that failed).
    """
    try:
        driver = _driver()
    except ImportError as e:  # pragma: no cover - cuda-bindings is a dependency
        raise DriverError(f"numba-mathdx: cuda.bindings.driver cannot be imported ({e}); no GPU "
                          "compute capability can be read") from None
    try:
        return _query_cc(driver)
    except DriverError:
        raise
    except Exception as e:  # the driver library itself is missing: cuInit raises
        raise DriverError(f"numba-mathdx: the CUDA driver is not available ({type(e).__name__}: "
                          f"{e}); no GPU compute capability can be read") from None


@functools.lru_cache(maxsize=1)
def current_device_cc():
    """``(major, minor)`` of the current GPU as :func:`get_current_device_cc`, or None when there
    is no driver or GPU (never raises; the answer is kept for the process)."""
    try:
        return get_current_device_cc()
    except Exception:
        return None


# What current_device_sm() answers when there is no GPU: None (it raises DriverError) unless
# the layer that runs kernels without device code, the simulator, sets the architecture its
# descriptors target without sm= (nvmath_device._sim._compat sets sm_90 there).
_no_gpu_sm: ComputeCapability | None = None


def current_device_sm() -> ComputeCapability:
    """The compute capability descriptors target by default: the current GPU's (as nvmath-python's
    ``current_device_sm``). ``sm=current_device_sm()`` is the same as leaving ``sm`` out: under
    the CUDA simulator on a machine without a GPU that is sm_90, ``ComputeCapability(9, 0)``.

    Returns
    -------
    ComputeCapability
        The current GPU's (under the simulator without one: ``ComputeCapability(9, 0)``).

    Raises
    ------
    DriverError
        There is no CUDA GPU or driver here (and the simulator is not enabled).
    """
    try:
        return get_current_device_cc()
    except DriverError:
        if _no_gpu_sm is not None:
            return _no_gpu_sm
        raise


def shared_memory_limit(sm=None) -> int:
    """Bytes of shared memory one block may use on architecture ``sm`` (the opt-in limit, as in
    cuBLASDx's device table: 227 KiB on sm_90). Not in nvmath-python.

    Parameters
    ----------
    sm : int, tuple, str, ComputeCapability or None
        As descriptors take it (90, (9, 0), "sm_90", ...); None: :func:`current_device_sm`.

    Raises
    ------
    ValueError
        ``sm`` is not an architecture the descriptors support (the message lists them).
    DriverError
        ``sm`` is None and there is no GPU (and the simulator is not enabled).
    """
    from ._types import SHARED_MEMORY_LIMIT, parse_sm

    return SHARED_MEMORY_LIMIT[parse_sm(current_device_sm() if sm is None else sm, "sm")]
