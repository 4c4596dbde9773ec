# SPDX-License-Identifier: Apache-2.0
"""The stateful :class:`Matmul`: validate, plan, autotune, execute, reset and free.

It orchestrates the private modules: ``_options`` (the user's choices), ``_problem`` (the
validated problem and its cuBLASLt layouts, with ``_rules`` and ``_epilog_io``), ``_plan``
(the cuBLASLt objects), ``_execute`` (the launches), ``_mirror`` and ``_cpu`` (NumPy operands
with and without a GPU), ``_torch_cpu`` (torch CPU tensors as NumPy views), ``_algorithm``
(one cuBLASLt algorithm). The function form :func:`nvmath_host.matmul` is in ``_function``.
"""

from __future__ import annotations

import logging
import warnings
from typing import Any

import numpy as np

from mathdx_operands import UINT8, Operand, package, stream_handle, wrap

from . import _cpu, _execute, _gpu, _mirror, _plan, _torch_cpu
from . import _cublaslt as lt
from ._algorithm import Algorithm
from ._cpu import CPUExecutionWarning
from ._options import (
    MatmulComputeType,
    MatmulOptions,
    MatmulPlanPreferences,
    as_dataclass,
    check_options,
    check_preferences,
    check_qualifiers,
    is_int,
)
from ._problem import Problem
from ._rules import AUX_SCALE, NUMBER, scalar, split_aux_scale
from ._wrap import input_what, wrap_inputs
from .epilogs import MatmulEpilog

__all__ = [
    "Matmul",
    "MatmulComputeType",
    "MatmulOptions",
    "MatmulPlanPreferences",
    "Algorithm",
    "CPUExecutionWarning",
]


_LAZY = {False: "", True: " (conjugate bit set)"}  # an operand's torch conjugate bit, in errors


def _released(op: Operand) -> Operand:
    """``op``'s description without its array (what :meth:`Matmul.release_operands` keeps)."""
    return Operand(None, op.package, 0, op.shape, op.strides, op.dtype, op.device, op.conj)


