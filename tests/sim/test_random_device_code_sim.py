# SPDX-License-Identifier: Apache-2.0
"""What the simulator's model of cuRAND (nvmath_device._random_math) assumes about the device code,
checked on the PTX that NVRTC (our build's options, no GPU) makes of curand_kernel.h:

* ``x * 2**-32 + 2**-33`` (uniform) and Box-Muller's ``y * (2pi 2**-32) + pi 2**-32`` are single
  ``fma.rn.f32`` (the model rounds once: :func:`nvmath_device._random_math.fmaf`);
* log-normal's ``mean + stddev * z`` and Poisson's ``sqrt(lambda) * z + lambda`` are fused too;
* the float Box-Muller's sine and cosine are ``sin.approx.f32``/``cos.approx.f32`` (``__sincosf``)
  and Poisson's gammainc method uses ``ex2/lg2/rsqrt/rcp.approx``: hardware approximations whose
  bits NumPy cannot reproduce, which is why those forms are tested against bounds, not bits.
"""

import re

import numpy as np
import pytest

from nvmath_device import _random_math as rm

toolchain = pytest.importorskip("nvmath_device._build.toolchain")

SOURCE = r"""
#include <curand_kernel.h>
extern "C" __device__ float u01(unsigned int x) { return _curand_uniform(x); }
extern "C" __device__ float2 bm(unsigned int x, unsigned int y) { return _curand_box_muller(x, y); }
extern "C" __device__ float lnf(curandStateXORWOW_t *s, float m, float d) { return curand_log_normal(s, m, d); }
extern "C" __device__ double lnd(curandStatePhilox4_32_10_t *s, double m, double d) { return curand_log_normal_double(s, m, d); }
extern "C" __device__ unsigned int pn(curandStateXORWOW_t *s, double l) { return curand_poisson(s, l); }
"""


@pytest.fixture(scope="module")
def ptx():
    out = toolchain.compile_source(SOURCE, 90, "ptx", extra_include_dirs=(rm.curand_include_dir(),))
    text = out.decode(errors="replace") if isinstance(out, bytes) else out
    return text.replace("\x00", "")


def _body(ptx, name):
    m = re.search(r"\.func\s*(?:\([^)]*\)\s*)?" + name + r"\((.*?)\n}\n", ptx, re.S)
    assert m, name
    return m.group(1)


def _f32(x) -> str:
    return f"0f{int(np.float32(x).view(np.uint32)):08X}"


def test_uniform_is_one_fma(ptx):
    body = _body(ptx, "u01")
    assert f"{_f32(2.0**-32)}, {_f32(2.0**-33)}" in body and "fma.rn.f32" in body


def test_box_muller_angle_is_one_fma_and_sincos_are_approximations(ptx):
    body = _body(ptx, "bm")
    c = rm.CURAND_2POW32_INV_2PI
    assert re.search(r"fma\.rn\.f32\s+%f\d+, %f\d+, " + _f32(c) + ", " + _f32(c / np.float32(2)), body)
    assert "sin.approx.f32" in body and "cos.approx.f32" in body
    assert "sqrt.rn.f32" in body  # sqrtf is correctly rounded


def test_log_normal_fuses_mean_plus_stddev_times_z(ptx):
    """The mean and stddev parameters meet z in an fma (float and double)."""
    for name, kind in (("lnf", "f32"), ("lnd", "f64")):
        body = _body(ptx, name)
        reg = "f" if kind == "f32" else "fd"
        params = re.findall(r"ld\.param\." + kind + r"\s+%(" + reg + r"\d+), \[" + name + r"_param_(\d)\]", body)
        regs = {int(i): r for r, i in params}
        mean, stddev = regs[1], regs[2]
        assert re.search(r"fma\.rn\." + kind + r"\s+%" + reg + r"\d+, %" + reg + r"\d+, %" + stddev + ", %" + mean + r";", body) \
            or re.search(r"fma\.rn\." + kind + r"\s+%" + reg + r"\d+, %" + stddev + ", %" + reg + r"\d+, %" + mean + r";", body), name


def test_poisson_normal_approximation_is_fused(ptx):
    body = _body(ptx, "pn")
    lam = re.search(r"ld\.param\.f64\s+%(fd\d+), \[pn_param_1\]", body).group(1)
    root = re.search(r"sqrt\.rn\.f64\s+%(fd\d+), %" + lam + ";", body).group(1)
    assert re.search(r"fma\.rn\.f64\s+%fd\d+, %" + root + r", %fd\d+, %" + lam + ";", body)
    for op in ("ex2.approx", "lg2.approx", "rsqrt.approx", "rcp.approx"):  # the gammainc method
        assert op in body, op
