# SPDX-License-Identifier: Apache-2.0
"""How the fused kernels are launched.

On the GPU, the kernel compiled (by numba-cuda) for the arguments' types is launched with
``cuLaunchKernel`` and its parameters are packed here, in numba-cuda's kernel ABI (what
``numba.cuda.dispatcher._Kernel._prepare_args`` builds: an array is meminfo, parent, size,
itemsize, data pointer, shape..., strides...; a complex scalar its real and imaginary parts).
That skips numba-cuda's per-call dispatch (``typeof`` of every argument) and its launch
wrappers; the arguments are the DevArrays of ``kernels._arrays`` (which carry their numba type)
and scalars. Results are the same as numba-cuda's launch, bit for bit (a GPU test); a
``tests/cpu`` test checks the packing against numba-cuda's own ``_prepare_args``.

``NUMBA_MATHDX_FAST_LAUNCH=0`` (read at import) launches through numba-cuda instead
(``kernel[grid, block, stream, smem](*args)``), as the simulator always does, and so does a
thread without a current CUDA context (numba-cuda makes one).

A plan (:mod:`kernels._plan`) replays its recorded launches as one CUDA graph (:class:`Graph`):
per call, new parameters for each kernel node whose pointers changed and one ``cuGraphLaunch``
(H100, empty kernels, per call: 2.1-2.4 us for one node, 2.7-2.9 us for two, against 3.9-4.7 us
per ``cuLaunchKernel``). ``NUMBA_MATHDX_PLAN_GRAPHS=0`` (read at import) makes plans launch each
kernel with ``cuLaunchKernel`` instead.
"""

from __future__ import annotations

import ctypes
import os
import struct
import threading
import weakref

import numpy as np
from numba.core import types

from mathdx_operands import Stream, current_context, simulator

# struct format of one kernel parameter per numba scalar type (each parameter in its own
# 8-byte slot: the pointer array points at slot i for parameter i)
_SCALAR = {types.int64: "q", types.int32: "i", types.uint64: "Q", types.uint32: "I", types.int16: "h",
           types.uint16: "H", types.int8: "b", types.uint8: "B", types.boolean: "?",
           types.float32: "f", types.float64: "d"}
_COMPLEX = {types.complex64: "f", types.complex128: "d"}
stats = {"fast_launches": 0, "graph_launches": 0}  # launches that took the fast path, plans' graph launches (tests read it)
# While kernels.plan makes a plan on this thread, ``recorder.active`` collects every launch and
# every Output allocation (kernels._plan reads them; None otherwise).
recorder = threading.local()


# launch with cuLaunchKernel (tests switch it to compare both paths)
FAST = os.environ.get("NUMBA_MATHDX_FAST_LAUNCH", "1") not in ("", "0") and not simulator()
# plans replay their launches as one CUDA graph (read when a plan is made; tests switch it)
GRAPHS = os.environ.get("NUMBA_MATHDX_PLAN_GRAPHS", "1") not in ("", "0")


def param_formats(argtypes) -> list[str]:
    """One struct format character per kernel parameter, in numba-cuda's order."""
    out: list[str] = []
    for t in argtypes:
        if isinstance(t, types.Array):
            out += ["q"] * (5 + 2 * t.ndim)  # meminfo, parent, size, itemsize, data, shape, strides
        elif t in _COMPLEX:
            out += [_COMPLEX[t]] * 2
        elif t in _SCALAR:
            out.append(_SCALAR[t])
        elif isinstance(t, types.UniTuple) and t.dtype in _SCALAR:  # numba passes each element
            out += [_SCALAR[t.dtype]] * t.count
        else:
            raise NotImplementedError(f"no fast launch for a kernel argument of type {t}")
    return out


def pointer_slots(argtypes) -> dict[int, int]:
    """{argument index: parameter slot of its data pointer} for the array arguments, in the
    layout :func:`param_formats` describes (what kernels.plan patches at each call)."""
    out, slot = {}, 0
    for i, t in enumerate(argtypes):
        if isinstance(t, types.Array):
            out[i] = slot + 4  # after meminfo, parent, size, itemsize
            slot += 5 + 2 * t.ndim
        else:
            slot += 2 if t in _COMPLEX else t.count if isinstance(t, types.UniTuple) else 1
    return out


def param_values(argtypes, args) -> list:
    """The kernel parameters' values for ``args`` (DevArrays and scalars)."""
    out: list = []
    for t, a in zip(argtypes, args):
        if isinstance(t, types.Array):
            out += [0, 0, a.size, a.dtype.itemsize, a.ptr]
            out += a.shape
            out += a.strides
        elif t in _COMPLEX:
            out += [a.real, a.imag]
        elif isinstance(t, types.UniTuple):
            out += a
        else:
            out.append(a)
    return out


