# SPDX-License-Identifier: Apache-2.0
"""The nvmath-python-style programs of tests/sim/test_nvmath_style_sim.py on a real GPU, against
NumPy: descriptors without ``sm=`` (the current GPU), ``link=fft.files``, ``fft(td, smem)``,
``MM(...)``, ``transpose_mode=``, ``MM.a_dim[::-1]`` shared arrays, ``Dim3`` block shapes.

Run on the GPU machine: python -m pytest -m gpu tests/gpu/test_nvmath_style_gpu.py
"""

from __future__ import annotations

import numpy as np
import pytest

from tests.sim.test_nvmath_style_sim import PROGRAMS

pytestmark = [pytest.mark.gpu,
              pytest.mark.filterwarnings("ignore:Matmul\\(transpose_mode:DeprecationWarning")]


@pytest.mark.parametrize("name", sorted(PROGRAMS))
def test_program_on_the_gpu(name):
    result, reference, rtol = PROGRAMS[name]()
    err = np.linalg.norm(result - reference) / np.linalg.norm(reference)
    assert err < rtol, f"{name}: relative error {err}"


def test_descriptors_without_sm_target_the_current_gpu():
    from nvmath_device import FFT, Matmul, current_device_sm

    cc = current_device_sm()
    fft = FFT(size=64, precision=np.float32, direction="forward")
    assert fft.sm == cc[0] * 10 + cc[1] == Matmul(size=(8, 8, 8)).sm
