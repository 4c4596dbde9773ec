# SPDX-License-Identifier: Apache-2.0
"""A problem made into cuBLASLt objects: descriptor, layouts, heuristic, workspace; autotune."""

from __future__ import annotations

import math

import numpy as np

from mathdx_operands import DTYPES, UINT8, Operand, wrap

from . import _cublaslt as lt
from . import _gpu
from . import _rules as rules
from ._algorithm import Algorithm
from ._options import MatmulPlanPreferences

_A = lt.MatmulDescAttribute
_P = lt.PreferenceAttribute


class GpuPlan:
    """The cuBLASLt objects of one planned problem (made with its device current).

    Attributes
    ----------
    desc : lt.MatmulDesc
        The descriptor, with every attribute of the problem, its epilog and FP8 scales set.
    layouts : list of lt.MatrixLayout
        A, B, C, D as cuBLASLt sees them.
    algorithms : list of Algorithm
        The heuristic's, best first, or the ones given.
    align : dict
        Pointer alignment (bytes) planned for each operand and epilog input, by name.
    workspace, workspace_ptr, workspace_size, workspace_stream
        The workspace (an array of the operands' package, or None), allocated in the order of
        ``workspace_stream``.
    """

    def __init__(
        self,
        p,
        ops: dict[str, Operand | None],
        scales: dict,
        prefs: MatmulPlanPreferences,
        algorithms: list[Algorithm] | None,
        device: int,
        pkg,
        stream: int,
        host: bool,
    ):
        self._owned: list = []  # cuBLASLt objects, destroyed in reverse
        self.workspace = None
        try:
            self._make(p, ops, scales, prefs, algorithms, device, pkg, stream, host)
        except BaseException:
            self.destroy()
            raise

    def _make(self, p, ops, scales, prefs, algorithms, device, pkg, stream, host):
        if p.fp8:
            check_fp8_device(device)
        self.handle = _gpu.handle(device)
        self.desc = desc = self._own(lt.MatmulDesc(int(p.compute_type), int(p.scale_type)))
        desc.set(_A.TRANSA, int(p.trans_a))
        desc.set(_A.TRANSB, int(p.trans_b))
        desc.set(_A.EPILOGUE, int(p.lt_epilog))
        if p.options.sm_count_target:
            desc.set(_A.SM_COUNT_TARGET, int(p.options.sm_count_target))
        self.layouts = [
            self._own(lt.MatrixLayout(int(L.dtype.cuda), L.rows, L.cols, L.ld, L.batch, L.stride))
            for L in (p.layout_a, p.layout_b, p.layout_c, p.layout_d)
        ]
        # epilog inputs (pointers set now so the heuristic sees their alignment) and outputs
        for name, h in p.input_handlers.items():
            h.set_attributes(desc, p.inputs[name])
        for h in p.output_handlers:
            h.set_attributes(desc)
        self.scale_arrays = set_scales(desc, p, scales, pkg, device, host)
        pref = self._own(make_preference(prefs))
        self.align = alignments(p, ops)
        for attr, value in preference_alignments(p, ops, self.align).items():
            pref.set(attr, value)
        # Outputs (aux, bgrad, amax) get their pointers at each launch; give the heuristic
        # real ones now so that it picks algorithms that support them.
        for o in p.outputs:
            arr = pkg.empty(o.dtype, o.shape, o.strides, o.nelems, device, stream)
            desc.set_pointer(o.attr, pkg.ptr(arr))
        self.algorithms = choose_algorithms(
            p, self.handle, desc, self.layouts, pref, prefs, algorithms
        )
        ws = max(x.workspace_size for x in self.algorithms)
        self.workspace_ptr, self.workspace_size, self.workspace_stream = 0, ws, stream
        if ws:
            self.workspace = pkg.empty(UINT8, (ws,), (1,), ws, device, stream)
            self.workspace_ptr = pkg.ptr(self.workspace)

    def _own(self, obj):
        self._owned.append(obj)
        return obj

    def destroy(self) -> None:
        """Destroy the cuBLASLt objects (the workspace goes with the last reference)."""
        for obj in reversed(self._owned):
            obj.destroy()
        self._owned = []


