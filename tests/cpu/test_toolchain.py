# SPDX-License-Identifier: Apache-2.0
"""NVRTC wrapper: a compile must leave the Python interpreter's shared objects alone."""

import io
import subprocess
import sys

import numpy as np

from nvmath_device._codegen import toolchain


def test_compile_does_not_overwrite_shared_bytes_objects():
    # A clean compile has a 1-byte log (its NUL). Reading it into ``b" " * size`` wrote that NUL
    # into CPython's cached one-byte object b" ": afterwards every b" " in the process was
    # b"\x00" and np.save wrote headers np.load could not read. Run in a fresh process so the
    # compile is certainly in-process and the singleton is the marshalled one.
    code = (
        "import io, numpy as np\n"
        "from nvmath_device._codegen import toolchain\n"
        "toolchain.compile_source('extern \"C\" __global__ void k(){}', 90, 'ptx')\n"
        "space = bytes([32])  # CPython hands out its cached one-byte object\n"
        "assert list(space) == [32], repr(space)\n"
        "f = io.BytesIO(); np.save(f, np.arange(3.0)); f.seek(0)\n"
        "assert (np.load(f) == np.arange(3.0)).all()\n"
        "print('clean')\n"
    )
    r = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True)
    assert r.returncode == 0 and "clean" in r.stdout, r.stdout + r.stderr


def test_compile_output_and_log_are_independent_buffers():
    a = toolchain.compile_source('extern "C" __global__ void k(){}', 90, "ptx")
    b = toolchain.compile_source('extern "C" __global__ void k2(){}', 90, "ptx")
    assert isinstance(a, bytes) and b".entry k" in a and b".entry k2" in b
    f = io.BytesIO()
    np.save(f, np.arange(4.0))
    f.seek(0)
    assert (np.load(f) == np.arange(4.0)).all()
