# SPDX-License-Identifier: Apache-2.0
"""The function form :func:`matmul`: a :class:`Matmul` per call, or a cached plan reused."""

from __future__ import annotations

import dataclasses
import threading
from collections import OrderedDict
from typing import Any

import numpy as np

from mathdx_operands import package, package_of, stream_handle

from . import _gpu
from ._algorithm import Algorithm
from ._options import (
    MatmulOptions,
    MatmulPlanPreferences,
    as_dataclass,
    check_options,
    check_qualifiers,
)
from ._torch_cpu import is_torch_cpu
from ._wrap import wrap_call
from .epilogs import MatmulEpilog, _as_epilog
from .matmul import Matmul

__all__ = ["matmul", "clear_plan_cache", "plan_cache_info"]

_CACHE_SIZE = 32
_PLAIN = (False, False)  # neither a nor b conjugated


class _Entry:
    """One key's idle plans (oldest first); ``live`` until the entry leaves the cache."""

    __slots__ = ("key", "plans", "live")

    def __init__(self, key):
        self.key = key
        self.plans: list = []
        self.live = True


class PlanCache:
    """:func:`matmul`'s plans: an LRU of idle plans, each checked out by one caller at a time.

    :meth:`checkout` takes an idle plan out of the cache, so that no other thread can get it
    and neither eviction nor :meth:`clear` can free it while its caller uses it; a caller that
    finds none builds a fresh plan. :meth:`checkin` puts the plan back as the most recently
    used one and frees the plans that fall off the end. A plan checked out before a
    :meth:`clear` (or built after a checkout that preceded it) is freed when it comes back
    instead of being cached. Several plans may be cached under one key (threads that ran the
    same problem at once); ``capacity`` counts plans. Plans are any objects with ``free()``;
    they are freed outside the lock.

    A key's entry stays in the cache, empty, while its plans are out, and the ticket of a
    checkout carries the entry: a checkin then finds it without looking the key up again (a
    :func:`matmul` call on a cache hit hashes its key twice, not four times). Eviction drops
    the empty entries it meets; :meth:`forget` drops one whose plan will not come back.
    """

    __slots__ = ("capacity", "_idle", "_size", "_generation", "_lock", "_newest")

    def __init__(self, capacity: int):
        self.capacity = capacity
        self._idle: OrderedDict = OrderedDict()  # key -> _Entry (least recently used first)
        self._size = 0  # idle plans
        self._generation = 0  # bumped by clear(): older checkouts are freed on checkin
        self._lock = threading.Lock()
        self._newest = None  # the entry checkin last moved to the end of _idle

    def checkout(self, key) -> tuple[Any, tuple]:
        """``(plan, ticket)``: an idle plan for ``key`` (now owned by the caller) or ``None``.

        Pass the ticket back to :meth:`checkin` with the plan (or with a fresh one built
        because there was none), or to :meth:`forget` if no plan will come back.
        """
        lock = self._lock  # (acquire/release: a third of the cost of `with` at every call)
        lock.acquire()
        try:
            entry = self._idle.get(key)
            if entry is not None and entry.plans:
                self._size -= 1
                return entry.plans.pop(), (self._generation, entry)
            return None, (self._generation, entry)
        finally:
            lock.release()

    def checkin(self, key, plan, ticket: tuple) -> None:
        """Return ``plan`` (checked out, or built, under ``ticket``) to the cache."""
        generation, entry = ticket
        doomed = None
        lock = self._lock
        lock.acquire()
        try:
            if generation != self._generation:
                doomed = [plan]  # cleared while it was out
            else:
                idle = self._idle
                if entry is None or not entry.live:
                    entry = idle.get(key)
                    if entry is None:
                        entry = idle[key] = _Entry(key)
                entry.plans.append(plan)
                if entry is not self._newest:  # (else it is last already: no rehash of its key)
                    idle.move_to_end(entry.key)  # (the stored key: compared by identity)
                    self._newest = entry
                self._size += 1
                if self._size > self.capacity:
                    doomed = []
                    while self._size > self.capacity:
                        oldest = next(iter(idle.values()))
                        if oldest.plans:
                            doomed.append(oldest.plans.pop(0))
                            self._size -= 1
                        if not oldest.plans:
                            del idle[oldest.key]
                            oldest.live = False
        finally:
            lock.release()
        if doomed:
            _free_all(doomed)

    def forget(self, ticket: tuple) -> None:
        """The plan of ``ticket``'s checkout will not come back (its caller freed it): drop
        the key's entry if it holds no idle plan."""
        entry = ticket[1]
        with self._lock:
            if entry is not None and entry.live and not entry.plans:
                del self._idle[entry.key]
                entry.live = False

    def clear(self) -> None:
        """Free every idle plan; plans checked out now are freed when they come back."""
        with self._lock:
            doomed = []
            for entry in self._idle.values():
                doomed += entry.plans
                entry.live = False
            self._idle.clear()
            self._newest = None
            self._size = 0
            self._generation += 1
        _free_all(doomed)

    def info(self) -> dict:
        """``{"size", "capacity", "keys"}`` of the idle plans (a key once per plan)."""
        with self._lock:
            keys = [k for k, entry in self._idle.items() for _ in entry.plans]
            return {"size": self._size, "capacity": self.capacity, "keys": keys}


