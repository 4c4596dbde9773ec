# SPDX-License-Identifier: Apache-2.0
"""cuRAND's device generators -> C shim text over ``curand_kernel.h`` -> NVRTC -> LTO-IR (cached).

One translation unit per generator (XORWOW, Philox4_32_10, ...) holds an ``extern "C"`` device
function for every ``nvmath_device.random`` function that takes that generator's state:

- ``nvmathdx_curand_<gen>_init(<curand_init's arguments>, void* state)``;
- ``nvmathdx_curand_<gen>_<fn>(void* state, <extra arguments>, void* out)``: ``*out`` = the result
  (``unsigned int``, ``float``, ``uint4``, ``float2`` ...), so vectors cross the C ABI by memory;
- ``nvmathdx_curand_<gen>_skipahead*(<n>, void* state)``.

Scalars pass by value (``unsigned int`` i32, ``unsigned long long`` i64, ``float``, ``double``).
A kernel that uses one generator links one unit (~3-6 s of NVRTC on a cold cache, the cost of
parsing ``curand_kernel.h`` and its precomputed tables; later kernels read the disk cache).

The LTO-IR is built for the lowest architecture CUDA 13 compiles (``compute_75``): a kernel's
link (nvJitLink) generates code for its own, newer architecture from it, so one cached unit per
generator serves every target. cuRAND's precomputed tables are C++17 inline variables under
``-rdc=true``, so several units in one kernel link without duplicate symbols.

Knows no numba and no simulator.
"""

from __future__ import annotations

import dataclasses
import functools
import logging
import os
import re

from .._random_states import C_STRUCTS, FUNCTIONS, GENERATORS, INIT_PARAMS, skipahead_type
from . import cache
from .toolchain import compile_source, include_dirs, toolchain_id

log = logging.getLogger("nvmath_device")

# Bump when the rendered code changes meaning: part of the cache key.
CODEGEN_VERSION = "random-1"

# The architecture of the cached LTO-IR (see the module docstring).
UNIT_SM = 75

C_TYPES = {"u32": "unsigned int", "u64": "unsigned long long", "f32": "float", "f64": "double",
           "dv32": "unsigned int*", "dv64": "unsigned long long*"}

# result type name (nvmath_device.random.Function.result) -> C type
RESULT_C_TYPES = {"uint32": "unsigned int", "uint64": "unsigned long long", "float32": "float",
                  "float64": "double", "uint32x4": "uint4", "float32x2": "float2", "float32x4": "float4",
                  "float64x2": "double2", "float64x4": "double4"}


def symbol(generator: str, function: str) -> str:
    """The ``extern "C"`` name of ``function`` (``"init"``, ``"normal4"`` ...) for ``generator``."""
    return f"nvmathdx_curand_{generator}_{function}"


def _check_generator(generator):
    if generator not in GENERATORS:
        raise ValueError(f"generator must be one of {list(GENERATORS)}, got {generator!r}")


def functions_of(generator: str):
    """The :data:`~nvmath_device._random_states.FUNCTIONS` entries that take ``generator``'s state."""
    return [f for f in FUNCTIONS.values() if generator in f.generators]


def render_unit_source(generator: str) -> str:
    """C++ source of the unit of ``generator``: one wrapper per function taking its state."""
    _check_generator(generator)
    st = C_STRUCTS[generator]
    lines = ["#include <curand_kernel.h>", ""]
    params = INIT_PARAMS[generator]
    decl = ", ".join(f"{C_TYPES[t]} {n}" for n, t in params)
    call = ", ".join(n for n, _ in params)
    lines.append(f'extern "C" __device__ void {symbol(generator, "init")}({decl}, void* state)\n'
                 f"{{ curand_init({call}, static_cast<{st}*>(state)); }}")
    for f in functions_of(generator):
        sym = symbol(generator, f.name)
        if not f.state_first:  # skipahead*(n, state)
            nt = C_TYPES[skipahead_type(generator) if f.name == "skipahead" else "u64"]
            lines.append(f'extern "C" __device__ void {sym}({nt} n, void* state)\n'
                         f"{{ {f.c_name}(n, static_cast<{st}*>(state)); }}")
            continue
        rt = RESULT_C_TYPES[f.result[generator]]
        extra = "".join(f", {C_TYPES[t]} {n}" for n, t in f.params)
        args = "".join(f", {n}" for n, _ in f.params)
        lines.append(f'extern "C" __device__ void {sym}(void* state{extra}, void* out)\n'
                     f"{{ *static_cast<{rt}*>(out) = {f.c_name}(static_cast<{st}*>(state){args}); }}")
    return "\n".join(lines) + "\n"


@functools.lru_cache(maxsize=1)
def curand_include_dir() -> str:
    """The folder holding ``curand_kernel.h`` (the nvidia-curand wheel's CUDA 13 headers)."""
    from cuda.pathfinder import find_nvidia_header_directory

    d = find_nvidia_header_directory("curand")
    if d is None or not os.path.isfile(os.path.join(d, "curand_kernel.h")):
        raise ImportError("cuRAND's headers (curand_kernel.h) are not found; pip install nvidia-curand")
    return d


@functools.lru_cache(maxsize=1)
def curand_version() -> str:
    """cuRAND's header version (``CURAND_VER_MAJOR.MINOR.PATCH.BUILD`` from curand.h): part of the cache key."""
    try:
        with open(os.path.join(curand_include_dir(), "curand.h")) as f:
            text = f.read()
    except OSError:
        return "curand?"
    parts = [re.search(rf"#define\s+CURAND_VER_{p}\s+(\d+)", text) for p in ("MAJOR", "MINOR", "PATCH", "BUILD")]
    return "curand" + ".".join(m.group(1) if m else "?" for m in parts)


def _extra_include_dirs() -> tuple[str, ...]:
    d = curand_include_dir()
    return () if d in include_dirs() else (d,)


def unit_key(generator: str) -> str:
    """Disk-cache key of the unit of ``generator``."""
    return cache.make_key("curand-unit", CODEGEN_VERSION, render_unit_source(generator), UNIT_SM,
                          toolchain_id(), curand_version())


def unit_ltoir(generator: str) -> bytes:
    """The LTO-IR of the unit of ``generator``: from the disk cache, else compiled by NVRTC and cached."""
    def build():
        log.info("numba-mathdx: compiling cuRAND %s device functions (NVRTC, a few seconds; cached)", generator)
        return compile_source(render_unit_source(generator), UNIT_SM, "ltoir", name=f"nvmathdx_curand_{generator}.cu",
                              extra_include_dirs=_extra_include_dirs())

    return cache.get_or_build(unit_key(generator), build)


@dataclasses.dataclass(frozen=True)
class RandomUnit:
    """The cuRAND unit of one generator, shaped like a descriptor for the numba layer's linkable
    objects (``symbol``, ``ltoir()``, hashable and picklable)."""

    generator: str

    def __post_init__(self):
        _check_generator(self.generator)

    @property
    def symbol(self) -> str:
        """Name of the linked module (``nvmathdx_curand_<generator>``)."""
        return f"nvmathdx_curand_{self.generator}"

    def ltoir(self) -> bytes:
        """The unit's LTO-IR (disk cache, else NVRTC)."""
        return unit_ltoir(self.generator)
