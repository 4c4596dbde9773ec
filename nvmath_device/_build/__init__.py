# SPDX-License-Identifier: Apache-2.0
"""Shim rendering, NVRTC driver, traits extraction and the disk cache. No numba import here."""
