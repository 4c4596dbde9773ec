# SPDX-License-Identifier: Apache-2.0
"""Dask arrays in, Dask arrays out: chunk checks, halos and ``blockwise`` graphs for each
:mod:`kernels` function.

The public functions (``kernels.fft_convolve`` ...) are the plain ones wrapped by
:func:`dask_aware`: a Dask array as the signal (``x``, or ``a`` of ``batched_gemm``) goes to the
function of the same name here, which checks the chunking and the arguments the graph depends
on, and returns Dask array(s) whose every block is one call of the plain function on one block
of the input, on the worker that computes it (its current CuPy stream; NumPy blocks take the
plain function's NumPy path). Nothing is computed when the graph is built.

Chunking rules:

- rows (batch entries) may be chunked freely in every function;
- the sample axis of ``fir_filter`` may be chunked: each time block is filtered on its own and
  the ``len(taps) - 1`` samples before it (its tail, possibly spanning several blocks) add their
  contribution to the block's first outputs (a second, small filter call of tail + zeros), so no
  block is copied to prepend a halo; chained ``fir_filter`` calls on such results become one
  chain of filters per block (:func:`_fir_time_graph`);
- the sample axis of ``stft_power`` may be chunked: the frames starting in a time block are
  computed from that block's samples plus the ``nfft - hop`` samples after it;
- ``fft_convolve``, ``matched_filter`` and ``add_noise`` need whole rows, ``batched_gemm``
  whole matrices and ``beamform_spectra`` whole (channels, samples) blocks: a chunking error
  says what to rechunk.

Small arguments (taps, template, window, weights) may be Dask arrays too (at most
``SMALL_MAX`` elements): each becomes one block that every task receives.

dask is imported only once a Dask array has been passed (it is then already imported):
``import kernels`` does not import it, and :func:`is_dask_array` never does.
"""

from __future__ import annotations

import bisect
import functools
import inspect
import math
import numbers
import operator
import sys
import threading

import numpy as np

from mathdx_operands import on_device, simulator

from . import _direct, convolution, gemm, noise, spectral

#: The install that brings dask, distributed and dask-cuda.
INSTALL = 'pip install "numba-mathdx[dask]"'
#: Most elements a Dask-array argument other than the signal (taps, template, window, weights)
#: may have: it is computed as one block and handed to every task.
SMALL_MAX = 1 << 22

_REAL = (np.dtype(np.float32), np.dtype(np.float64))
_COMPLEX = (np.dtype(np.complex64), np.dtype(np.complex128))


def is_dask_array(obj) -> bool:
    """Whether ``obj`` is a Dask array; never imports dask (if ``dask.array`` has not been
    imported, no Dask array can exist)."""
    mod = sys.modules.get("dask.array")
    if mod is None:
        return False
    cls = getattr(mod, "Array", None)
    return cls is not None and isinstance(obj, cls)


def import_dask():
    """``dask.array``, or an ImportError naming the install."""
    try:
        import dask.array as da
    except ImportError as e:
        raise ImportError(f"Dask arrays need dask[array], which is not installed ({e}): {INSTALL}") from None
    return da


def dask_aware(plain):
    """The public function: ``plain`` (same signature and docstring), except that a Dask array as
    its first argument goes to this module's function of the same name."""
    chunked = _CHUNKED[plain.__name__]
    first = next(iter(inspect.signature(plain).parameters))

    @functools.wraps(plain)
    def entry(*args, **kwargs):
        if is_dask_array(args[0] if args else kwargs.get(first)):
            return chunked(*args, **kwargs)
        return plain(*args, **kwargs)

    entry.__module__ = "kernels"  # pickled by reference as kernels.<name> (this object)
    return entry


# ---------------------------------------------------------------------------------------------
# checks (at graph construction: nothing runs)


def _show(chunks) -> str:
    """A chunks tuple for a message, abbreviated past 8 entries."""
    chunks = tuple(chunks)
    if len(chunks) <= 8:
        return str(chunks)
    return "(" + ", ".join(map(str, chunks[:6])) + f", ... {len(chunks) - 6} more)"


