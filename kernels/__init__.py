# SPDX-License-Identifier: Apache-2.0
"""Fused signal-processing kernels built only on nvmath_device's public API.

Each function takes CuPy / PyTorch / Numba device arrays (used in place, on their stream) or
NumPy arrays (copied to the GPU and back) and runs one fused kernel per pass. Under
``NUMBA_ENABLE_CUDASIM=1`` the same code runs on the CPU through the CUDA simulator.
"""

from .convolution import fft_convolve, fir_filter
from .gemm import batched_gemm, beamform_spectra
from .noise import add_noise
from .spectral import matched_filter, stft_power

__all__ = [
    "fft_convolve", "fir_filter", "matched_filter", "stft_power", "batched_gemm", "beamform_spectra", "add_noise",
]
