# SPDX-License-Identifier: Apache-2.0
"""``@cuda.jit(cache=True)`` with an FFT inside, in two fresh processes on a real GPU.

The first process compiles (NVRTC + numba + nvJitLink), runs, checks the result and saves the
kernel in Numba's cache; the second loads it, runs and checks it, and must report zero NVRTC
compiles, zero nvJitLink links (ours and numba's) and zero NVVM compiles. The kernel launches
with 64 KiB of dynamic shared memory, which only works when the shared-memory opt-in setup
callback of our linked code came back with the cached kernel.

    python -m pytest -m gpu tests/gpu/test_cache_gpu.py -v
"""

from __future__ import annotations

import json
import os
import subprocess
import sys

import pytest

pytestmark = pytest.mark.gpu

SCRIPT = r'''
import json
import numpy as np
import numba.cuda.cudadrv.driver as drv
import numba.cuda.cudadrv.nvvm as nvvm
from numba import cuda

counts = {"numba_links": 0, "nvvm_compiles": 0}
_Linker, _compile_ir = drv._Linker, nvvm.compile_ir


class CountingLinker(_Linker):
    def __init__(self, *a, **k):
        counts["numba_links"] += 1
        super().__init__(*a, **k)


def counting_compile_ir(*a, **k):
    counts["nvvm_compiles"] += 1
    return _compile_ir(*a, **k)


drv._Linker = CountingLinker
nvvm.compile_ir = counting_compile_ir

from nvmath_device import FFT  # noqa: E402
from nvmath_device._build import toolchain  # noqa: E402

fft = FFT(size=128, precision=np.float32, fft_type="c2c", direction="forward",
          elements_per_thread=8, ffts_per_block=2)
EPT, STRIDE, FPB, N = fft.elements_per_thread_value, fft.stride, fft.ffts_per_block_value, fft.size
STORAGE, VT = fft.storage_size, fft.value_type


@cuda.jit(cache=True)
def kern(x, y, nrows):
    td = cuda.local.array(STORAGE, dtype=VT)
    smem = cuda.shared.array(0, dtype=VT)
    row = cuda.blockIdx.x * FPB + cuda.threadIdx.y
    base = row * N + cuda.threadIdx.x
    ok = row < nrows
    for i in range(EPT):
        td[i] = x[base + i * STRIDE] if ok else 0
    fft.execute(td, smem)
    if ok:
        for i in range(EPT):
            y[base + i * STRIDE] = td[i]


nrows = FPB * 5
rng = np.random.default_rng(0)
x = (rng.standard_normal((nrows, N)) + 1j * rng.standard_normal((nrows, N))).astype(np.complex64)
dx, dy = cuda.to_device(x.ravel()), cuda.device_array(nrows * N, np.complex64)
smem = max(fft.shared_memory_size, 64 * 1024)  # > 48 KiB: needs the opt-in setup callback
kern[nrows // FPB, fft.block_dim, 0, smem](dx, dy, nrows)
y = dy.copy_to_host().reshape(nrows, N)
ref = np.fft.fft(x.astype(np.complex128), axis=-1)
err = float(np.linalg.norm(y - ref) / np.linalg.norm(ref))
print("RESULT " + json.dumps(dict(
    counts, err=err, nvrtc_compiles=toolchain.stats["nvrtc_compiles"],
    nvjitlink_links=toolchain.stats["nvjitlink_links"],
    cache_hits=sum(kern._cache_hits.values()), cache_misses=sum(kern._cache_misses.values()))))
'''


def _run(script, env):
    p = subprocess.run([sys.executable, str(script)], env=env, capture_output=True, text=True, timeout=600)
    assert p.returncode == 0, p.stdout + p.stderr
    return json.loads([ln for ln in p.stdout.splitlines() if ln.startswith("RESULT ")][-1][len("RESULT "):])


def test_cache_true_kernel_loads_in_a_second_process_without_compiling(tmp_path):
    script = tmp_path / "fft_kernel_cached.py"
    script.write_text(SCRIPT)
    env = dict(os.environ, NUMBA_CACHE_DIR=str(tmp_path / "numba"),
               NUMBA_MATHDX_CACHE_DIR=str(tmp_path / "mathdx"))
    first = _run(script, env)
    assert first["err"] < 1e-5, first
    assert first["nvrtc_compiles"] >= 1 and first["numba_links"] == 1, first
    assert first["cache_misses"] == 1 and first["cache_hits"] == 0, first
    assert list((tmp_path / "numba").rglob("*.nbi")), "numba wrote no cache index"

    second = _run(script, env)
    assert second["err"] < 1e-5, second
    assert second["cache_hits"] == 1 and second["cache_misses"] == 0, second
    assert (second["nvrtc_compiles"], second["nvjitlink_links"], second["numba_links"],
            second["nvvm_compiles"]) == (0, 0, 0, 0), second