class Matmul:
    """A stateful cuBLASLt matmul ``D = epilog(alpha * a @ b + beta * c)``.

    Create once, :meth:`plan` once (optionally :meth:`autotune`), then :meth:`execute` many
    times, swapping data with :meth:`reset_operands`. Use as a context manager or call
    :meth:`free`.

    Parameters
    ----------
    a, b : array
        ``(..., M, K)`` and ``(..., K, N)`` NumPy, CuPy, PyTorch or Numba device arrays, all
        of one package and device. Any C/F order or transposed view with a unit stride in
        one of the two last axes; leading axes are a strided batch (one operand may have
        none: it is broadcast). Host operands (NumPy arrays, torch CPU tensors) are copied to
        the device (``options.device_id``) and the result comes back as their kind, blocking;
        without a GPU NumPy computes it.
    c : array, optional
        ``(M, N)`` or ``(..., M, N)``, added as ``beta * c``; broadcast over the batch unless
        ``options.inplace``. An ``(M, 1)`` or ``(..., M, 1)`` column (its M elements adjacent)
        is added to each of the N columns, as in nvmath-python; the result is then F-ordered
        (cuBLASLt reads the column as a matrix of leading dimension 0). Of the result's
        dtype, except with an FP8 result: then float16 or bfloat16 (cuBLASLt never takes an
        FP8 ``c``), and not in place.
    alpha, beta : scalar, optional
        Default ``1`` and, when ``c`` is given, ``1`` (else ``0``).
    qualifiers : numpy.ndarray, optional
        Three elements of :data:`matrix_qualifiers_dtype` for ``a``, ``b``, ``c``: a non-zero
        ``is_conjugate`` multiplies the conjugate of ``a`` or ``b`` (complex; none for ``c``).
        A torch tensor's conjugate bit (a lazy ``.conj()``, e.g. ``x.mH``) is read the same
        way, so ``matmul(x.mH, y)`` is ``x^H y``; a qualifier on such a tensor conjugates it
        back. cuBLASLt conjugates only together with a transpose: a conjugated operand that is
        column-major (``x.mH`` of a row-major ``x``) gives a C-ordered result, a row-major one
        an F-ordered result, and one that cannot have its order (``c``, a bias, another
        conjugated operand or ``options.result_order`` fix it otherwise) is refused, named.
    quantization_scales : dict, optional
        FP8 only: ``{"a": ..., "b": ...}``, plus ``"d"`` for an FP8 result (the default
        without ``c`` or ``options.result_type``: ``a``'s dtype), each a float or a
        one-element float32 device array of the operands' package (a NumPy array on the CPU
        path): the dequantisation scales of ``a``/``b`` and the quantisation scale of the
        result, ``D = scale_d * epilog(alpha * (scale_a a) @ (scale_b b) + beta * c)``.
        ``"d"`` is refused for a 16/32-bit result and ``"c"`` always (cuBLASLt scales only
        an FP8 C, and takes none). FP8 needs a row-major ``a`` and a column-major ``b`` and
        compute capability >= 8.9.
    options : MatmulOptions or dict, optional
        See :class:`MatmulOptions`.
    stream : stream, optional
        Stream used by :meth:`execute` and :meth:`autotune` when they get none: an int handle,
        an object with ``__cuda_stream__``, or a CuPy/torch/Numba stream. Default: the
        operands' package's current stream, read at each call.

    Notes
    -----
    GPU operands are never synchronised: :meth:`execute` only enqueues work on the stream.
    NumPy operands are copied to the GPU and back (blocking). Without a GPU, NumPy operands
    are computed on the CPU by :func:`nvmath_host.epilogs.reference` (a
    :class:`CPUExecutionWarning` says so); NumPy FP8 operands (``ml_dtypes``) get the same
    scales, FP8 rounding, saturation and ``result_amax`` there.
    """

    def __init__(
        self,
        a: Any,
        b: Any,
        c: Any = None,
        *,
        alpha: float | complex | None = None,
        beta: float | complex | None = None,
        qualifiers: np.ndarray | None = None,
        quantization_scales: dict | None = None,
        options: MatmulOptions | dict | None = None,
        stream: Any = None,
        _stacklevel: int = 2,
    ):
        self.options = check_options(as_dataclass(options, MatmulOptions, "options"))
        if quantization_scales is not None and not isinstance(quantization_scales, dict):
            raise TypeError(
                "quantization_scales: expected a dict such as {'a': 1.0, 'b': 1.0} or None; got "
                f"{type(quantization_scales).__name__}"
            )
        self._gpu: _plan.GpuPlan | None = None
        self._exec: _execute.Executor | None = None
        self._planned = False
        self._blocking = self.options.blocking is True
        self._released = False  # release_operands() until the next reset_operands()
        self._ws_released = False  # execute(release_workspace=True) until the next launch
        self._ops: dict = {}
        # torch CPU tensors: NumPy views of their memory, the results torch CPU tensors again
        self._torch_cpu = _torch_cpu.operands_on_cpu(a, b, c)
        self._torch_c = c if self._torch_cpu and self.options.inplace else None
        if self._torch_cpu:
            a, b = _torch_cpu.to_numpy(a, "a", conj=True), _torch_cpu.to_numpy(b, "b", conj=True)
            c = _torch_cpu.to_numpy(c, "c") if c is not None else None
        oa, ob = wrap(a, "a", conj=True), wrap(b, "b", conj=True)
        oc = wrap(c, "c") if c is not None else None
        for name, op in (("b", ob), ("c", oc)):
            if op is None:
                continue
            if op.package != oa.package:
                raise TypeError(
                    f"{name}: a {op.package} array; a is a {oa.package} array (mixing packages "
                    "is not supported)"
                )
            if op.device != oa.device:
                raise ValueError(f"{name}: on device {op.device}; a is on device {oa.device}")
        if beta is not None and c is None:
            raise ValueError("beta: given without c")
        for nm, v in (("alpha", alpha), ("beta", beta)):
            if v is not None and (not isinstance(v, NUMBER) or isinstance(v, (bool, np.bool_))):
                raise TypeError(f"{nm}: expected a number; got {type(v).__name__}")
        self.package_name = oa.package
        self._host = oa.package == "numpy"
        if self._host and self.options.inplace and oc is not None and not c.flags.writeable:
            raise ValueError("c: a read-only array; options.inplace writes the result into c")
        self._user = {"a": oa, "b": ob, "c": oc}
        self._user_inputs: dict[str, Operand] = {}
        self._scales_in = dict(quantization_scales or {})
        self.algorithms: list[Algorithm] = []
        # Validate everything that can be before plan (shapes, dtypes, layouts), before any
        # CUDA call.
        self._conj = check_qualifiers(qualifiers, oa, ob)
        self._problem: Problem | None = Problem(
            oa, ob, oc, self.options, None, {}, dict.fromkeys(self._scales_in), self._conj
        )
        self.logger = self.options.logger or logging.getLogger()
        if self.logger.isEnabledFor(logging.INFO):  # (its arguments cost more than the check)
            pr = self._problem
            self.logger.info(
                "nvmath_host.Matmul: %s %s x %s (%s, batch %s, M=%d N=%d K=%d), compute %s, %s "
                "result of %s%s", oa.package, oa.dtype.name, ob.dtype.name,
                "c given" if oc is not None else "no c", pr.batch_shape or "none", pr.M, pr.N, pr.K,
                pr.compute_type.name, pr.order, pr.d_dtype.name,
                "".join(f", {n} conjugated" for n, f in zip("ab", self._conj) if f),
            )
        sc = self._problem.scale_np
        self.alpha = 1.0 if alpha is None else scalar(alpha, "alpha", sc)
        self.beta = (0.0 if c is None else 1.0) if beta is None else scalar(beta, "beta", sc)
        self._stream = stream_handle(stream) if stream is not None else None
        self._cpu = self._host and (self.options.device_id is None and not _gpu.available())
        if self._host and self.options.device_id is not None and not _gpu.available():
            raise ValueError("options.device_id: no CUDA device is available")
        if self._cpu:
            warnings.warn(
                "nvmath_host: no CUDA device; computing the matmul of NumPy operands on the CPU "
                "with NumPy (nvmath_host.epilogs.reference)",
                CPUExecutionWarning,
                stacklevel=_stacklevel,
            )
            self.device = None
        elif self._host:
            self.device = (
                self.options.device_id
                if self.options.device_id is not None
                else _gpu.current_device()
            )
        else:
            self.device = oa.device
        # NumPy FP8 operands (ml_dtypes) on the CPU path: scales are host floats
        self._cpu_scales = (
            {k: _cpu.host_scale(v, k) for k, v in self._scales_in.items()} if self._cpu else {}
        )
        self._pkg = None if self._cpu else package(self.package_name)
        if not self._cpu:
            # NumPy operands on a GPU: device copies, kept for the object's life
            self._ops = (
                _mirror.mirror_all(self._pkg, self._user, self.device)
                if self._host
                else dict(self._user)
            )

    # ------------------------------------------------------------------ plan
    def _make_problem(self, epilog, inputs, ops, scales, epilog_prefs) -> Problem:
        return Problem(
            ops["a"], ops["b"], ops["c"], self.options, epilog, inputs, dict.fromkeys(scales),
            self._conj, epilog_prefs,
        )

    def _wrap_inputs(self, epilog_inputs) -> dict[str, Operand]:
        if self._torch_cpu and isinstance(epilog_inputs, dict):
            epilog_inputs = {k: _torch_cpu.to_numpy(v, input_what(k)) for k, v in epilog_inputs.items()}
        out = wrap_inputs(epilog_inputs)
        for k, op in out.items():
            if op.package != self.package_name:
                raise TypeError(
                    f"epilog_inputs[{k!r}]: a {op.package} array; the operands are "
                    f"{self.package_name} arrays"
                )
            if not self._cpu and not self._host and op.device != self.device:
                raise ValueError(
                    f"epilog_inputs[{k!r}]: on device {op.device}; the operands are on "
                    f"{self.device}"
                )
        return out

    def plan(
        self,
        preferences: MatmulPlanPreferences | dict | None = None,
        algorithms: list[Algorithm] | None = None,
        *,
        epilog: MatmulEpilog | None = None,
        epilog_inputs: dict | None = None,
        stream: Any = None,
    ) -> list[Algorithm]:
        """Choose the epilog and ask cuBLASLt's heuristic for algorithms.

        Parameters
        ----------
        preferences : MatmulPlanPreferences or dict, optional
            How many algorithms and how much workspace.
        algorithms : list of Algorithm, optional
            Reuse algorithms (e.g. unpickled from an earlier autotune) instead of the heuristic.
        epilog : MatmulEpilog or str, optional
            The fused epilog, or its name (case-insensitive, e.g. ``"gelu_bias"``); default:
            none.
        epilog_inputs : dict, optional
            The epilog's inputs by name (``"bias"``, ``"relu_aux"``, ``"gelu_aux"``), arrays of
            the operands' package. The bias has the result's dtype, except with FP8 operands
            (cuBLASLt's FP8 table): bfloat16 for a float32 result, and for an FP8 result
            float16 or bfloat16 (``c``'s dtype when ``c`` is given). ``"aux_quantization_scale"``
            is the scale of an FP8 ``gelu_aux`` (see :class:`MatmulEpilogPreferences`), a float
            or a one-element float32 array.
        stream : stream, optional
            The stream the workspace is allocated in the order of (and the first
            :meth:`execute` orders after); default: the constructor's, else the current one.

        Returns
        -------
        list of Algorithm
            Best first (empty on the CPU path).
        """
        prefs = check_preferences(as_dataclass(preferences, MatmulPlanPreferences, "preferences"))
        aux_scale, epilog_inputs = split_aux_scale(epilog_inputs)
        user_inputs = self._wrap_inputs(epilog_inputs)
        if self._problem is None:
            raise RuntimeError("this Matmul was freed")
        self._check_not_released()
        plan_stream = stream_handle(stream) if stream is not None else None
        scales = {k: v for k, v in self._scales_in.items() if k != AUX_SCALE}
        if aux_scale is not None:  # the FP8 gelu_aux's scale: one more scale of the plan
            scales[AUX_SCALE] = aux_scale
        problem = self._make_problem(epilog, user_inputs, self._user, scales, prefs.epilog)  # validates
        cpu_scales = {k: _cpu.host_scale(v, k) for k, v in scales.items()} if self._cpu else {}
        if self._host and not self._cpu:
            device_inputs = _mirror.mirror_all(self._pkg, user_inputs, self.device)
            problem = self._make_problem(epilog, device_inputs, self._ops, scales, prefs.epilog)
        self._release_gpu()
        self._problem = problem
        self._user_inputs = user_inputs
        self._scales_in, self._cpu_scales = scales, cpu_scales
        if self._cpu:
            self._planned = True
            self.algorithms = []
            self.logger.info("nvmath_host.Matmul: planned epilog %s on the CPU (NumPy, no GPU)",
                             problem.epilog.name)
            return []
        with _gpu.DeviceScope(self.device):
            self._gpu = _plan.GpuPlan(
                problem,
                self._ops,
                self._scales_in,
                prefs,
                algorithms,
                self.device,
                self._pkg,
                plan_stream if plan_stream is not None else self._default_stream(),
                self._host,
            )
            self._ws_released = False
            self.algorithms = self._gpu.algorithms
            self._order = _gpu.StreamOrder(self._gpu.workspace_stream)
            self._exec = self._executor(0)
        self._planned = True
        self.logger.info(
            "nvmath_host.Matmul: planned epilog %s on device %s: %d algorithm(s) %s, workspace "
            "%d bytes", problem.epilog.name, self.device, len(self.algorithms),
            "given" if algorithms is not None else "from cuBLASLt's heuristic", self._gpu.workspace_size,
        )
        return list(self.algorithms)

    def _executor(self, index: int) -> _execute.Executor:
        """The launches of the plan with ``self.algorithms[index]``."""
        g, p = self._gpu, self._problem
        sc = p.scale_np
        self._alpha_buf = np.array([self.alpha], dtype=sc)
        self._beta_buf = np.array([self.beta if self._ops["c"] is not None else 0], dtype=sc)
        args = _execute.LaunchArgs(
            g.handle.ptr,
            g.desc.ptr,
            self._alpha_buf.ctypes.data,
            self._beta_buf.ctypes.data,
            [lay.ptr for lay in g.layouts],
            self.algorithms[index],
            g.workspace_ptr,
            g.workspace_size,
        )
        args.point_at(p, self._ops)
        return _execute.Executor(args, g.desc, self._pkg, p, self.device)

    def _default_stream(self):
        return self._stream if self._stream is not None else self._pkg.current_stream(self.device)

    # ------------------------------------------------------------------ autotune
    def autotune(
        self,
        iterations: int = 10,
        prune: int | None = None,
        release_workspace: bool = False,
        stream: Any = None,
    ) -> list[Algorithm]:
        """Time each planned algorithm and keep the fastest first.

        Runs each algorithm once to warm up, then ``iterations`` times round-robin on the
        plan's stream, flushing L2 before each run and timing it with CUDA events; waits for
        each timing (autotuning needs the times on the host). The results are discarded.

        Parameters
        ----------
        iterations : int
            Runs per algorithm (median taken).
        prune : int, optional
            Keep only this many algorithms.
        release_workspace : bool
            Return the workspace to its pool afterwards (see :meth:`execute`).
        stream : stream, optional
            Where to time them; default: the constructor's, else the current one.

        Returns
        -------
        list of Algorithm
            Fastest first, with ``time_ms`` set.
        """
        self._check_planned()
        self._check_not_released()
        if iterations < 1:
            raise ValueError(f"iterations: {iterations}; must be >= 1")
        if self._cpu:
            return []
        with _gpu.DeviceScope(self.device):
            stream = stream_handle(stream) if stream is not None else self._default_stream()
            self._order.switch_to(stream)  # after the plan's earlier work on another stream
            if self._ws_released:
                self._acquire_workspace(stream)
            try:
                _plan.autotune(
                    self._exec, self.algorithms, iterations, stream, self.device, self._pkg
                )
            finally:
                self._exec.args.use_algorithm(self.algorithms[0])
            self.algorithms.sort(key=lambda x: x.time_ms)
            if prune is not None:
                del self.algorithms[max(1, prune) :]
            self._exec.args.use_algorithm(self.algorithms[0])
            if release_workspace:
                self._release_workspace()
        self.logger.info(
            "nvmath_host.Matmul: autotuned (%d runs each): %s", iterations,
            ", ".join(f"{x.time_ms:.4f} ms" for x in self.algorithms),
        )
        return list(self.algorithms)

    def applicable_algorithm_ids(self, limit: int = 8) -> list[int]:
        """cuBLASLt's ids of the algorithms applicable to this matmul's types
        (``cublasLtMatmulAlgoGetIds``), in no particular order; empty on the CPU path.
        nvmath-python's name.

        Parameters
        ----------
        limit : int
            At most this many.
        """
        if not is_int(limit):
            raise TypeError(f"limit: expected an int; got {limit!r}")
        if limit < 1:
            raise ValueError(f"limit: {limit}; must be >= 1")
        if self._problem is None:
            raise RuntimeError("this Matmul was freed")
        if self._cpu:
            return []
        p = self._problem
        types = [int(x.dtype.cuda) for x in (p.layout_a, p.layout_b, p.layout_c, p.layout_d)]
        with _gpu.DeviceScope(self.device):
            return lt.algo_ids(_gpu.handle(self.device), int(p.compute_type), int(p.scale_type),
                               types, int(limit))

    def _release_workspace(self) -> None:
        """Return the workspace to its package's pool in the order of the stream it was
        allocated on, after the last stream's work (:class:`_gpu.StreamOrder`); the next launch
        allocates it anew."""
        g = self._gpu
        if g is None or g.workspace is None:
            return
        if self._order is not None:
            with _gpu.DeviceScope(self.device):
                self._order.switch_to(g.workspace_stream)
        g.workspace = None
        g.workspace_ptr = 0
        if self._exec is not None:
            self._exec.args.workspace = 0
        self._ws_released = True

    def _acquire_workspace(self, stream: int) -> None:
        """A new workspace of the plan's size, in ``stream``'s order (the plan's stream now)."""
        g = self._gpu
        ws = g.workspace_size
        g.workspace = self._pkg.empty(UINT8, (ws,), (1,), ws, self.device, stream)
        g.workspace_ptr = self._exec.args.workspace = self._pkg.ptr(g.workspace)
        g.workspace_stream = stream
        self._ws_released = False

    def _check_not_released(self) -> None:
        if self._released:
            raise RuntimeError(
                "the operands were released (release_operands()): give them again with "
                "reset_operands() first"
            )

    # ------------------------------------------------------------------ execute
    def _check_planned(self):
        if not self._planned:
            if self._problem is None:
                raise RuntimeError("this Matmul was freed")
            self.plan()

    def execute(self, stream: Any = None, *, algorithm: Algorithm | None = None,
                release_workspace: bool = False):
        """Run the planned matmul (plans with no epilog first if :meth:`plan` was not called).

        Parameters
        ----------
        stream : stream, optional
            Where to enqueue it; default: the constructor's ``stream``, else the operands'
            package's current stream. Nothing is synchronised for GPU operands.
        algorithm : Algorithm, optional
            One of :attr:`algorithms` to run this time (default: the first, the best).
        release_workspace : bool
            Return cuBLASLt's workspace to its package's pool once this launch is enqueued (in
            stream order: no synchronisation); the next launch allocates it again.

        Returns
        -------
        array, or (array, dict)
            The result, of the operands' package and device (``c`` itself with
            ``options.inplace``); with a dict of auxiliary outputs by name when there are
            some: the epilog's (``"relu_aux"``, ``"gelu_aux"``, ``"bgrad"``) and, with
            ``options.result_amax``, ``"result_amax"`` (one-element float32 array).
        """
        if not self._planned:
            self._check_planned()
        if self._released:
            self._check_not_released()
        if algorithm is not None and not any(algorithm is x for x in self.algorithms):
            raise ValueError(
                "algorithm: not one of this Matmul's algorithms (Matmul.algorithms"
                + (", empty on the CPU path)" if self._cpu else ")")
            )
        if self._cpu:
            u = self._user
            return self._host_result(_cpu.execute(
                self._problem,
                u["a"].obj,
                u["b"].obj,
                u["c"].obj if u["c"] is not None else None,
                {k: v.obj for k, v in self._user_inputs.items()},
                self.alpha,
                self.beta,
                self._cpu_scales,
            ))
        current = False
        if stream is not None:
            s = stream_handle(stream)
        elif self._stream is not None:
            s = self._stream
        else:
            s = self._exec.current_stream(self.device)
            current = True
        if algorithm is None and not release_workspace:
            return self._run(s, current)
        args = self._exec.args
        if algorithm is not None:
            args.use_algorithm(algorithm)
        try:
            return self._run(s, current)
        finally:
            args.use_algorithm(self.algorithms[0])
            if release_workspace:
                self._release_workspace()

    def _run(self, s: int, current: bool):
        """execute() on the planned GPU path, with the stream handle resolved (``current``: it
        is the package's current stream)."""
        if s != self._order.stream:
            self._order.switch_to(s)  # the workspace is never in use on two streams at once
        if self._ws_released:
            self._acquire_workspace(s)
        d, outs = self._exec.run(s, current)
        if self._blocking:  # options.blocking=True: the result is ready on return
            _gpu.check(self._exec.rt.cudaStreamSynchronize(s), "cudaStreamSynchronize")
        if d is None:  # in place: the result is c (its mirror for NumPy operands)
            d = (self._ops if self._host else self._user)["c"].obj
        if self._host:
            return self._host_result(_mirror.to_host(self._problem, d, outs, s, self._user["c"]))
        return (d, outs) if self._exec.outputs else d

    def _host_result(self, out):
        """A NumPy result (and outputs) as the caller's kind: torch CPU tensors for them."""
        if not self._torch_cpu:
            return out
        c = self._user["c"]
        return _torch_cpu.results(out, self._torch_c, c.obj if c is not None else None)

    # ------------------------------------------------------------------ reset / free
    def _swap_pointers(self, oa, ob, oc, inputs, alpha, beta):
        """:func:`matmul`'s cheap reset: its cache key already matched all but the pointers."""
        p, ops, user = self._problem, self._ops, self._user
        user["a"] = ops["a"] = p.a = oa
        user["b"] = ops["b"] = p.b = ob
        if oc is not None:
            user["c"] = ops["c"] = p.c = oc
        self._exec.args.point_at(p, ops)
        if alpha is not None or beta is not None:
            self._set_scales(alpha, beta)
        if inputs:
            handlers = p.input_handlers
            for k, op in inputs.items():
                if op.ptr != p.inputs[k].ptr:
                    self._gpu.desc.set_pointer(handlers[k].pointer_attr, op.ptr)
                p.inputs[k] = op
            self._user_inputs.update(inputs)

    def _set_scales(self, alpha, beta):
        """New alpha and/or beta (None: kept) into the plan's scale buffers."""
        sc = self._problem.scale_np
        if alpha is not None:
            self.alpha = self._alpha_buf[0] = scalar(alpha, "alpha", sc)
        if beta is not None:
            self.beta = self._beta_buf[0] = scalar(beta, "beta", sc)

    def _rebind(self, a, b, c, ptrs, inputs, alpha, beta):
        """:func:`matmul`'s reset on its torch path: the cache key matched every attribute of
        the tensors but their pointers (``ptrs``: of ``a``, ``b``, ``c``; ``inputs``:
        ``[(name, tensor, pointer)]``), so the plan's operands, which are its own (made by
        this object, never handed out), take the new tensors and pointers in place."""
        user, p = self._user, self._problem
        op = user["a"]
        op.obj, op.ptr = a, ptrs[0]
        op = user["b"]
        op.obj, op.ptr = b, ptrs[1]
        if c is not None:
            op = user["c"]
            op.obj, op.ptr = c, ptrs[2]
        self._exec.args.point_at(p, self._ops)
        if alpha is not None or beta is not None:
            self._set_scales(alpha, beta)
        if inputs:
            planned = p.inputs
            for k, v, ptr in inputs:
                op = planned[k]
                if op.ptr != ptr:
                    self._gpu.desc.set_pointer(p.input_handlers[k].pointer_attr, ptr)
                    op.ptr = ptr
                op.obj = v

    def reset_operands(
        self,
        a: Any = None,
        b: Any = None,
        c: Any = None,
        *,
        alpha: float | complex | None = None,
        beta: float | complex | None = None,
        quantization_scales: dict | None = None,
        epilog_inputs: dict | None = None,
        stream: Any = None,
    ) -> None:
        """Swap in new operands of the same shape, strides, dtype, package and device (and
        torch conjugate bit).

        Parameters
        ----------
        a, b, c : array, optional
            Replacements (``None`` keeps the current one; after :meth:`release_operands`,
            every operand the object was made with must be given).
        alpha, beta : scalar, optional
            New scales.
        quantization_scales : dict, optional
            FP8: new values for some of the planned scales (``"a"``, ``"b"``, ``"d"``), as
            for the constructor.
        epilog_inputs : dict, optional
            Replacements for some of the planned epilog inputs (all of them after
            :meth:`release_operands`).
        stream : stream, optional
            The stream NumPy operands are copied to the device on (default: the current one).
        """
        if self._problem is None:
            raise RuntimeError("this Matmul was freed")
        epilog_inputs, quantization_scales = _with_aux_scale(epilog_inputs, quantization_scales)
        new = {}
        for name, v in (("a", a), ("b", b), ("c", c)):
            if v is None:
                continue
            old = self._user[name]
            if old is None:
                raise ValueError(f"{name}: this Matmul was created without {name}")
            if self._torch_cpu:
                v = _torch_cpu.to_numpy(v, name, conj=name != "c")
            op = wrap(v, name, conj=name != "c")
            if op.signature() != old.signature():
                raise ValueError(
                    f"{name}: {op.package} {op.dtype.name} shape {op.shape} strides {op.strides} "
                    f"on device {op.device}{_LAZY[op.conj]} does not match the planned "
                    f"{old.package} {old.dtype.name} shape {old.shape} strides {old.strides} on "
                    f"device {old.device}{_LAZY[old.conj]}"
                )
            new[name] = op
        new_inputs = {}
        if epilog_inputs is not None:
            for k, op in self._wrap_inputs(epilog_inputs).items():
                old = self._user_inputs.get(k)
                if old is None:
                    raise ValueError(
                        f"epilog_inputs[{k!r}]: not an input of the planned epilog "
                        f"{self._problem.epilog.name} (it takes {list(self._problem.spec.inputs)})"
                    )
                if op.signature() != old.signature():
                    raise ValueError(f"epilog_inputs[{k!r}]: does not match the planned input")
                new_inputs[k] = op
        if self._released:
            self._check_complete(new, new_inputs)
        sc = self._problem.scale_np
        if alpha is not None:
            alpha = scalar(alpha, "alpha", sc)
        if beta is not None:
            if self._user["c"] is None:
                raise ValueError("beta: this Matmul has no c")
            beta = scalar(beta, "beta", sc)
        scales = self._checked_scales(quantization_scales)
        self._apply_reset(new, new_inputs, alpha, beta, scales, stream)
        if self._torch_c is not None and c is not None:
            self._torch_c = c  # in place: the tensor the result is written into

    def reset_operands_unchecked(
        self,
        *,
        a: Any = None,
        b: Any = None,
        c: Any = None,
        alpha: float | complex | None = None,
        beta: float | complex | None = None,
        quantization_scales: dict | None = None,
        epilog_inputs: dict | None = None,
        stream: Any = None,
    ) -> None:
        """:meth:`reset_operands` without its checks, for a hot loop: the new GPU operands must
        be of the planned package, device, shape, strides and dtype (and conjugate bit), which
        is not verified; only their pointers are read (and their alignment checked against
        the plan's, which cuBLASLt's algorithm depends on). Scales and FP8 quantization scales
        are converted as usual. NumPy operands are checked as by :meth:`reset_operands` (their
        copy to the device costs far more than the checks). nvmath-python's name and
        arguments.

        Parameters
        ----------
        a, b, c, alpha, beta, quantization_scales, epilog_inputs, stream
            As for :meth:`reset_operands`.
        """
        if self._problem is None:
            raise RuntimeError("this Matmul was freed")
        if self._host or self._cpu:
            return self.reset_operands(a, b, c, alpha=alpha, beta=beta, epilog_inputs=epilog_inputs,
                                       quantization_scales=quantization_scales, stream=stream)
        epilog_inputs, quantization_scales = _with_aux_scale(epilog_inputs, quantization_scales)
        ptr = self._pkg.ptr
        new = {}
        for name, v in (("a", a), ("b", b), ("c", c)):
            if v is not None:
                old = self._user[name]
                if old is None:
                    raise ValueError(f"{name}: this Matmul was created without {name}")
                new[name] = Operand(v, old.package, ptr(v), old.shape, old.strides, old.dtype, old.device,
                                    old.conj)
        new_inputs = {}
        for k, v in (epilog_inputs or {}).items():
            old = self._user_inputs.get(k)
            if old is None:
                raise ValueError(f"epilog_inputs[{k!r}]: not an input of the planned epilog")
            new_inputs[k] = Operand(v, old.package, ptr(v), old.shape, old.strides, old.dtype, old.device)
        if self._released:  # a null pointer would reach cuBLASLt
            self._check_complete(new, new_inputs)
        sc = self._problem.scale_np
        self._apply_reset(
            new,
            new_inputs,
            None if alpha is None else scalar(alpha, "alpha", sc),
            None if beta is None else scalar(beta, "beta", sc),
            self._checked_scales(quantization_scales),
            stream,
        )

    def release_operands(self) -> None:
        """Drop this object's references to the operands and epilog inputs (and, for NumPy
        operands, their device copies), so that their memory can be freed while the plan is
        kept. :meth:`execute` then refuses to run until :meth:`reset_operands` has given
        every operand again. nvmath-python's name."""
        if self._problem is None:
            raise RuntimeError("this Matmul was freed")
        p = self._problem
        for d in (self._user, self._ops, self._user_inputs, p.inputs):
            for k, op in d.items():
                if op is not None:
                    d[k] = _released(op)
        if not self._cpu:
            p.a, p.b, p.c = self._ops["a"], self._ops["b"], self._ops["c"]
        self._released = True

    def _check_complete(self, new, new_inputs) -> None:
        """After :meth:`release_operands`: ValueError unless ``new`` and ``new_inputs`` give
        every operand and epilog input again."""
        missing = [n for n in ("a", "b", "c") if self._user[n] is not None and n not in new]
        missing += [f"epilog_inputs[{k!r}]" for k in self._user_inputs if k not in new_inputs]
        if missing:
            raise ValueError(
                f"after release_operands(), reset_operands needs every operand again; missing "
                f"{', '.join(missing)}"
            )

    def _checked_scales(self, scales) -> dict:
        """New values of planned FP8 ``scales`` (a dict), checked by name (empty: none)."""
        if scales is None:
            return {}
        if not isinstance(scales, dict):
            raise TypeError(f"quantization_scales: expected a dict or None; got {type(scales).__name__}")
        extra = [k for k in scales if k not in self._scales_in]
        if AUX_SCALE in extra:
            raise ValueError(f"{AUX_SCALE}: the plan has no FP8 gelu_aux scale (plan one with it first)")
        if extra:
            raise ValueError(
                f"quantization_scales: {extra} not planned; this Matmul has scales for "
                f"{list(self._scales_in)} (they are part of the plan)"
            )
        if self._cpu:
            return {k: _cpu.host_scale(v, k) for k, v in scales.items()}
        return dict(scales)

    def _apply_reset(self, new, new_inputs, alpha, beta, scales, stream) -> None:
        """Install checked replacements: operands, epilog inputs, alpha/beta, FP8 scales."""
        if alpha is not None:
            self.alpha = alpha
        if beta is not None:
            self.beta = beta
        self._user.update(new)
        if new_inputs:
            self._user_inputs = {**self._user_inputs, **new_inputs}
        p = self._problem
        if self._cpu:
            self._cpu_scales.update(scales)
            self._scales_in.update(scales)
            self._released = False
            return
        if self._host:
            # new host data into the device mirrors (copies anew after release_operands); the
            # signature check (strides included) means each has its mirror's memory order
            s = stream_handle(stream) if stream is not None else None
            for name, op in new.items():
                self._ops[name] = _mirror.refresh(self._pkg, self._ops[name], op, self.device, s)
            for k, op in new_inputs.items():
                was = p.inputs[k].ptr
                p.inputs[k] = _mirror.refresh(self._pkg, p.inputs[k], op, self.device, s)
                if self._planned and p.inputs[k].ptr != was:  # a new copy (after a release)
                    self._gpu.desc.set_pointer(p.input_handlers[k].pointer_attr, p.inputs[k].ptr)
        else:
            for name, op in new.items():
                self._check_alignment(name, op.ptr)
                self._ops[name] = op
            for k, op in new_inputs.items():
                self._check_alignment(k, op.ptr)
                p.inputs[k] = op
                if self._planned:
                    self._gpu.desc.set_pointer(p.input_handlers[k].pointer_attr, op.ptr)
        self._scales_in.update(scales)
        if self._planned and scales:
            with _gpu.DeviceScope(self.device):
                g = self._gpu
                _plan.point_scales(g.desc, g.scale_arrays, p, scales, self._pkg, self.device, self._host)
        self._released = False
        p.a, p.b, p.c = self._ops["a"], self._ops["b"], self._ops["c"]
        if self._planned:
            if alpha is not None:
                self._alpha_buf[0] = alpha
            if beta is not None:
                self._beta_buf[0] = beta
            self._exec.args.point_at(p, self._ops)

    def _check_alignment(self, name, ptr):
        need = self._gpu.align.get(name) if self._gpu is not None else None
        if need and ptr % need:
            raise ValueError(
                f"{name}: pointer {ptr:#x} is less aligned than the planned {need} bytes; plan again"
            )

    def _release_gpu(self):
        self._planned = False
        g = self._gpu
        if g is None:
            self._exec = None
            return
        try:
            self._release_workspace()  # back to its pool after the last stream's work
        finally:
            self._gpu, self._exec = None, None
            g.destroy()
            order, self._order = self._order, None
            if order is not None:
                order.destroy()
            g.workspace = None

    def free(self) -> None:
        """Release the cuBLASLt descriptors and the workspace (the object is unusable after).

        No host synchronisation: if :meth:`execute` last ran on a stream other than the one the
        workspace was allocated on, that stream is first made to wait (a CUDA event) for the
        last one, so the pool cannot hand the workspace out while it is still in use.
        """
        self._release_gpu()
        self._problem = None
        self._ops = {}

    def __enter__(self) -> Matmul:
        return self

    def __exit__(self, *exc) -> None:
        self.free()

    def __del__(self):
        try:
            self._release_gpu()
        except Exception:
            pass


def _with_aux_scale(epilog_inputs, quantization_scales):
    """A reset's ``epilog_inputs`` without ``"aux_quantization_scale"``, and its
    ``quantization_scales`` with it (a scale of the plan, re-pointed as the FP8 ones are)."""
    aux, epilog_inputs = split_aux_scale(epilog_inputs)
    if aux is None:
        return epilog_inputs, quantization_scales
    if quantization_scales is not None and not isinstance(quantization_scales, dict):
        return epilog_inputs, quantization_scales  # _checked_scales names the type
    return epilog_inputs, {**(quantization_scales or {}), AUX_SCALE: aux}