def make_preference(prefs: MatmulPlanPreferences) -> lt.Preference:
    """The heuristic's preference object for ``prefs`` (the alignments are set by the plan)."""
    pref = lt.Preference()
    try:
        pref.set(_P.MAX_WORKSPACE_BYTES, prefs.max_workspace)
        pref.set(_P.REDUCTION_SCHEME_MASK, int(prefs.reduction_scheme_mask))
        pref.set(_P.MAX_WAVES_COUNT, float(prefs.max_waves_count))
        pref.set(_P.IMPL_MASK, int(prefs.numerical_impl_mask))
    except BaseException:
        pref.destroy()
        raise
    return pref


def check_fp8_device(device: int) -> None:
    """ValueError unless ``device`` runs FP8 matmuls (compute capability >= 8.9)."""
    major = _gpu.device_attribute("ComputeCapabilityMajor", device)
    minor = _gpu.device_attribute("ComputeCapabilityMinor", device)
    if (major, minor) < (8, 9):
        raise ValueError(
            f"a: FP8 needs compute capability >= 8.9; device {device} is {major}.{minor}"
        )


_SCALE_ATTRS = {
    "a": _A.A_SCALE_POINTER,
    "b": _A.B_SCALE_POINTER,
    "c": _A.C_SCALE_POINTER,
    "d": _A.D_SCALE_POINTER,
    rules.AUX_SCALE: _A.EPILOGUE_AUX_SCALE_POINTER,  # epilog_inputs["aux_quantization_scale"]
}


def set_scales(desc, p, scales: dict, pkg, device: int, host: bool) -> dict[str, Operand]:
    """Point ``desc`` at the FP8 scales (cuBLASLt's A is our b when ``p.swap``) and set fast
    accumulation; returns the scale arrays, which must live as long as the plan."""
    arrays: dict[str, Operand] = {}
    if not p.fp8:
        return arrays
    point_scales(desc, arrays, p, scales, pkg, device, host)
    if p.options.fast_accumulation:
        desc.set(_A.FAST_ACCUM, 1)
    return arrays


def point_scales(desc, arrays: dict, p, scales: dict, pkg, device: int, host: bool) -> None:
    """Point ``desc`` at the FP8 ``scales`` of problem ``p`` (cuBLASLt's A is our b when
    ``p.swap``), each a one-element device array put in ``arrays`` (which keeps it alive)."""
    lt_name = {"a": "b", "b": "a"} if p.swap else {"a": "a", "b": "b"}
    for k, v in scales.items():
        arrays[k] = arr = scale_array(v, k, pkg, device, host)
        desc.set_pointer(_SCALE_ATTRS[lt_name.get(k, k)], arr.ptr)


def scale_array(v, k: str, pkg, device: int, host: bool) -> Operand:
    """A quantization scale as a one-element float32 device array."""
    what = rules.scale_what(k)
    if isinstance(v, (int, float, np.floating)):
        arr = pkg.scalar_array(float(v), device)
        if host:  # a NumPy operand's scales live in its device mirror's package (CuPy)
            return Operand(arr, "numpy", arr.data.ptr, (1,), (1,), DTYPES["float32"], device)
        return wrap(arr, what)
    op = wrap(v, what)
    if op.dtype.name != "float32" or op.shape not in ((1,), ()):
        raise ValueError(f"{what}: expected a float or a one-element float32 array")
    return op


def alignments(p, ops) -> dict[str, int]:
    """The alignment of each operand's and epilog input's pointer (16 without ``c``)."""
    align = {
        "a": _gpu.alignment(ops["a"].ptr),
        "b": _gpu.alignment(ops["b"].ptr),
        "c": _gpu.alignment(ops["c"].ptr) if ops["c"] is not None else 16,
    }
    for k, v in p.inputs.items():
        align[k] = _gpu.alignment(v.ptr)
    return align


