# SPDX-License-Identifier: Apache-2.0
"""Ahead-of-time compilation: a Numba kernel and the Dx code it calls, linked to a cubin, no GPU needed."""

from __future__ import annotations

from dataclasses import dataclass

from ._descriptor import parse_sm

__all__ = ["CompiledKernel", "compile_kernel"]


@dataclass(frozen=True)
class CompiledKernel:
    """The result of :func:`compile_kernel`.

    Attributes
    ----------
    cubin : bytes
        The linked ELF for ``sm``.
    entry : str
        Mangled name of the kernel in the cubin.
    sm : int
        Target architecture (e.g. 90).
    linked : tuple of str
        Names of the LTO-IR modules linked in (one per Dx descriptor the kernel uses).
    """

    cubin: bytes
    entry: str
    sm: int
    linked: tuple

    @property
    def registers(self) -> int:
        """Registers per thread of the entry kernel (what ``cuobjdump -res-usage`` prints as REG)."""
        return _kernel_attribute(self.cubin, self.entry, _EIATTR_REGCOUNT)

    @property
    def frame_bytes(self) -> int:
        """Local-memory frame per thread of the entry kernel, in bytes (STACK in ``cuobjdump``):
        register spills and local arrays the compiler kept in memory; 0 when everything fits."""
        return _kernel_attribute(self.cubin, self.entry, _EIATTR_FRAME_SIZE)


# CUDA ELF: the ".nv.info" section lists per-kernel attributes as records (format byte, attribute
# byte, then a 16-bit size and a payload for the "sized" format 4); REGCOUNT and FRAME_SIZE carry
# (symbol index, value) as two little-endian uint32.
_EIATTR_FRAME_SIZE, _EIATTR_REGCOUNT = 0x11, 0x2F


def _kernel_attribute(cubin: bytes, entry: str, attr: int) -> int:
    import struct

    shoff, = struct.unpack_from("<Q", cubin, 0x28)
    shentsize, shnum, shstrndx = struct.unpack_from("<HHH", cubin, 0x3A)
    sections = [struct.unpack_from("<IIQQQQIIQQ", cubin, shoff + i * shentsize) for i in range(shnum)]

    def name(table, off):
        return cubin[table + off:cubin.index(b"\0", table + off)].decode()

    names = {name(sections[shstrndx][4], s[0]): s for s in sections}
    symtab, strtab = names[".symtab"], names[".strtab"]
    index = next(i for i in range(symtab[5] // 24)
                 if name(strtab[4], struct.unpack_from("<I", cubin, symtab[4] + 24 * i)[0]) == entry)
    info = names[".nv.info"]
    data, i = cubin[info[4]:info[4] + info[5]], 0
    while i < len(data):
        fmt, key = data[i], data[i + 1]
        size = struct.unpack_from("<H", data, i + 2)[0] if fmt == 4 else 0
        if fmt == 4 and key == attr and struct.unpack_from("<I", data, i + 4)[0] == index:
            return struct.unpack_from("<I", data, i + 8)[0]
        i += 4 + size
    return 0  # no record: the attribute is zero (FRAME_SIZE is omitted by some linkers when 0)


def compile_kernel(pyfunc, argtypes, sm=90, *, fastmath: bool = False, opt: bool = True,
                   launch_bounds=None) -> CompiledKernel:
    """Compile ``pyfunc`` as a CUDA kernel for ``argtypes`` and link it to a cubin for ``sm``.

    Works without a GPU or driver: Numba types and lowers the kernel, NVVM emits LTO-IR,
    and nvJitLink links it with the LTO-IR of every FFT/GEMM the kernel calls.

    Parameters
    ----------
    pyfunc : function
        The plain Python kernel function (or a ``@cuda.jit`` dispatcher: its ``py_func`` is used).
    argtypes : tuple of numba types
        The kernel's argument types, e.g. ``(numba.types.complex64[::1],)``.
    sm : int, tuple or str
        Target architecture, e.g. 90, (9, 0) or "sm_90".
    launch_bounds : int or tuple of 1-3 ints, optional
        ``(max_threads_per_block, min_blocks_per_sm, max_blocks_per_cluster)`` as
        ``@cuda.jit(launch_bounds=...)`` takes them (they bound the registers the compiler may use).
        Default: those of ``pyfunc`` when it is a ``@cuda.jit`` dispatcher that has them, else none.
    """
    from numba.core import types

    from ._numba import compile_kernel_library, linked_cubin

    sm = parse_sm(sm, "sm")
    if not isinstance(argtypes, tuple) or not all(isinstance(t, types.Type) for t in argtypes):
        raise TypeError(f"argtypes must be a tuple of numba types, got {argtypes!r}")
    if launch_bounds is None:  # a @cuda.jit(launch_bounds=...) dispatcher's own
        launch_bounds = (getattr(pyfunc, "targetoptions", None) or {}).get("launch_bounds")
    if launch_bounds is not None:
        lb = (launch_bounds,) if isinstance(launch_bounds, int) and not isinstance(launch_bounds, bool) else launch_bounds
        if (not isinstance(lb, tuple) or not 1 <= len(lb) <= 3
                or not all(isinstance(v, int) and not isinstance(v, bool) and v > 0 for v in lb)):
            raise TypeError(f"launch_bounds must be a positive int or a tuple of 1 to 3 positive ints "
                            f"(max_threads_per_block, min_blocks_per_sm, max_blocks_per_cluster), got {launch_bounds!r}")
        launch_bounds = lb
    pyfunc = getattr(pyfunc, "py_func", pyfunc)
    if not callable(pyfunc):
        raise TypeError(f"pyfunc must be a Python function or a @cuda.jit kernel, got {pyfunc!r}")
    cc = (sm // 10, sm % 10)
    lib, entry = compile_kernel_library(pyfunc, argtypes, cc, fastmath=fastmath, opt=opt,
                                        launch_bounds=launch_bounds)
    cubin, linked = linked_cubin(lib, cc)
    return CompiledKernel(cubin=cubin, entry=entry, sm=sm, linked=linked)
