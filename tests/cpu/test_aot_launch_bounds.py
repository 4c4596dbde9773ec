# SPDX-License-Identifier: Apache-2.0
"""nvmath_device.aot.compile_kernel keeps a kernel's launch bounds (they bound its registers, so a
cubin linked without them is not the kernel that runs): from @cuda.jit(launch_bounds=...) or given."""

from __future__ import annotations

import numpy as np
import pytest
from numba import cuda, types

from nvmath_device import aot
from nvmath_device._numba import _compat


def _body(x):
    i = cuda.grid(1)
    if i < x.size:
        x[i] = np.float32(2.0) * x[i]


def _bounds_seen(monkeypatch, *args, **kwargs):
    seen = {}
    real = _compat.compile_kernel_library

    def spy(*a, **k):
        seen["launch_bounds"] = k.get("launch_bounds")
        lib, entry = real(*a, **k)
        seen["ir"] = lib.get_llvm_str()
        return lib, entry

    monkeypatch.setattr("nvmath_device._numba.compile_kernel_library", spy)
    k = aot.compile_kernel(*args, **kwargs)
    assert k.cubin[:4] == b"\x7fELF"
    return seen


def test_a_dispatchers_launch_bounds_reach_the_compiled_kernel(monkeypatch):
    kern = cuda.jit(launch_bounds=(128, 4))(_body)
    seen = _bounds_seen(monkeypatch, kern, (types.float32[::1],), sm=90)
    assert seen["launch_bounds"] == (128, 4)
    assert "maxntidx" in seen["ir"] and "minctasm" in seen["ir"]


def test_given_launch_bounds_and_none(monkeypatch):
    seen = _bounds_seen(monkeypatch, _body, (types.float32[::1],), sm=90, launch_bounds=256)
    assert seen["launch_bounds"] == (256,) and "maxntidx" in seen["ir"]
    seen = _bounds_seen(monkeypatch, _body, (types.float32[::1],), sm=90)
    assert seen["launch_bounds"] is None and "maxntidx" not in seen["ir"]


@pytest.mark.parametrize("bad", [0, (128, 2, 1, 1), "128", (128.0,), True])
def test_bad_launch_bounds_are_named(bad):
    with pytest.raises(TypeError, match="launch_bounds must be a positive int or a tuple of 1 to 3"):
        aot.compile_kernel(_body, (types.float32[::1],), sm=90, launch_bounds=bad)


def _spill(x, n):
    a = cuda.local.array(64, dtype=np.float32)  # indexed by run-time values: stays in local memory
    i = cuda.grid(1)
    for j in range(64):
        a[j] = x[(i + j) % x.size]
    x[i % x.size] = a[n % 64] + a[(n * 7) % 64]


def test_compiled_kernel_reports_registers_and_frame():
    """CompiledKernel.registers / frame_bytes read the cubin's own records (as cuobjdump
    -res-usage does): a plain kernel uses some registers and no frame; a local array indexed by
    run-time values takes a frame; launch bounds (1024 threads, 2 blocks per SM) cap the
    registers at 32."""
    plain = aot.compile_kernel(_body, (types.float32[::1],), sm=90)
    assert 0 < plain.registers <= 32 and plain.frame_bytes == 0
    local = aot.compile_kernel(_spill, (types.float32[::1], types.int64), sm=90)
    assert local.frame_bytes >= 64 * 4
    capped = aot.compile_kernel(_spill, (types.float32[::1], types.int64), sm=90, launch_bounds=(1024, 2))
    assert capped.registers <= 32