def _check_signal(func, name, x, dtypes, ndims):
    """``x``'s dtype, number of dimensions and kind of chunks (NumPy or CuPy), as the plain
    function checks them (same messages)."""
    dt = np.dtype(x.dtype)
    if dt not in dtypes:
        raise TypeError(f"{name} must have dtype {' or '.join(d.name for d in dtypes)}, got {dt.name}")
    if x.ndim not in ndims:
        raise ValueError(f"{name} must have {' or '.join(map(str, ndims))} dimension(s), got shape {x.shape}")
    meta = getattr(x, "_meta", None)
    if type(meta) is not np.ndarray and type(meta).__module__.split(".")[0] != "cupy":
        raise TypeError(f"{func}: {name} must be a Dask array of NumPy or CuPy chunks, got chunks of "
                        f"{type(x._meta).__name__}")


def _whole(func, name, x, axes, what):
    """ValueError naming the rechunk when ``x`` is split along any of ``axes``."""
    split = [a for a in axes if len(x.chunks[a]) > 1]
    if split:
        where = "; ".join(f"along axis {a} (chunks {_show(x.chunks[a])})" for a in split)
        fix = ", ".join(f"{a}: -1" for a in split)
        raise ValueError(f"{name} is chunked {where}; {func} needs {what}: {name}.rechunk({{{fix}}})")


def _known(func, name, x, axis):
    """ValueError when ``x``'s chunk sizes along ``axis`` are unknown (NaN)."""
    if any(isinstance(c, float) and math.isnan(c) for c in x.chunks[axis]):
        raise ValueError(f"{name} has unknown chunk sizes along axis {axis}; {func} needs them: "
                         f"call {name}.compute_chunk_sizes() first")


def _no_stream(func, stream):
    if stream is not None:
        raise TypeError(f"{func}: stream cannot be given with a Dask array: each block runs on the current "
                        f"CuPy stream of the worker that computes it (got stream={stream!r})")


def _shape_of(name, v) -> tuple:
    """The shape of a small argument (array of any kind, or a list), without copying it."""
    if is_dask_array(v) and any(isinstance(d, float) and math.isnan(d) for d in v.shape):
        raise ValueError(f"{name} is a Dask array of unknown shape {v.shape}; compute its chunk sizes "
                         f"({name}.compute_chunk_sizes()) or pass a NumPy/CuPy array")
    if is_dask_array(v) or hasattr(v, "shape"):
        return tuple(v.shape)
    try:
        return tuple(np.shape(v))
    except (TypeError, ValueError):  # a ragged list
        raise TypeError(f"{name} must be an array of numbers, got {type(v).__name__}") from None


def _small(func, name, v):
    """A small argument for the graph: a Dask array as one block (refused past ``SMALL_MAX``
    elements or with unknown sizes), a list as a NumPy array, anything else as it is."""
    if is_dask_array(v):
        _shape_of(name, v)  # known
        if v.size > SMALL_MAX:
            raise ValueError(f"{func}: {name} is a Dask array of {v.size} elements; at most {SMALL_MAX} are "
                             f"accepted (it is handed whole to every task): pass a NumPy or CuPy array")
        return v.rechunk({a: -1 for a in range(v.ndim)})
    if isinstance(v, (list, tuple)):
        return np.asarray(v)
    return v


def _length(func, name, v, what):
    """``len(v)`` of a 1-D small argument; ValueError with ``what`` otherwise."""
    shape = _shape_of(name, v)
    if len(shape) != 1 or shape[0] == 0:
        raise ValueError(f"{name} must be {what}, got shape {shape}")
    return int(shape[0])


def _int_at_least(name, v, low):
    if isinstance(v, (bool, np.bool_)) or not isinstance(v, (int, np.integer)) or v < low:
        raise ValueError(f"{name} must be an int >= {low}, got {v!r}")
    return int(v)


# ---------------------------------------------------------------------------------------------
# graphs


def _module(a):
    """The array module (``numpy`` or ``cupy``, already imported) of the array ``a``."""
    return sys.modules[type(a).__module__.split(".")[0]]


def _meta(like, ndim, dtype):
    """An empty array of ``like``'s chunk kind (NumPy or CuPy), as dask's ``meta`` of an output."""
    return _module(like._meta).empty((0,) * ndim, dtype=dtype)


