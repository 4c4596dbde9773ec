# SPDX-License-Identifier: Apache-2.0
"""Stateful plans: a ``kernels`` call prepared once, then replayed on new arrays of the same
shapes (what :func:`kernels.plan` returns).

Making a plan runs the function once, for real, while :mod:`kernels._launch` records every
kernel launch and :class:`kernels._arrays.Output` every allocation. Each recorded kernel argument
is then an input (a device array the caller passes again at each call, at an offset into it), a
result (allocated anew at each call) or a constant of the plan (filter spectra, windows,
intermediate buffers: kept alive by the plan and reused, in the plan's stream order). A call
checks each new array against the planned one (package, device, shape, dtype, C order, address
mod 16, which arrays share memory, the CUDA context), allocates the results and relaunches the
recorded kernels with their pointers patched, as one CUDA graph where they share a stream (one
``cuGraphLaunch`` per call, :class:`kernels._launch.Graph`): no argument parsing, descriptor
lookup, typing or host-side spectrum work (a device-taps spectrum kernel is one of the replayed
launches). Where launches cannot be replayed (the simulator, ``NUMBA_MATHDX_FAST_LAUNCH=0``) the
plan still checks its arguments the same way and then calls the function.
"""

from __future__ import annotations

import threading
from collections.abc import Callable
from types import SimpleNamespace

import numpy as np

from mathdx_operands import (
    DTYPES,
    DType,
    caller_kind,
    check_torch_values,
    current_context,
    ensure_context,
    on_device,
    package,
    package_of,
    resolve_stream,
    simulator,
)

from . import _launch
from ._arrays import DevArray, Output, _c_contiguous


class _Recording:
    def __init__(self):
        self.launches: list = []  # (launcher or None, grid, block, stream handle, smem, args)
        self.outputs: list = []  # Output objects, in allocation order


def _region(dev: DevArray) -> tuple[int, int]:
    return dev.ptr, dev.ptr + dev.size * dev.dtype.itemsize


def _locate(ptr: int, nbytes: int, regions) -> tuple[int, int] | None:
    """(index, offset) of the region of ``regions`` that holds [ptr, ptr + nbytes), or None."""
    for i, (lo, hi) in enumerate(regions):  # half-open: an array that starts where one ends is not in it
        if lo <= ptr and ptr + max(nbytes, 1) <= max(hi, lo + 1):
            return i, ptr - lo
    return None


def _probe(name, obj) -> tuple[tuple, int]:
    """(fingerprint, address) of a call's array, from one read of ``__cuda_array_interface__``.
    The fingerprint is what it must share with the planned one: package type, device, shape,
    dtype (type string), address mod 16 (the kernels' vector accesses depend on it); ValueError
    naming ``name`` unless it is C-contiguous."""
    if not hasattr(type(obj), "__cuda_array_interface__") and simulator():  # the simulator's array
        if not obj.is_c_contiguous():
            raise ValueError(f"{name} must be C-contiguous")
        ptr = obj._ary.ctypes.data
        return (type(obj), None, tuple(obj.shape), obj._ary.dtype.str, ptr % 16), ptr
    if package_of(obj) == "torch":  # its refusals, named, before its interface's own
        if not obj.is_cuda:
            raise TypeError(f"{name} must be a CUDA tensor like the planned one, got one on {obj.device}")
        if str(obj.layout) != "torch.strided":
            raise ValueError(f"{name} must be a strided (dense) tensor like the planned one, got layout {obj.layout}")
        check_torch_values(obj, name, grad=True)
    cai = obj.__cuda_array_interface__
    shape, typestr, strides = tuple(cai["shape"]), cai["typestr"], cai.get("strides")
    if strides is not None and not _c_contiguous(shape, strides, np.dtype(typestr).itemsize):
        raise ValueError(f"{name} must be C-contiguous (got strides {tuple(strides)})")
    ptr = cai["data"][0] or 0
    return (type(obj), _device(obj), shape, typestr, ptr % 16), ptr


def _cupy_layout(obj) -> tuple[tuple, int]:
    """((device, shape, dtype, strides), address) of a CuPy array, from its attributes: what a
    call compares of an array planned as CuPy's (its ``__cuda_array_interface__`` builds a dict
    and looks up the current stream)."""
    mem = obj.data
    return (mem.device_id, obj.shape, obj.dtype, obj.strides), mem.ptr