def _free_all(plans) -> None:
    """``free()`` each plan; the first exception, if any, is raised after all were tried."""
    error = None
    for p in plans:
        try:
            p.free()
        except Exception as e:  # pragma: no cover - freeing a plan only fails on CUDA errors
            error = error or e
    if error is not None:
        raise error


_plans = PlanCache(_CACHE_SIZE)


def plan_cache_info() -> dict:
    """Size and keys of :func:`matmul`'s plan cache (for tests and debugging).

    Only idle plans are counted; plans in use by a :func:`matmul` call are not in the cache.
    """
    return _plans.info()


def clear_plan_cache() -> None:
    """Free every plan cached by :func:`matmul`.

    Plans in use by a :func:`matmul` call running in another thread are not freed under it:
    they are freed when that call ends instead of going back into the cache.
    """
    _plans.clear()


_OPTION_FIELDS = tuple(f.name for f in dataclasses.fields(MatmulOptions))


def _options_key(options):
    if isinstance(options, MatmulOptions):  # (dataclasses.astuple, without its deep copy)
        return tuple([getattr(options, f) for f in _OPTION_FIELDS])
    if isinstance(options, dict):
        return tuple(sorted(options.items()))
    return ("invalid", id(options))


def plan_key(oa, ob, oc, epilog, inputs, options, alpha, beta, stream, preferences, conj) -> tuple:
    """The plan-cache key of a :func:`matmul` call: everything but the data (the operands'
    signatures and pointer alignments, the epilog, options, whether alpha/beta were given,
    the stream, the preferences, which operands cuBLASLt conjugates).

    One flat tuple of strings, ints and shape/stride tuples, so that hashing and comparing it
    is cheap (this runs at every call, and the cache looks the key up once per call): a head
    of fixed length that also says whether ``c`` is given and how many epilog inputs there
    are, then ``c``'s six items if given, then seven per input, sorted by name.
    """
    al = _gpu.ALIGN16  # _gpu.alignment(ptr) == al[ptr & 15], inlined
    if epilog is not None:
        epilog = (epilog if type(epilog) is MatmulEpilog else _as_epilog(epilog))._value_
    key = (
        oa.package, oa.shape, oa.strides, oa.dtype.name, oa.device, al[oa.ptr & 15],
        ob.package, ob.shape, ob.strides, ob.dtype.name, ob.device, al[ob.ptr & 15],
        epilog,
        None if options is None else _options_key(options),
        None if preferences is None else repr(preferences),
        alpha is None,
        beta is None,
        stream,
        oc is None,
        len(inputs) if inputs else 0,
        conj,
    )  # fmt: skip
    if oc is not None:
        key += (oc.package, oc.shape, oc.strides, oc.dtype.name, oc.device, al[oc.ptr & 15])
    if inputs:
        for k in sorted(inputs) if len(inputs) > 1 else inputs:
            v = inputs[k]
            key += (k, v.package, v.shape, v.strides, v.dtype.name, v.device, al[v.ptr & 15])
    return key


def _torch_operand(x, t) -> tuple | None:
    """``(key part, pointer)`` of a torch tensor ``x`` of type ``t``, or None for another type.

    The key part is every attribute that :func:`mathdx_operands.wrap` reads and validates:
    shape, strides (elements), dtype, device index (``-1`` off the GPU: refused by the slow
    path, so never planned), pointer alignment (``ptr & 15``), conjugate and negative bits.
    """
    if type(x) is not t:
        return None
    p = x.data_ptr()
    return (x.shape, x.stride(), x.dtype, x.get_device(), p & 15, x.is_conj(), x.is_neg()), p


