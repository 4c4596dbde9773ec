# SPDX-License-Identifier: Apache-2.0
"""NVRTC wrapper: a compile must leave the Python interpreter's shared objects alone; compiles
in a child process give what a compile here gives."""

import io
import logging
import subprocess
import sys

import numpy as np
import pytest

from nvmath_device import CompileError
from nvmath_device._build import toolchain


def test_compile_does_not_overwrite_shared_bytes_objects():
    # A clean compile has a 1-byte log (its NUL). Reading it into ``b" " * size`` wrote that NUL
    # into CPython's cached one-byte object b" ": afterwards every b" " in the process was
    # b"\x00" and np.save wrote headers np.load could not read. Run in a fresh process so the
    # compile is certainly in-process and the singleton is the marshalled one.
    code = (
        "import io, numpy as np\n"
        "from nvmath_device._build import toolchain\n"
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


# --- compiles in a child process (they overlap a compile in this one; NVRTC serializes its own) --

TINY_K = 'extern "C" __global__ void k_child(){}'


def test_child_compile_gives_the_same_output_and_the_same_error():
    n = dict(toolchain.stats)
    assert toolchain.compile_source_in_child(TINY_K, 90, "ptx") == toolchain.compile_source(TINY_K, 90, "ptx")
    assert toolchain.compile_source_in_child(TINY_K, 90, "ltoir") == toolchain.compile_source(TINY_K, 90, "ltoir")
    assert toolchain.stats["nvrtc_child_compiles"] == n["nvrtc_child_compiles"] + 2
    assert toolchain.stats["nvrtc_compiles"] == n["nvrtc_compiles"] + 4
    assert toolchain.stats["nvrtc_in_flight"] == 0
    errors = []
    for compile_ in (toolchain.compile_source_in_child, toolchain.compile_source):
        with pytest.raises(CompileError) as e:
            compile_("nmdx_not_a_type x;", 90, "ltoir", name="bad.cu")
        errors.append(str(e.value))
    assert errors[0] == errors[1] and "--- NVRTC log ---" in errors[0] and "nmdx_not_a_type" in errors[0]
    assert toolchain.stats["nvrtc_child_compiles"] == n["nvrtc_child_compiles"] + 3


@pytest.mark.parametrize("how", ["no-interpreter", "child-crashes", "other-nvrtc"])
def test_child_compile_falls_back_to_this_process(monkeypatch, caplog, how):
    if how == "no-interpreter":
        monkeypatch.setattr(toolchain.sys, "executable", "")
    elif how == "child-crashes":
        monkeypatch.setattr(toolchain, "_CHILD", "import sys; sys.exit('boom')")
    else:
        real = toolchain.nvrtc_version()
        monkeypatch.setattr(toolchain, "nvrtc_version", lambda: (real[0] + 1, 0))
    n = dict(toolchain.stats)
    with caplog.at_level(logging.DEBUG, logger="nvmath_device"):
        out = toolchain.compile_source_in_child(TINY_K, 90, "ptx")
    assert b".entry k_child" in out
    assert toolchain.stats["nvrtc_child_compiles"] == n["nvrtc_child_compiles"]
    assert toolchain.stats["nvrtc_compiles"] == n["nvrtc_compiles"] + 1
    if how != "no-interpreter":
        assert any("compiling it in this process" in r.getMessage() for r in caplog.records)
