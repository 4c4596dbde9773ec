# SPDX-License-Identifier: Apache-2.0
"""The execute hot path: cublasLtMatmul's arguments by name, the outputs, the launch.

Everything that does not change between calls is resolved when a plan is made (allocators of
the result and of the auxiliary outputs, the library function, the device count); a call
allocates on its stream, points the descriptor at its outputs and launches.
"""

from __future__ import annotations

import ctypes

from . import _cublaslt as lt
from . import _gpu


class LaunchArgs:
    """``cublasLtMatmul``'s sixteen arguments, by name, in its order.

    Pointers and sizes are ints; ``handle``, ``desc`` and the four layouts are the handles
    of the cuBLASLt objects; ``a`` and ``b`` are cuBLASLt's A and B (our ``b`` and ``a`` when
    the problem is handed over transposed). ``c_from_d``: C is D's buffer (set at each
    launch, with ``d`` and ``stream``).
    """

    FIELDS = (
        "handle",
        "desc",
        "alpha",
        "a",
        "a_layout",
        "b",
        "b_layout",
        "beta",
        "c",
        "c_layout",
        "d",
        "d_layout",
        "algo",
        "workspace",
        "workspace_size",
        "stream",
    )
    __slots__ = FIELDS + ("c_from_d", "algorithm")

    def __init__(self, handle, desc, alpha, beta, layouts, algorithm, workspace, workspace_size):
        self.handle, self.desc, self.alpha, self.beta = handle, desc, alpha, beta
        self.a_layout, self.b_layout, self.c_layout, self.d_layout = layouts
        self.a = self.b = self.c = self.d = 0
        self.c_from_d = False
        self.use_algorithm(algorithm)
        self.workspace, self.workspace_size = workspace, workspace_size
        self.stream = 0

    def use_algorithm(self, algorithm) -> None:
        """Launch with ``algorithm`` (an :class:`~nvmath_host.Algorithm`, kept alive here)."""
        self.algorithm = algorithm
        self.algo = ctypes.addressof(algorithm._algo)

    def point_at(self, p, ops) -> None:
        """Take A, B and C from the operands ``ops`` ({"a", "b", "c"}) of problem ``p``."""
        first, second = (ops["b"], ops["a"]) if p.swap else (ops["a"], ops["b"])
        self.a, self.b = first.ptr, second.ptr
        c = ops["c"]
        if c is not None:
            self.c = c.ptr
        else:
            self.c_from_d = p.c_ptr_from == "d"
            if not self.c_from_d:
                self.c = first.ptr  # never read (beta = 0); see _problem._c_pointer_source

    def values(self) -> tuple:
        """The arguments in ``cublasLtMatmul``'s order."""
        return tuple(getattr(self, f) for f in self.FIELDS)

    def launch(self, fn, d: int | None, stream: int) -> None:
        """Call ``fn`` (``cublasLtMatmul``) writing D at ``d`` (None: in place, D is C)."""
        if d is None:
            d = self.c
        elif self.c_from_d:
            self.c = d
        self.d = d
        self.stream = stream
        st = fn(
            self.handle,
            self.desc,
            self.alpha,
            self.a,
            self.a_layout,
            self.b,
            self.b_layout,
            self.beta,
            self.c,
            self.c_layout,
            d,
            self.d_layout,
            self.algo,
            self.workspace,
            self.workspace_size,
            stream,
        )
        if st:
            raise lt.CublasLtError("cublasLtMatmul", st)


class Executor:
    """One plan's launches: the result and auxiliary outputs allocated on the call's stream,
    the descriptor pointed at the outputs, ``cublasLtMatmul`` called."""

    __slots__ = (
        "args",
        "fn",
        "desc",
        "ptr",
        "alloc_d",
        "outputs",
        "current_stream",
        "device",
        "one_device",
        "rt",
    )

    def __init__(self, args: LaunchArgs, desc, pkg, p, device: int):
        self.args = args
        self.desc = desc
        self.fn = lt.lib().raw_cublasLtMatmul
        self.ptr = pkg.ptr
        o = p.d_out
        self.alloc_d = (
            pkg.allocator(o.dtype, o.shape, o.strides, o.nelems, device) if o is not None else None
        )
        #: (name, allocator, descriptor attribute of its pointer) of each auxiliary output
        self.outputs = tuple(
            (o.name, pkg.allocator(o.dtype, o.shape, o.strides, o.nelems, device), o.attr)
            for o in p.outputs
        )
        #: ``f(device)``: the package's current stream (read at each call)
        self.current_stream = pkg.current_stream_getter()
        self.device = device
        self.one_device = _gpu.device_count() == 1
        self.rt = _gpu.rt()

    def allocate(self, stream: int, current: bool = False):
        """``(d, outs)``: a new result (None in place) and auxiliary outputs by name."""
        alloc_d = self.alloc_d
        d = alloc_d(stream, current) if alloc_d is not None else None
        outs = {}
        for name, alloc, _ in self.outputs:
            outs[name] = alloc(stream, current)
        return d, outs

    def launch(self, d, outs, stream: int) -> None:
        """Launch into ``d`` (None: in place) and the outputs ``outs`` on ``stream``."""
        ptr = self.ptr
        if outs:
            set_pointer = self.desc.set_pointer
            for name, _, attr in self.outputs:
                set_pointer(attr, ptr(outs[name]))
        self.args.launch(self.fn, ptr(d) if d is not None else None, stream)

    def run(self, stream: int, current: bool):
        """Allocate on ``stream`` and launch there (``current``: it is the package's current
        stream), with the plan's device current; returns ``(d, outs)``."""
        # (as `with _gpu.DeviceScope(...)` around the block, only when another device is current)
        scope = None
        if not self.one_device and self.rt.cudaGetDevice()[1] != self.device:
            scope = _gpu.DeviceScope(self.device)
            scope.__enter__()
        try:
            # allocate() and launch(), inlined: this is the path of every execute()
            alloc_d = self.alloc_d
            d = alloc_d(stream, current) if alloc_d is not None else None
            outs = {}
            if self.outputs:
                ptr, set_pointer = self.ptr, self.desc.set_pointer
                for name, alloc, attr in self.outputs:
                    outs[name] = arr = alloc(stream, current)
                    set_pointer(attr, ptr(arr))
            self.args.launch(self.fn, self.ptr(d) if d is not None else None, stream)
        finally:
            if scope is not None:
                scope.__exit__(None, None, None)
        return d, outs