def _blockwise(fn, out_ind, x, x_ind, small=(), *, dtype, meta=None, new_axes=None, adjust_chunks=None,
               **kwargs):
    """``fn(x_block, *small, **kwargs)`` for every block of ``x``: small Dask arguments (one
    block each, see :func:`_small`) enter the graph under indices of their own, so that every
    task receives their one block."""
    da = import_dask()
    args = [x, x_ind]
    letters = iter("pqrstuvw")
    for v in small:
        if is_dask_array(v):
            args += [v, "".join(next(letters) for _ in range(v.ndim))]
        else:
            args += [v, None]
    if meta is None:
        meta = _meta(x, len(out_ind), dtype)
    return da.blockwise(fn, out_ind, *args, concatenate=True, dtype=dtype, meta=meta, new_axes=new_axes,
                        adjust_chunks=adjust_chunks, **kwargs)


def _contig(a):
    """``a`` C-contiguous (blocks cut from a larger block along the sample axis are views)."""
    flags = getattr(a, "flags", None)
    if flags is not None and not flags.c_contiguous:
        return a.copy()  # NumPy's and CuPy's copy(): C order
    return a


def _ind(ndim) -> str:
    """Block indices of a signal: rows ``i`` (when 2-D), samples ``j``."""
    return "ij"[2 - ndim:]


def fir_tail_sources(bounds, halo):
    """Where the tail of each time block lies, for a signal chunked at ``bounds`` (``0 = b_0 <=
    b_1 <= ... = L``) and a filter of ``halo`` past samples: per block ``k``, ``None`` when no
    sample precedes it (or ``halo == 0``), else ``(blocks, offset)``: the samples ``[max(b_k -
    halo, 0), b_k)`` are the non-empty blocks ``blocks`` (consecutive, the last ``k - 1`` or before)
    concatenated, from ``offset`` on (fewer than ``halo`` at the signal's start, where zeros
    precede it)."""
    out = []
    for k, b in enumerate(bounds[:-1]):
        a = max(b - halo, 0)
        first = bisect.bisect_right(bounds, a, 0, k + 1) - 1  # the last block starting at or before a
        blocks = [j for j in range(first, k) if bounds[j] < bounds[j + 1]]
        out.append((blocks, a - bounds[blocks[0]]) if halo and blocks else None)
    return out