def preference_alignments(p, ops, align) -> dict[int, int]:
    """The heuristic's MIN_ALIGNMENT_{A,B,C,D}_BYTES (cuBLASLt's A is our b when swapped)."""
    first, second = ("b", "a") if p.swap else ("a", "b")
    d_align = align["c"] if p.inplace else 16
    if ops["c"] is not None:
        c_align = min(align["c"], d_align)
    elif p.c_ptr_from == "lt_a":  # C points at cuBLASLt's A operand
        c_align = align[first]
    else:
        c_align = d_align
    return {
        int(_P.MIN_ALIGNMENT_A_BYTES): align[first],
        int(_P.MIN_ALIGNMENT_B_BYTES): align[second],
        int(_P.MIN_ALIGNMENT_C_BYTES): c_align,
        int(_P.MIN_ALIGNMENT_D_BYTES): d_align,
    }


def choose_algorithms(p, handle, desc, layouts, pref, prefs, algorithms) -> list[Algorithm]:
    """The given ``algorithms`` checked, or the heuristic's (best first)."""
    if algorithms is not None:
        algos = list(algorithms)
        if not algos or not all(isinstance(x, Algorithm) for x in algos):
            raise TypeError("algorithms: expected a non-empty list of Algorithm")
        for x in algos:
            if x.version is not None and x.version != lt.version():
                raise ValueError(
                    f"algorithms: made with cuBLASLt {x.version}; this is {lt.version()}"
                )
        return algos
    results = lt.heuristic(handle, desc, *layouts, pref, prefs.limit)
    if not results:
        raise lt.CublasLtError(
            "cublasLtMatmulAlgoGetHeuristic",
            lt.Status.NOT_SUPPORTED,
            f"no algorithm for {p.a.dtype.name} {p.batch_shape}x({p.M}x{p.K})@({p.K}x{p.N}) "
            f"epilog {p.epilog.name}, compute {p.compute_type.name}",
        )
    return [Algorithm._from_result(r, lt.version()) for r in results]


def autotune(executor, algorithms: list[Algorithm], iterations: int, stream, device, pkg):
    """Time each algorithm with ``executor`` on ``stream``: each once to warm up, then
    ``iterations`` rounds round-robin (so that clock and thermal drift affect all alike),
    flushing L2 before each run and timing it with CUDA events. Sets each ``time_ms`` (the
    median; ``inf`` for one that fails to launch); waits for the stream."""
    rt, check = _gpu.rt(), _gpu.check
    l2 = _gpu.device_attribute("L2CacheSize", device)
    flush_n = max(2 * l2, 1 << 20)
    flush = pkg.empty(UINT8, (flush_n,), (1,), flush_n, device, stream)
    flush_ptr = pkg.ptr(flush)
    d, outs = executor.allocate(stream)
    args = executor.args
    start = check(rt.cudaEventCreate(), "cudaEventCreate")
    stop = check(rt.cudaEventCreate(), "cudaEventCreate")
    try:
        live = []
        for algo in algorithms:
            args.use_algorithm(algo)
            try:
                executor.launch(d, outs, stream)
                live.append(algo)
            except lt.CublasLtError:
                algo.time_ms = math.inf
        times = {id(a): [] for a in live}
        for it in range(iterations):
            for algo in live:
                args.use_algorithm(algo)
                check(rt.cudaMemsetAsync(flush_ptr, it & 0xFF, flush_n, stream), "cudaMemsetAsync")
                check(rt.cudaEventRecord(start, stream), "cudaEventRecord")
                executor.launch(d, outs, stream)
                check(rt.cudaEventRecord(stop, stream), "cudaEventRecord")
                check(rt.cudaEventSynchronize(stop), "cudaEventSynchronize")
                times[id(algo)].append(
                    check(rt.cudaEventElapsedTime(start, stop), "cudaEventElapsedTime")
                )
        for algo in live:
            algo.time_ms = float(np.median(times[id(algo)]))
    finally:
        rt.cudaEventDestroy(start)
        rt.cudaEventDestroy(stop)
        check(rt.cudaStreamSynchronize(stream), "cudaStreamSynchronize")
    del flush
