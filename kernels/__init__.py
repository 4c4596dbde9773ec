# SPDX-License-Identifier: Apache-2.0
"""Fused signal-processing kernels built only on nvmath_device's public API.

Each function takes CuPy / PyTorch / Numba device arrays (used in place, on their stream) or
NumPy arrays (copied to the GPU and back) and runs one fused kernel per pass. Under
``NUMBA_ENABLE_CUDASIM=1`` the same code runs on the CPU through the CUDA simulator.

Each also takes a Dask array of CuPy (or NumPy) chunks as its signal (``x``; ``a``, ``b``, ``c``
of ``batched_gemm``) and then returns Dask array(s), lazily: every block is one call on one
block, on the worker that computes it (``pip install "numba-mathdx[dask]"``; README, "Many GPUs
with Dask", gives the chunking rules). ``import kernels`` does not import dask.

``kernels.plan(fn, *args, **kwargs)`` prepares one of them for repeated calls on new device
arrays of the same shapes (the recorded kernel launches replayed; see :mod:`kernels._plan`).
"""

from ._dask import dask_aware
from ._plan import Plan, plan
from .convolution import fft_convolve, fir_filter
from .gemm import batched_gemm, beamform_spectra
from .noise import add_noise
from .spectral import matched_filter, stft_power

# The public functions: a Dask array goes to kernels._dask, anything else straight to the kernel.
fft_convolve = dask_aware(fft_convolve)
fir_filter = dask_aware(fir_filter)
matched_filter = dask_aware(matched_filter)
stft_power = dask_aware(stft_power)
batched_gemm = dask_aware(batched_gemm)
beamform_spectra = dask_aware(beamform_spectra)
add_noise = dask_aware(add_noise)

__all__ = [
    "fft_convolve", "fir_filter", "matched_filter", "stft_power", "batched_gemm", "beamform_spectra", "add_noise",
    "plan", "Plan",
]