def _torch_reader(planned) -> Callable[[object], tuple]:
    """A reader of what a call compares of a torch tensor planned as ``planned`` (strided, like
    every tensor torch's interface describes), from its attributes: ``((device, shape, dtype,
    strides, requires_grad, conjugate bit, negative bit), address)``, or ``(None, 0)`` for another
    layout (sparse: no strides). Its interface builds a dict in Python at each read."""
    strided = planned.layout

    def read(obj):
        if obj.layout is not strided:
            return None, 0
        return ((obj.get_device(), obj.shape, obj.dtype, obj.stride(), obj.requires_grad, obj.is_conj(),
                 obj.is_neg()), obj.data_ptr())

    return read


def _quick_check(obj):
    """``(reader, planned layout)`` of a planned CuPy array or torch tensor, which a call's array
    may match by its attributes alone (else its interface's check decides), or None."""
    kind = package_of(obj)
    read = _cupy_layout if kind == "cupy" else _torch_reader(obj) if kind == "torch" else None
    return None if read is None else (read, read(obj)[0])


def _device(obj):
    """The GPU a CuPy array or torch tensor is on (None for other kinds: the context check).
    CuPy's from its memory pointer's device number (its ``.device`` makes a Device object: 0.2
    us a read), torch's by ``get_device()``; others by their ``device``'s ``index`` or ``id``."""
    kind = package_of(obj)
    if kind == "cupy":
        return obj.data.device_id
    if kind == "torch":
        return obj.get_device()
    d = getattr(obj, "device", None)
    return getattr(d, "id", None) if getattr(d, "index", None) is None else d.index


def _aliasing(ptrs) -> tuple:
    """Which arrays start at the same address (in place: ``add_noise(x, out=x)``)."""
    return tuple(ptrs.index(p) for p in ptrs)