def _torch_key(a, b, c, epilog_inputs, rest) -> tuple | None:
    """:func:`matmul`'s cache key for CUDA torch operands, read from the tensors directly.

    ``(key, pointers, inputs)``: ``key`` is ``type(a)``, the :func:`_torch_operand` parts of
    ``a``, ``b`` and ``c`` (None when not given), ``rest`` (the epilog, options, preferences,
    which scales were given, the stream, the algorithm), then each epilog input's name and
    part, by name;
    ``pointers`` are those of ``a``, ``b``, ``c`` (0 when not given); ``inputs`` is
    ``[(name, tensor, pointer)]``. None when an array is not of ``a``'s type (or an input
    is not an array): such a call takes the general path.

    Two calls with equal keys pass :func:`~mathdx_operands.wrap`'s checks alike and make the
    same :class:`Matmul`, so a cached plan is reused on a hit without wrapping the operands
    (its own operands take the new pointers: :meth:`Matmul._rebind`).
    """
    t = type(a)
    oa, ob = _torch_operand(a, t), _torch_operand(b, t)
    if ob is None:
        return None
    if c is None:
        pc, kc = 0, None
    else:
        oc = _torch_operand(c, t)
        if oc is None:
            return None
        kc, pc = oc
    key = (t, oa[0], ob[0], kc, rest)
    inputs = []
    if epilog_inputs:
        if type(epilog_inputs) is not dict:
            return None
        for k in sorted(epilog_inputs) if len(epilog_inputs) > 1 else epilog_inputs:
            v = epilog_inputs[k]
            ov = _torch_operand(v, t)
            if ov is None or type(k) is not str:
                return None
            key += (k, ov[0])
            inputs.append((k, v, ov[1]))
    return key, (oa[1], ob[1], pc), inputs


def _torch_call(a, b, c, alpha, beta, epilog, epilog_inputs, options, preferences, algorithm, stream):
    """:func:`matmul` on CUDA torch tensors, if its plan is cached: ``(result, None)``.

    On a miss ``(None, key)``: the key to plan and cache under (:func:`_torch_key`); None
    when the call is not one for this path or an argument is bad (the general path then
    reports it, in its order, before any CUDA call).
    """
    try:
        if stream is None:
            s, current = package("torch").current_stream(a.get_device()), True
        else:
            s, current = stream_handle(stream), False
        if epilog is not None:
            epilog = (epilog if type(epilog) is MatmulEpilog else _as_epilog(epilog))._value_
        rest = (
            epilog,
            None if options is None else _options_key(options),
            None if preferences is None else repr(preferences),
            alpha is None,
            beta is None,
            s,
            None if algorithm is None else algorithm.data,
        )
        found = _torch_key(a, b, c, epilog_inputs, rest)
        if found is None:
            return None
        key, ptrs, inputs = found
        mm, ticket = _plans.checkout(key)
    except Exception:
        return None
    if mm is None:
        return None, key
    # mm is this call's alone until checkin (as in matmul())
    try:
        mm._rebind(a, b, c, ptrs, inputs, alpha, beta)
        result = mm._run(s, current)
    except BaseException:
        _plans.forget(ticket)
        mm.free()  # not cached: its state may be half updated
        raise
    _plans.checkin(key, mm, ticket)
    return result, None