class Params:
    """Kernel parameters in 8-byte slots and the pointer array ``cuLaunchKernel`` reads
    (``params``: its address). ``pack`` fills the slots; the driver copies them at launch."""

    def __init__(self, formats):
        self.struct = struct.Struct("=" + "".join(f + "x" * (8 - struct.calcsize(f)) for f in formats))
        self.buf = ctypes.create_string_buffer(max(8, self.struct.size))
        base = ctypes.addressof(self.buf)
        self.ptrs = (ctypes.c_void_p * max(1, len(formats)))(*[base + 8 * i for i in range(len(formats))])
        self.params = ctypes.addressof(self.ptrs)
        # the slots as 64-bit integers: ``slots[i] = pointer`` writes one over what ``pack`` put in
        # slot i (what a plan call does per data pointer; 0.05 us, where struct.pack_into took 0.09)
        self.slots = memoryview(self.buf).cast("B").cast("q")

    def pack(self, values) -> None:
        self.struct.pack_into(self.buf, 0, *values)


class _Launcher:
    """One kernel compiled for ``argtypes`` in the current context, launched by the driver."""

    def __init__(self, dispatcher, argtypes):
        from cuda.bindings import driver

        compiled = dispatcher.compile(argtypes)
        # a CUkernel (a library's, what numba-cuda loads through cuda.core) or a CUfunction
        self.handle = compiled._codelibrary.get_cufunc().handle
        if isinstance(self.handle, driver.CUkernel):
            # launched as this context's CUfunction of it (launchers are per context): the driver
            # then has no kernel -> function lookup to do at each launch
            err, func = driver.cuKernelGetFunction(self.handle)
            if err == driver.CUresult.CUDA_SUCCESS:
                self.handle = func
        self.argtypes = argtypes
        self.params = Params(param_formats(argtypes))
        self.lock = threading.Lock()
        self.driver = driver  # kept: no import statement on the per-launch path

    def __call__(self, grid, block, stream: int, smem: int, args):
        values = param_values(self.argtypes, args)
        with self.lock:
            self.launch_packed(dim3(grid), dim3(block), stream, smem, values, self.params)

    def launch_packed(self, grid: tuple, block: tuple, stream: int, smem: int, values, params: Params) -> None:
        """Pack ``values`` (:func:`param_values`) into ``params`` and launch (the caller holds
        ``params`` exclusively; the driver copies them at launch)."""
        params.pack(values)
        self.launch_params(grid, block, stream, smem, params)

    def launch_params(self, grid: tuple, block: tuple, stream: int, smem: int, params: Params) -> None:
        """Launch with ``params`` as they are (packed earlier; the caller holds them exclusively)."""
        driver = self.driver
        (err,) = driver.cuLaunchKernel(self.handle, *grid, *block, smem, stream, params.params, 0)
        stats["fast_launches"] += 1
        if err != driver.CUresult.CUDA_SUCCESS:
            raise RuntimeError(f"cuLaunchKernel failed: {err.name} (grid {grid}, block {block}, "
                               f"{smem} bytes of shared memory)")


def _check(driver, err, what: str) -> None:
    if err != driver.CUresult.CUDA_SUCCESS:
        raise RuntimeError(f"{what} failed: {err.name}")


def _destroy(driver, made: dict) -> None:
    """Free a :class:`Graph`'s executable graph and graph (an executable graph still running is
    freed by the driver when it completes); errors at interpreter exit are ignored."""
    try:
        if "exec" in made:
            driver.cuGraphExecDestroy(made["exec"])
        if "graph" in made:
            driver.cuGraphDestroy(made["graph"])
    except Exception:  # the driver or its module already torn down
        pass


class Graph:
    """Kernel launches as one CUDA graph in the current context: the kernels run in the given
    order (each node depends on the one before), and :meth:`launch` runs them all with one
    ``cuGraphLaunch`` on ``stream``.

    ``launches``: ``(launcher, grid, block, smem, params, patched)`` per kernel, ``launcher`` a
    :class:`_Launcher` of a ``CUfunction``, ``params`` its :class:`Params` (their contents now are
    the node's parameters) and ``patched`` whether a call rewrites some of them: each such node
    takes ``params``' contents anew at every :meth:`launch` (the driver copies them then), the
    others keep the ones they were made with."""

    def __init__(self, launches, stream: int):
        driver = launches[0][0].driver
        self.driver = driver
        self._made: dict = {}
        weakref.finalize(self, _destroy, driver, self._made)
        err, graph = driver.cuGraphCreate(0)
        _check(driver, err, "cuGraphCreate")
        self._made["graph"] = graph
        self._updates = []  # (node, node parameters) of the nodes a call rewrites
        prev: list = []
        for launcher, grid, block, smem, params, patched in launches:
            node_params = driver.CUDA_KERNEL_NODE_PARAMS()
            node_params.func = launcher.handle
            node_params.gridDimX, node_params.gridDimY, node_params.gridDimZ = grid
            node_params.blockDimX, node_params.blockDimY, node_params.blockDimZ = block
            node_params.sharedMemBytes = smem
            node_params.kernelParams = params.params
            err, node = driver.cuGraphAddKernelNode(graph, prev, len(prev), node_params)
            _check(driver, err, f"cuGraphAddKernelNode (grid {grid}, block {block}, {smem} bytes of shared memory)")
            prev = [node]
            if patched:
                self._updates.append((node, node_params))
        err, self._exec = driver.cuGraphInstantiate(graph, 0)
        _check(driver, err, "cuGraphInstantiate")
        self._made["exec"] = self._exec
        self._stream = driver.CUstream(stream)
        (err,) = driver.cuGraphUpload(self._exec, self._stream)
        _check(driver, err, "cuGraphUpload")
        self.nodes = len(launches)

    def launch(self) -> None:
        """Run the graph on its stream, with the patched nodes' parameters as they are now (the
        caller holds their :class:`Params` exclusively)."""
        driver, exe = self.driver, self._exec
        for node, node_params in self._updates:
            (err,) = driver.cuGraphExecKernelNodeSetParams(exe, node, node_params)
            if err != driver.CUresult.CUDA_SUCCESS:
                raise RuntimeError(f"cuGraphExecKernelNodeSetParams failed: {err.name}")
        (err,) = driver.cuGraphLaunch(exe, self._stream)
        stats["graph_launches"] += 1
        if err != driver.CUresult.CUDA_SUCCESS:
            raise RuntimeError(f"cuGraphLaunch failed: {err.name} ({self.nodes} kernel(s))")