def stft_pieces(bounds, nfft, hop):
    """The time pieces of a signal chunked at ``bounds`` for frames of ``nfft`` samples every
    ``hop``: one ``(start, stop, frames)`` per block in which at least one frame starts (frame
    ``f`` belongs to the block holding its first sample ``f * hop``), ``[start, stop)`` exactly the
    samples of its ``frames`` frames."""
    total = 1 + (bounds[-1] - nfft) // hop
    first = [min(-(-b // hop), total) for b in bounds]  # the first frame starting at or after b
    return [(f0 * hop, (f1 - 1) * hop + nfft, f1 - f0) for f0, f1 in zip(first[:-1], first[1:]) if f1 > f0]


def _bounds(chunks) -> list:
    out = [0]
    for c in chunks:
        out.append(out[-1] + int(c))
    return out


# ---------------------------------------------------------------------------------------------
# block functions (module level: tasks pickle them by reference)

_SIM_LOCK = threading.Lock()


def _call(fn, *args, **kwargs):
    """``fn(*args, **kwargs)``; under the CUDA simulator one at a time per process (it runs one
    kernel at a time: Dask's threaded scheduler would launch blocks from several threads)."""
    if simulator():
        with _SIM_LOCK:
            return fn(*args, **kwargs)
    return fn(*args, **kwargs)



def _fft_convolve_block(x, h, method="auto"):
    return _call(convolution.fft_convolve, _contig(x), h, method=method)


def _fir_block(x, taps, fft_size=None, method="auto"):
    if x.shape[-1] == 0:
        return x.copy()
    return _call(convolution.fir_filter, _contig(x), taps, fft_size=fft_size, method=method)


def _fir_tail(blocks, offset):
    """The samples before a time block: its source ``blocks`` joined, from ``offset`` on (a copy:
    no view keeps a whole block alive, or travels with it to another worker)."""
    if len(blocks) == 1:
        return blocks[0][..., offset:].copy()
    return _contig(_module(blocks[0]).concatenate(blocks, axis=-1)[..., offset:])


def _fir_chain_block(x, tail, exact, spec, *taps):
    """The block ``x`` through a chain of causal FIR filters (``spec``: one ``(halo, fft_size,
    method)`` per filter, ``halo = len(taps) - 1``; ``taps``: theirs, in order), as if ``tail`` (the
    samples before it, at least the halos' sum of them unless ``exact``; None: none precede it)
    preceded it. Per filter: ``x`` filtered alone, plus the tail's contribution to its first
    ``min(halo, len)`` outputs, which is the filter of ``tail`` followed by zeros, past the tail;
    the same call filters the tail itself for the next filter, keeping the outputs that depend on
    the tail's samples only (all of them when ``exact``: zeros precede the tail, the signal
    starts there). The tails' short pieces of any length run with ``method="auto"`` where the
    blocks run ``"direct"`` (whose rows must be multiples of 64 samples)."""
    for (halo, fft_size, method), t in zip(spec, taps):
        y = _fir_block(x, t, fft_size, method)
        if tail is not None and tail.shape[-1]:
            n, m = min(halo, x.shape[-1]), tail.shape[-1]
            xp = _module(x)
            u = xp.concatenate([tail, xp.zeros(tail.shape[:-1] + (n,), dtype=tail.dtype)], axis=-1)
            r = _call(convolution.fir_filter, u, t, fft_size=fft_size, method="auto" if method == "direct" else method)
            y[..., :n] += r[..., m:]
            tail = r[..., :m] if exact else r[..., min(halo, m):m]
        x = y
    return x


def _matched_block(x, template, return_correlation=False):
    return _call(spectral.matched_filter, _contig(x), template, return_correlation=return_correlation)


def _stft_block(x, window, hop):
    return _call(spectral.stft_power, _contig(x), window, hop)


def _gemm_block(a, b, c, alpha, beta):
    return _call(gemm.batched_gemm, _contig(a), _contig(b), c=None if c is None else _contig(c), alpha=alpha,
                 beta=beta)


def _beamform_block(x, weights):
    return _call(gemm.beamform_spectra, _contig(x), weights)


def _noise_block(x, snr_db, seed, signal_power, row_offset, _chunks=None, block_info=None):
    row0 = row_offset
    if x.ndim == 2 and block_info is not None:
        row0 += block_info[None]["array-location"][0][0]
    return _call(noise.add_noise, _contig(x), snr_db, seed=seed, signal_power=signal_power, row_offset=row0,
                 _chunks=_chunks)


# ---------------------------------------------------------------------------------------------
# the functions (same signatures as the plain ones)


def fft_convolve(x, h, *, method="auto", stream=None):
    """:func:`kernels.fft_convolve` of a Dask array: rows chunked freely, whole rows."""
    func = "fft_convolve"
    _no_stream(func, stream)
    convolution._check_method(method)
    _check_signal(func, "x", x, _REAL + _COMPLEX, (1, 2))
    _whole(func, "x", x, (x.ndim - 1,), "whole rows (each row is one FFT)")
    _length(func, "h", h, "a non-empty 1-D array")
    ind = _ind(x.ndim)
    return _blockwise(_fft_convolve_block, ind, x, ind, (_small(func, "h", h),), dtype=x.dtype, method=method)


def fir_filter(x, taps, *, fft_size=None, method="auto", stream=None):
    """:func:`kernels.fir_filter` of a Dask array: rows chunked freely; each time block filtered
    on its own plus the contribution of the ``len(taps) - 1`` samples before it (no copies).
    ``method="direct"`` needs time chunks of multiples of 64 samples (refused before any task
    runs otherwise); the tails' short pieces then run with ``"auto"``."""
    func = "fir_filter"
    _no_stream(func, stream)
    convolution._check_method(method)
    _check_signal(func, "x", x, _REAL + _COMPLEX, (1, 2))
    m = _length(func, "taps", taps, "a non-empty 1-D array")
    ind, ax = _ind(x.ndim), x.ndim - 1
    if method == "direct":
        convolution._no_fft_size(fft_size)
        why = _direct.unsupported(0, m, x.dtype, is_dask_array(taps) or on_device(taps), linear=True)
        _known(func, "x", x, ax)
        bad = [c for c in x.chunks[ax] if c % (2 * _direct.OUTPUTS)]
        if why is None and bad:
            why = f"x's time chunks must be multiples of {2 * _direct.OUTPUTS} samples, got {bad[0]}"
        if why is not None:
            raise ValueError(f"method='direct': {why}")
    if fft_size is not None:
        if (isinstance(fft_size, bool) or not isinstance(fft_size, (int, np.integer)) or fft_size < 2
                or fft_size > 4096 or fft_size & (fft_size - 1)):
            raise ValueError(f"fft_size must be a power of 2 from 2 to 4096, got {fft_size!r}")
        if fft_size < 2 * m:
            raise ValueError(f"fft_size={fft_size} must be at least 2 * len(taps) = {2 * m}")
        fft_size = int(fft_size)
    taps = _small(func, "taps", taps)
    if len(x.chunks[ax]) == 1 or m == 1:  # no halo to fetch: every block on its own
        return _blockwise(_fir_block, ind, x, ind, (taps,), dtype=x.dtype, fft_size=fft_size, method=method)
    _known(func, "x", x, ax)
    source, stages = getattr(x, _CHAIN, None) or (x, ())
    return _fir_time_graph(source, (*stages, (taps, m - 1, fft_size, method)))


# the attribute of a time-chunked ``fir_filter`` result that says how it was made from which
# array: (source Dask array, the filters ``(taps, halo, fft_size, method)`` applied to it in order)
_CHAIN = "_kernels_fir_chain"


def _fir_time_graph(x, stages):
    """``fir_filter`` of ``x`` chunked along time through the chain of filters ``stages`` (one
    ``(taps, halo, fft_size, method)`` each), as a graph of two tasks per block: the tail (the halos' sum
    of samples before it, cut from the block(s) before, where they are) and the block through
    every filter plus the tail's contributions (:func:`_fir_chain_block`). A time-chunked
    ``fir_filter`` result given to ``fir_filter`` again is not filtered block by block a second
    time: the new graph starts from its source with one more filter in the chain (its tails
    longer by the new halo), so chained calls keep two tasks per block and a graph two tasks
    deep. Built by hand rather than from slices and concatenations, whose extra tasks and graph
    depth cost the scheduler more than the kernels' time (0.03 of the plain call's throughput
    through them, H200 2026-12-03)."""
    da = import_dask()
    from dask.base import tokenize
    from dask.highlevelgraph import HighLevelGraph

    tok = tokenize(x, *(v for stage in stages for v in stage))
    tail_name, name = f"fir_tail-{tok}", f"fir_filter-{tok}"
    deps, taps = [x], []
    for t, *_ in stages:
        if is_dask_array(t):
            deps.append(t)
            t = (t.name,) + (0,) * t.ndim  # its one block's key
        taps.append(t)
    spec = tuple(stage[1:] for stage in stages)
    bounds = _bounds(x.chunks[-1])
    halo = sum(h for h, *_ in spec)
    sources = fir_tail_sources(bounds, halo)
    dsk = {}
    for idx in np.ndindex(*x.numblocks):
        rows, k = idx[:-1], idx[-1]
        block = (x.name, *idx)
        if sources[k] is None:
            dsk[(name, *idx)] = (_fir_chain_block, block, None, True, spec, *taps)
            continue
        blocks, offset = sources[k]
        dsk[(tail_name, *idx)] = (_fir_tail, [(x.name, *rows, j) for j in blocks], offset)
        exact = bounds[k] <= halo  # the tail starts where the signal does
        dsk[(name, *idx)] = (_fir_chain_block, block, (tail_name, *idx), exact, spec, *taps)
    graph = HighLevelGraph.from_collections(name, dsk, dependencies=deps)
    out = da.Array(graph, name, chunks=x.chunks, meta=_meta(x, x.ndim, x.dtype))
    setattr(out, _CHAIN, (x, stages))
    return out


def matched_filter(x, template, *, return_correlation=False, stream=None):
    """:func:`kernels.matched_filter` of a Dask array: rows chunked freely, whole rows; the
    outputs are Dask arrays computed by one task per row block (compute them together, e.g.
    ``dask.compute(idx, power)``, so that each block's kernel runs once)."""
    da = import_dask()
    func = "matched_filter"
    _no_stream(func, stream)
    _check_signal(func, "x", x, _REAL + _COMPLEX, (1, 2))
    n = x.shape[-1]
    _whole(func, "x", x, (x.ndim - 1,),
           "whole rows (each row is one FFT and its peak a search over the row)")
    shape = _shape_of("template", template)
    if len(shape) != 1 or shape[0] == 0 or shape[0] > n:
        raise ValueError(f"template must be a 1-D array of 1..{n} samples, got shape {shape}")
    if not isinstance(return_correlation, bool):
        raise TypeError(f"return_correlation must be a bool, got {return_correlation!r}")
    single = np.dtype(x.dtype) in (np.dtype(np.float32), np.dtype(np.complex64))
    prec, cdt = (np.dtype(np.float32), np.dtype(np.complex64)) if single else (np.dtype(np.float64),
                                                                               np.dtype(np.complex128))
    x2 = x[None, :] if x.ndim == 1 else x
    both = _blockwise(_matched_block, "i", x2, "ij", (_small(func, "template", template),), dtype=object,
                      meta=np.empty((0,), object), return_correlation=return_correlation)
    idx = da.blockwise(operator.itemgetter(0), "i", both, "i", dtype=np.int32, meta=_meta(x, 1, np.int32))
    power = da.blockwise(operator.itemgetter(1), "i", both, "i", dtype=prec, meta=_meta(x, 1, prec))
    if not return_correlation:
        return idx, power
    corr = da.blockwise(operator.itemgetter(2), "ij", both, "i", new_axes={"j": n}, dtype=cdt,
                        meta=_meta(x, 2, cdt))
    return idx, power, (corr[0] if x.ndim == 1 else corr)


def stft_power(x, window, hop, *, stream=None):
    """:func:`kernels.stft_power` of a Dask array: rows chunked freely; the frames starting in a
    time block are computed from its samples and the ``nfft - hop`` after it."""
    da = import_dask()
    func = "stft_power"
    _no_stream(func, stream)
    _check_signal(func, "x", x, _REAL, (1, 2))
    nfft = _length(func, "window", window, "a non-empty real 1-D array")
    hop = _int_at_least("hop", hop, 1)
    ax = x.ndim - 1
    _known(func, "x", x, ax)
    length = int(x.shape[ax])
    if length < nfft:
        raise ValueError(f"x has {length} samples, fewer than one frame of len(window) = {nfft}")
    window = _small(func, "window", window)
    ind = _ind(x.ndim)
    out_ind, new = ind + "f", {"f": nfft // 2 + 1}
    if len(x.chunks[ax]) == 1:
        return _blockwise(_stft_block, out_ind, x, ind, (window,), dtype=x.dtype, new_axes=new,
                          adjust_chunks={"j": 1 + (length - nfft) // hop}, hop=hop)
    pieces = []
    for start, stop, frames in stft_pieces(_bounds(x.chunks[ax]), nfft, hop):
        piece = x[..., start:stop].rechunk({ax: -1})
        pieces.append(_blockwise(_stft_block, out_ind, piece, ind, (window,), dtype=x.dtype, new_axes=new,
                                 adjust_chunks={"j": frames}, hop=hop))
    return da.concatenate(pieces, axis=ax)


_GEMM_DTYPES = _REAL + _COMPLEX


def batched_gemm(a, b, *, c=None, alpha=1.0, beta=0.0, stream=None):
    """:func:`kernels.batched_gemm` of Dask arrays: the batch chunked freely (``b`` and ``c``
    follow ``a``'s batch chunks), whole matrices."""
    func = "batched_gemm"
    _no_stream(func, stream)
    _check_signal(func, "a", a, _GEMM_DTYPES, (3,))
    ops = [("b", b)] + ([("c", c)] if c is not None else [])
    for name, v in ops:
        if not is_dask_array(v):
            raise TypeError(f"{func}: {name} must be a Dask array when a is one (chunked like a along the "
                            f"batch axis, e.g. dask.array.from_array({name}, chunks=(a.chunks[0], -1, -1))), "
                            f"got {type(v).__name__}")
        _check_signal(func, name, v, (np.dtype(a.dtype),), (3,))
        if type(v._meta) is not type(a._meta):
            raise TypeError(f"{func}: {name} must have chunks of a's kind ({type(a._meta).__name__}), got "
                            f"{type(v._meta).__name__}")
    batch, m, k = a.shape
    if b.shape[0] != batch or b.shape[1] != k:
        raise ValueError(f"b must have shape (batch={batch}, k={k}, n), got {b.shape}")
    n = b.shape[2]
    if beta != 0 and c is None:
        raise ValueError("c is required when beta != 0")
    if c is not None and c.shape != (batch, m, n):
        raise ValueError(f"c must have shape {(batch, m, n)}, got {c.shape}")
    for name, v in (("alpha", alpha), ("beta", beta)):
        if not isinstance(v, (int, float, complex, np.number)) or isinstance(v, bool):
            raise TypeError(f"{name} must be a number, got {v!r}")
        if np.dtype(a.dtype).kind != "c" and isinstance(v, complex):
            raise TypeError(f"{name} is complex but a is real ({np.dtype(a.dtype).name})")
    for name, v in (("a", a), *ops):
        _whole(func, name, v, (1, 2), "whole matrices")
    da = import_dask()
    args = [a, "ipq", b, "irs", *((c, "itu") if c is not None else (None, None)), alpha, None, beta, None]
    return da.blockwise(_gemm_block, "ips", *args, concatenate=True, dtype=a.dtype, meta=_meta(a, 3, a.dtype))


def beamform_spectra(x, weights, *, stream=None):
    """:func:`kernels.beamform_spectra` of a Dask array: the batch chunked freely, whole
    (channels, samples) blocks."""
    func = "beamform_spectra"
    _no_stream(func, stream)
    _check_signal(func, "x", x, _COMPLEX, (3,))
    _whole(func, "x", x, (1, 2), "whole (channels, samples) blocks")
    _, channels, _ = x.shape
    shape = _shape_of("weights", weights)
    if len(shape) != 2 or shape[1] != channels:
        raise ValueError(f"weights must have shape (beams, channels={channels}), got {shape}")
    return _blockwise(_beamform_block, "iws", x, "ics", (_small(func, "weights", weights),), dtype=x.dtype,
                      new_axes={"w": shape[0]})


def add_noise(x, snr_db, *, seed=0, signal_power=None, out=None, row_offset=0, stream=None, _chunks=None):
    """:func:`kernels.add_noise` of a Dask array: rows chunked freely (each block draws the noise
    of its rows' places in ``x``), whole rows; the same noise as one call on the whole array."""
    func = "add_noise"
    noise._real_number("snr_db", snr_db)
    noise._seed(seed)
    if signal_power is not None:
        noise._real_number("signal_power", signal_power, minimum=0.0)
    noise._row_offset(row_offset)
    _no_stream(func, stream)
    if out is not None:
        raise TypeError(f"{func}: out cannot be given with a Dask array x (the result is a new Dask array), "
                        f"got {type(out).__name__}")
    _check_signal(func, "x", x, _REAL + _COMPLEX, (1, 2))
    _whole(func, "x", x, (x.ndim - 1,),
           "whole rows (a row's power is measured over the row and its random numbers run along it)")
    _known(func, "x", x, 0)
    if x.ndim == 2 and int(row_offset) + x.shape[0] - 1 > noise._ROW_OFFSET_MAX:
        raise ValueError(f"row_offset + rows of x - 1 must be at most 2**48, got {row_offset} + {x.shape[0]} - 1")
    if isinstance(snr_db, numbers.Real):
        snr_db = float(snr_db)
    return x.map_blocks(_noise_block, snr_db, int(seed), None if signal_power is None else float(signal_power),
                        int(row_offset), _chunks=_chunks, dtype=x.dtype, meta=_meta(x, x.ndim, x.dtype))


_CHUNKED = {f.__name__: f for f in (fft_convolve, fir_filter, matched_filter, stft_power, batched_gemm,
                                    beamform_spectra, add_noise)}