def matmul(
    a: Any,
    b: Any,
    c: Any = None,
    *,
    alpha: float | complex | None = None,
    beta: float | complex | None = None,
    epilog: MatmulEpilog | None = None,
    epilog_inputs: dict | None = None,
    qualifiers: np.ndarray | None = None,
    quantization_scales: dict | None = None,
    options: MatmulOptions | dict | None = None,
    preferences: MatmulPlanPreferences | dict | None = None,
    algorithm: Algorithm | None = None,
    stream: Any = None,
):
    """Compute ``epilog(alpha * a @ b + beta * c)`` in one call.

    Same arguments and result as :class:`Matmul` + :meth:`Matmul.plan` +
    :meth:`Matmul.execute`. GPU plans are kept in a small LRU cache keyed on everything but
    the data (shapes, strides, dtypes, package, device, pointer alignment, epilog, options,
    stream), so repeated calls with the same shapes on the same stream do not re-plan. A
    cached plan keeps a reference to the arrays of its latest call until it is reused or
    evicted. Thread-safe: a call takes its plan out of the cache while it uses it (a call
    from another thread meanwhile plans its own), so no plan is shared by two calls at once
    or freed while one runs.

    Parameters
    ----------
    a, b : array
        ``(..., M, K)`` and ``(..., K, N)`` NumPy, CuPy, PyTorch (CUDA) or Numba device arrays,
        as for :class:`Matmul`.
    c : array, optional
        Added as ``beta * c``.
    alpha, beta : scalar, optional
        Default ``1`` and, when ``c`` is given, ``1`` (else ``0``).
    epilog : MatmulEpilog or str, optional
        The epilog fused into the matmul, or its name (case-insensitive, e.g.
        ``"gelu_bias"``); default: none.
    epilog_inputs : dict, optional
        The epilog's inputs by name, e.g. ``{"bias": bias}`` or ``{"relu_aux": mask}``; a key
        the epilog does not take is an error.
    qualifiers : numpy.ndarray, optional
        :data:`matrix_qualifiers_dtype` of ``a``, ``b``, ``c`` (conjugation); see
        :class:`Matmul`. A torch tensor's conjugate bit is read as one.
    quantization_scales : dict, optional
        FP8 only: ``{"a": ..., "b": ...}``, plus ``"d"`` for an FP8 result; see
        :class:`Matmul`.
    options : MatmulOptions or dict, optional
        See :class:`MatmulOptions`.
    preferences : MatmulPlanPreferences or dict, optional
        See :class:`MatmulPlanPreferences`.
    algorithm : Algorithm, optional
        Run this algorithm (e.g. the first of an earlier :meth:`Matmul.autotune`, possibly
        unpickled) instead of asking cuBLASLt's heuristic: valid only for the same problem
        and cuBLASLt version.
    stream : stream, optional
        An int handle, an object with ``__cuda_stream__``, or a CuPy/torch/Numba stream;
        default: the operands' package's current stream.

    Returns
    -------
    array or tuple
        ``d`` (same package, device and kind as ``a``), or ``(d, aux)`` when the epilog has
        auxiliary outputs or ``options.result_amax`` is set: ``aux`` a dict such as
        ``{"relu_aux": ...}``, ``{"bgrad": ...}`` or ``{"result_amax": ...}`` (a one-element
        float32 array: ``max |D|`` before the ``"d"`` scale).

    Examples
    --------
    >>> d = matmul(a, b, epilog=MatmulEpilog.RELU_BIAS, epilog_inputs={"bias": bias})  # doctest: +SKIP
    """
    if algorithm is not None and not isinstance(algorithm, Algorithm):
        raise TypeError(f"algorithm: expected an nvmath_host.Algorithm or None; got {type(algorithm).__name__}")
    algorithms = None if algorithm is None else [algorithm]
    host = is_torch_cpu(a)  # torch CPU tensors: read as NumPy views by Matmul
    key = None
    if not host and qualifiers is None and quantization_scales is None and package_of(a) == "torch":
        fast = _torch_call(a, b, c, alpha, beta, epilog, epilog_inputs, options, preferences, algorithm, stream)
        if fast is not None:
            result, key = fast
            if key is None:
                return result
    if not host:
        oa, ob, oc, inputs = wrap_call(a, b, c, epilog_inputs)
        host = oa.package == "numpy"
    qs = quantization_scales
    if host or (qs is not None and (type(qs) is not dict or qs)):
        # host operands / FP8 scales: no cache (Matmul checks the type of the scales)
        with Matmul(
            a,
            b,
            c,
            alpha=alpha,
            beta=beta,
            qualifiers=qualifiers,
            quantization_scales=quantization_scales,
            options=options,
            stream=stream,
            _stacklevel=3,
        ) as mm:
            mm.plan(preferences, algorithms, epilog=epilog, epilog_inputs=epilog_inputs)
            return mm.execute(stream=stream)
    conj = check_qualifiers(qualifiers, oa, ob) if qualifiers is not None or oa.conj or ob.conj else _PLAIN
    if epilog is not None and type(epilog) is not MatmulEpilog:
        epilog = _as_epilog(epilog)
    # The stream is part of the key: a plan is reused only on the stream it ran on, in whose
    # order its workspace is then used (cuBLASLt's workspace must not be shared by work that
    # may run concurrently).
    try:
        if stream is None:
            s = package(oa.package).current_stream(oa.device)
            current = True
        else:
            s = stream_handle(stream)
            current = False
    except Exception:
        # bad arguments are reported before any CUDA error (Matmul validates them first)
        Matmul(a, b, c, alpha=alpha, beta=beta, qualifiers=qualifiers, options=options).free()
        raise
    try:
        if key is None:  # (else the torch path's key, of this same call)
            key = plan_key(oa, ob, oc, epilog, inputs, options, alpha, beta, s, preferences, conj)
            if algorithm is not None:
                key += (algorithm.data,)
        mm, ticket = _plans.checkout(key)
    except TypeError:  # options that cannot be a key (unhashable or unsortable values)
        check_options(as_dataclass(options, MatmulOptions, "options"))  # names the field
        raise TypeError(f"options: cannot be used as a cache key: {options!r}") from None
    # mm is this call's alone until checkin: no other thread swaps pointers into it, launches
    # it or frees it (eviction and clear_plan_cache() never see a checked-out plan)
    try:
        if mm is None:
            mm = Matmul(a, b, c, alpha=alpha, beta=beta, qualifiers=qualifiers, options=options, stream=s)
            mm.plan(preferences, algorithms, epilog=epilog, epilog_inputs=epilog_inputs)
        else:
            # same key: same shapes, strides, dtypes, device, alignment; only pointers change
            mm._swap_pointers(oa, ob, oc, inputs, alpha, beta)
        result = mm._run(s, current)
    except BaseException:
        _plans.forget(ticket)
        if mm is not None:  # not cached: its state may be half updated
            mm.free()
        raise
    _plans.checkin(key, mm, ticket)
    return result