def graphable(launchers, streams) -> bool:
    """Whether recorded launches can be one :class:`Graph`: on one stream, each by a
    :class:`_Launcher`-like object holding a ``CUfunction`` of one driver module."""
    if len(set(streams)) != 1:
        return False
    drivers = {id(getattr(lc, "driver", None)) for lc in launchers}
    driver = getattr(launchers[0], "driver", None)
    return (driver is not None and len(drivers) == 1
            and all(isinstance(getattr(lc, "handle", None), driver.CUfunction) for lc in launchers))


_LAUNCHERS: dict = {}


def dim3(d) -> tuple:
    """A grid or block size (int or 1-3 ints) as 3 ints."""
    return (d, 1, 1) if isinstance(d, int) else tuple(d) + (1,) * (3 - len(d))


_PYTYPES = {int: types.int64, float: types.float64, complex: types.complex128, bool: types.boolean,
            **{getattr(np, t.name): t for t in (*_SCALAR, *_COMPLEX)}}


def _argtype(a):
    """numba type of a kernel argument (DevArrays keep theirs; scalars by their Python type;
    ``typeof`` otherwise): what numba-cuda's dispatch would give it."""
    nt = getattr(a, "_numba_type_", None)
    if nt is not None:
        return nt
    nt = _PYTYPES.get(type(a))
    if nt is not None:
        return nt
    from numba import typeof

    return typeof(a)


class ScalarTuple(tuple):
    """A kernel argument that is a non-empty tuple of NumPy scalars of one type, typed once (a
    numba ``UniTuple``): the fast launch need not type its elements; numba-cuda's launch gets it
    as a plain tuple. In the kernel it is a tuple (each element one kernel parameter)."""

    def __new__(cls, values):
        self = super().__new__(cls, values)
        if not self or len({type(v) for v in self}) != 1 or type(self[0]) not in _PYTYPES:
            raise TypeError("a ScalarTuple holds NumPy scalars of one type")
        self._numba_type_ = types.UniTuple(_PYTYPES[type(self[0])], len(self))
        return self


def launch(kernel, grid, block, stream: Stream, smem: int, *args) -> None:
    """The fast launch (see the module), else ``kernel[grid, block, stream, smem](*args)``."""
    ctx = current_context() if FAST else 0
    rec = getattr(recorder, "active", None)
    if not ctx:  # numba's launch (it also makes the context when this thread has none)
        kernel[grid, block, stream.numba, smem](*[tuple(a) if isinstance(a, ScalarTuple) else a for a in args])
        if rec is not None:
            rec.launches.append((None, grid, block, stream.handle, smem, args))  # not replayable
        return
    argtypes = tuple(_argtype(a) for a in args)
    key = (kernel, argtypes, ctx)
    launcher = _LAUNCHERS.get(key)
    if launcher is None:
        launcher = _LAUNCHERS[key] = _Launcher(kernel, argtypes)
    launcher(grid, block, stream.handle, int(smem), args)
    if rec is not None:
        rec.launches.append((launcher, dim3(grid), dim3(block), stream.handle, int(smem), args))


_RESIDENT: dict = {}


def resident_blocks(kernel, block, smem: int, *args) -> int | None:
    """How many blocks of ``kernel`` (compiled for ``args``' types) fit on the current GPU at
    once with ``block`` threads and ``smem`` bytes of dynamic shared memory (the grid of a
    persistent kernel), or None under the simulator. Cached per kernel, types, shape and context."""
    if simulator():
        return None
    argtypes = tuple(_argtype(a) for a in args)
    block = dim3(block)
    key = (kernel, argtypes, block, int(smem), current_context())
    n = _RESIDENT.get(key)
    if n is None:
        n = _RESIDENT[key] = kernel.compile(argtypes).max_cooperative_grid_blocks(block, int(smem))
    return n