class Plan:
    """``fn(*args, **kwargs)`` prepared for repeated calls on new arrays of the same kind.

    Made by :func:`kernels.plan` (see there); call it with one device array per name in
    :attr:`names`.

    Parameters
    ----------
    fn : callable
        The ``kernels`` function.
    args : sequence
        Its positional arguments for the planning call.
    kwargs : dict
        Its keyword arguments for the planning call (``stream`` excluded).
    stream : None, int or stream object
        The stream of every call (None: the current stream of the first device array's package).

    Attributes
    ----------
    fn : callable
        The function.
    names : list of str
        The arguments a call takes, in order: those given as device arrays when the plan was
        made (parameter names, keyword arguments by their keyword).
    replayed : bool
        True when calls relaunch the recorded kernels; False under the simulator or with
        ``NUMBA_MATHDX_FAST_LAUNCH=0``, where each call checks its arrays and then runs ``fn``.
    graphed : bool
        True when calls replay the recorded kernels as one CUDA graph (new parameters for the
        kernels whose arrays change, then one ``cuGraphLaunch``); False: one ``cuLaunchKernel``
        per kernel (launches on several streams, ``NUMBA_MATHDX_PLAN_GRAPHS=0``) or not replayed.
    stream : mathdx_operands.Stream
        The stream every call runs on, resolved when the plan was made.
    """

    def __init__(self, fn, args, kwargs, stream):
        self.fn = fn
        # the variable arguments: every device array among args (by position) and kwargs (by name)
        self._slots = [i for i, a in enumerate(args) if on_device(a)]
        self._keys = [k for k, v in kwargs.items() if on_device(v)]
        params = _signature(fn)
        pos = [n for n, prm in params.items() if prm.kind in (prm.POSITIONAL_ONLY, prm.POSITIONAL_OR_KEYWORD)]
        self.names = [pos[i] if i < len(pos) else f"args[{i}]" for i in self._slots] + list(self._keys)
        if not self.names:
            raise TypeError(f"plan({fn.__name__}, ...) needs at least one device array argument (CuPy, PyTorch or "
                            "Numba): NumPy inputs are copied at every call, call the function instead")
        given = [args[i] for i in self._slots] + [kwargs[k] for k in self._keys]
        # the fixed arguments (the device arrays' places left empty: the plan keeps no input alive)
        self._args = [None if i in self._slots else a for i, a in enumerate(args)]
        self._kwargs = {k: None if k in self._keys else v for k, v in kwargs.items()}
        self._set_planned(given)
        self._lock = threading.Lock()
        # the plan's stream, fixed now (None: the current stream of the first array's package)
        self.stream = resolve_stream(stream, SimpleNamespace(package=caller_kind(given[0], self.names[0])))
        if "stream" in params:
            self._kwargs["stream"] = kwargs["stream"] = self.stream.handle
        rec = _Recording()
        _launch.recorder.active = rec
        try:
            result = fn(*args, **kwargs)
        finally:
            _launch.recorder.active = None
        self.replayed = not simulator() and all(launch[0] is not None for launch in rec.launches)
        self._graph = None  # a kernels._launch.Graph of the replayed launches, where made
        if self.replayed:
            self._build(rec, given, result)

    def _set_planned(self, given) -> None:
        """What each call's arrays must share with the planned ones ``given`` (named by
        :attr:`names`): fingerprints, CuPy attributes, the sharing of start addresses."""
        probes = [_probe(n, a) for n, a in zip(self.names, given)]
        self._fp = [fp for fp, _ in probes]
        # CuPy arrays and torch tensors: their attributes as planned, which a call's array may
        # match (else the interface's check decides: another layout of the same C order, or an error)
        self._quick = [_quick_check(a) for a in given]
        # the sharing of start addresses, as each call must repeat it
        self._alias = _aliasing([ptr for _, ptr in probes])
        self._distinct = self._alias == tuple(range(len(probes)))  # no two start at one address

    def _build(self, rec, given, result):
        self._ctx = current_context()
        inputs = [DevArray.of(a, n) for n, a in zip(self.names, given)]
        in_regions = [_region(d) for d in inputs]
        outs = rec.outputs
        out_regions = [_region(o.dev) for o in outs]
        single = not isinstance(result, tuple)
        returned = [result] if single else list(result)
        # each returned array: an input passed back (``out=``) or one of the recorded outputs
        self._returns = []
        for r in returned:
            hit = next((("in", j) for j, a in enumerate(given) if r is a), None)
            if hit is None:
                if not on_device(r):
                    raise TypeError(f"plan({self.fn.__name__}, ...): the function returned a "
                                    f"{type(r).__name__}, not a device array: only calls on device arrays can be planned")
                rd = DevArray.of(r, "result")
                loc = _locate(rd.ptr, rd.size * rd.dtype.itemsize, out_regions)
                if loc is None or loc[1] != 0:
                    raise RuntimeError(f"plan({self.fn.__name__}, ...): a result is not an array the call allocated")
                hit = ("out", loc[0], tuple(r.shape))
            self._returns.append(hit)
        self._single = single
        fresh = sorted({h[1] for h in self._returns if h[0] == "out"})
        # outputs allocated anew at each call, by a maker that knows their shape, dtype and the
        # caller's package (not the planning call's operands, which would keep its arrays alive);
        # a call's pointers: its inputs', then its fresh outputs' (``ptrs`` in __call__)
        self._allocs = [_allocator(outs[j], self.stream) for j in fresh]
        self._group = _group_allocator([outs[j] for j in fresh], self.stream)
        where = {j: len(inputs) + k for k, j in enumerate(fresh)}
        self._returns = [hit if hit[0] == "in" else
                         ("out", fresh.index(hit[1]), None if hit[2] == outs[hit[1]].dev.shape else hit[2])
                         for hit in self._returns]
        self._plain = self._returns == [("out", k, None) for k in range(len(self._allocs))]
        self._keep = [outs[j].dev for j in range(len(outs)) if j not in where]  # scratch: kept, reused
        self._launches = []
        for launcher, grid, block, stream, smem, args in rec.launches:
            values = _launch.param_values(launcher.argtypes, args)
            patches = []
            for i, slot in _launch.pointer_slots(launcher.argtypes).items():
                a = args[i]
                nbytes = a.size * a.dtype.itemsize
                loc = _locate(a.ptr, nbytes, in_regions)
                if loc is not None:
                    patches.append((slot, loc[0], loc[1]))
                    continue
                loc = _locate(a.ptr, nbytes, out_regions)
                if loc is not None and loc[0] in where:
                    patches.append((slot, where[loc[0]], loc[1]))
                else:
                    self._keep.append(a)  # a constant: kept alive with its owner
            params = _launch.Params(_launch.param_formats(launcher.argtypes))
            params.pack(values)  # the constants, once: a call writes only its pointers over them
            self._launches.append((launcher, grid, block, stream, int(smem), tuple(patches), params))
        # one CUDA graph of the launches where they allow it (one stream, CUfunctions): a call then
        # rewrites the patched nodes' parameters and launches the graph once (kernels._launch.Graph)
        self._graph = None
        if (_launch.GRAPHS and self._launches
                and _launch.graphable([lc[0] for lc in self._launches], [lc[3] for lc in self._launches])):
            self._graph = _launch.Graph([(launcher, grid, block, smem, params, bool(patches))
                                         for launcher, grid, block, _, smem, patches, params in self._launches],
                                        self._launches[0][3])

    def __call__(self, *arrays):
        """Run the planned call on ``arrays`` (one per name in :attr:`names`, in that order);
        returns what the function returns, new result arrays at each call."""
        if len(arrays) != len(self.names):
            raise TypeError(f"this plan of {self.fn.__name__} takes {len(self.names)} array(s) "
                            f"({', '.join(self.names)}), got {len(arrays)}")
        ins = []
        for name, a, fp, quick in zip(self.names, arrays, self._fp, self._quick):
            if type(a) is not fp[0]:
                raise TypeError(f"{name} must be a device array like the planned one ({fp[0].__name__}), "
                                f"got {type(a).__name__}")
            if quick is not None:
                got, ptr = quick[0](a)
                if got == quick[1] and ptr % 16 == fp[4]:
                    ins.append(ptr)
                    continue
            got, ptr = _probe(name, a)
            if got != fp:
                raise ValueError(f"{name} must match the planned array: {_describe(fp)}; got {_describe(got)} "
                                 "(make a new plan for other shapes, dtypes or alignments)")
            ins.append(ptr)
        if len(ins) > 1 and (len(set(ins)) != len(ins) if self._distinct else _aliasing(ins) != self._alias):
            raise ValueError(f"the arrays ({', '.join(self.names)}) must share memory as the planned ones did "
                             f"(same start address: {self._alias}, got {_aliasing(ins)})")
        if not self.replayed:
            args, kwargs = list(self._args), dict(self._kwargs)
            for i, a in zip(self._slots, arrays):
                args[i] = a
            for k, a in zip(self._keys, arrays[len(self._slots):]):
                kwargs[k] = a
            return self.fn(*args, **kwargs)
        ctx = current_context()
        if ctx == 0:  # a thread with no current context (a new thread): numba makes its own current
            ctx = ensure_context()
        if ctx != self._ctx:
            raise RuntimeError(f"this plan of {self.fn.__name__} was made in another CUDA context (device): "
                               "call it where it was made, or make a plan there")
        # (array, pointer) per fresh result
        made = self._group() if self._group is not None else [make() for make in self._allocs]
        ptrs = ins
        for _, ptr in made:
            ptrs.append(ptr)
        graph = self._graph
        with self._lock:
            for launcher, grid, block, stream, smem, patches, params in self._launches:
                slots = params.slots
                for slot, idx, offset in patches:
                    slots[slot] = ptrs[idx] + offset
                if graph is None:
                    launcher.launch_params(grid, block, stream, smem, params)
            if graph is not None:
                graph.launch()
        if self._plain:  # every result fresh, in allocation order, of its recorded shape
            return made[0][0] if self._single else tuple([m[0] for m in made])
        if self._single:
            return _returned(self._returns[0], arrays, made)
        return tuple(_returned(hit, arrays, made) for hit in self._returns)

    @property
    def graphed(self) -> bool:
        """Whether calls replay the recorded kernels as one CUDA graph (see the class)."""
        return self._graph is not None

    def __repr__(self) -> str:
        return (f"Plan({self.fn.__name__}, arrays=({', '.join(self.names)}), "
                f"{('replayed as one CUDA graph' if self.graphed else 'replayed') if self.replayed else 'calls the function'}, "
                f"{self.stream!r})")


def _returned(hit, arrays, made):
    """One returned array of a call: an input passed back, or a fresh result (reshaped)."""
    if hit[0] == "in":
        return arrays[hit[1]]
    obj = made[hit[1]][0]
    return obj if hit[2] is None else obj.reshape(hit[2])


def _allocator(out: Output, stream) -> Callable[[], tuple]:
    """A maker of new arrays like the recorded output ``out`` (shape, dtype, the caller's
    package), allocated in ``stream``'s order: each call returns (array, data pointer).
    CuPy's and PyTorch's go through their package's allocator made once here (shape, strides,
    dtype and device looked up now), others through :class:`Output`."""
    kind, shape, dtype = out.like.package, out.dev.shape, out.dev.dtype
    if kind in ("cupy", "torch"):
        pkg = package(kind)
        alloc = pkg.allocator(*_layout(out), _device(out.obj))
        ptr, handle = pkg.ptr, stream.handle

        def make():
            obj = alloc(handle)
            return obj, ptr(obj)

        return make
    like = SimpleNamespace(package=kind)

    def make():
        new = Output(shape, dtype, like, stream)
        return new.obj, new.dev.ptr

    return make


def _layout(out: Output) -> tuple:
    """``(dtype, shape, element strides, elements)`` of a recorded output, as the packages'
    allocators take them."""
    dt = out.dev.dtype
    dtype = DTYPES.get(dt.name) or DType(dt.name, -1, dt.itemsize, dt.kind)
    return dtype, out.dev.shape, tuple(s // dt.itemsize for s in out.dev.strides), out.dev.size


GROUP_BYTES = 65536
"""Fresh results of a CuPy plan call come from one allocation where there are two or more and each
takes at most this many bytes (0: one allocation each); they then share its lifetime, so large ones
keep their own. H100, the matched filter's plan call at 8 rows (two results), three rounds
alternating: enqueue 14.46 -> 13.32 us, call + synchronize 20.08 -> 19.27 (best of each)."""


def _group_allocator(outs, stream) -> Callable[[], list] | None:
    """A maker of new arrays like the recorded outputs ``outs`` from one allocation of their
    package (``[(array, pointer), ...]``), or None: fewer than two, over :data:`GROUP_BYTES`
    each, not all CuPy's, or a package without the path."""
    if len(outs) < 2 or any(o.like.package != "cupy" or o.dev.size * o.dev.dtype.itemsize > GROUP_BYTES
                            for o in outs):
        return None
    alloc = package("cupy").group_allocator([_layout(o) for o in outs], _device(outs[0].obj))
    if alloc is None:
        return None
    handle = stream.handle
    return lambda: alloc(handle)


def _describe(fp) -> str:
    cls, device, shape, typestr, mod = fp
    where = "" if device is None else f" on device {device}"
    return f"{cls.__module__.split('.')[0]} {np.dtype(typestr).name} {shape}{where}, address mod 16 = {mod}"


def _signature(fn) -> dict:
    """``fn``'s parameters by name (empty when it has no inspectable signature)."""
    import inspect

    try:
        return dict(inspect.signature(fn).parameters)
    except (TypeError, ValueError):
        return {}


def plan(fn, *args, stream=None, **kwargs) -> Plan:
    """Prepare ``fn(*args, **kwargs)`` (a ``kernels`` function) for repeated calls.

    The call runs once now, for real (its result is discarded). The returned :class:`Plan` is
    then called with new device arrays in place of the ones given now (every CuPy, PyTorch or
    Numba device array among ``args`` and ``kwargs``, in that order: ``plan.names``), of the same
    package, shape and dtype, C-contiguous, at an address with the same remainder mod 16; other
    arguments (taps given as NumPy arrays, sizes, flags, seeds) stay as given now. Each call
    allocates new results and relaunches the recorded kernels with no other host work: the
    stateful form for calls in a loop (``nvmath_host.Matmul`` is its analogue for matmuls).

    Parameters
    ----------
    fn : callable
        One of ``kernels.fft_convolve``, ``fir_filter``, ``matched_filter``, ``stft_power``,
        ``batched_gemm``, ``beamform_spectra``, ``add_noise``.
    *args, **kwargs
        Its arguments for the planning call; at least one must be a device array.
    stream : optional
        The stream of every call (None: the current stream of the first device array's package,
        now). Passed to ``fn`` as its ``stream``.

    Returns
    -------
    Plan

    Raises
    ------
    TypeError
        No device array among the arguments, or ``fn`` returned something other than device
        arrays (NumPy inputs: call the function itself). Calls raise TypeError / ValueError
        naming the argument whose array differs from the planned one.
    """
    if not callable(fn):
        raise TypeError(f"fn must be a kernels function, got {type(fn).__name__}")
    return Plan(fn, args, kwargs, stream)
