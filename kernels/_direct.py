# SPDX-License-Identifier: Apache-2.0
"""Circular convolution of float32 rows with a short real filter by direct summation, in one
kernel and without an FFT (``fft_convolve(..., method="direct")``).

With ``g`` the reversed taps (zero-padded to ``M`` taps), each row is read through its
``m - 1`` last samples first (``s[i] = x[(i - m + 1) mod n]``) and ``y[k] = sum_j g[j] s[k + j]``.
Two-parallel fast FIR: with ``E[i] = s[2i]``, ``O[i] = s[2i + 1]``, ``S[i] = O[i] + E[i + 1]``,
the three correlations ``A = g[0::2] * E``, ``B = g[1::2] * O`` and ``P = (g[0::2] + g[1::2]) * S``
(``M / 2`` taps each) give ``y[2k] = A[k] + B[k]`` and ``y[2k + 1] = P[k] - A[k + 1] - B[k]``:
3 multiply-adds per tap pair and output pair instead of 4. The kernel applies this :func:`levels`
times (0: plain sums; 2: each of ``A``, ``B``, ``P`` split again, nine correlations of ``M / 4``
taps, 9/16 of the multiply-adds plus more adds), whichever takes the fewest instructions.

Each thread keeps the accumulators of :data:`OUTPUTS` consecutive outputs in registers and
streams its inputs from shared memory once, as 8-byte sample pairs (the row padded two floats
per OUTPUTS, so that a half-warp's pairs fall on distinct banks); the taps are kernel
parameters (a tuple), which the FMAs read from the constant bank with no register or load per
tap. The kernel source is generated, unrolled, for each (row length, tap count, levels).
"""

from __future__ import annotations

import functools
import math

import numpy as np
from numba import complex64, cuda, float32, uint64

from nvmath_device import (
    copy_async,
    copy_async_commit,
    copy_async_wait,
    load_complex,
    store_complex,
)

from ._launch import ScalarTuple, launch, resident_blocks

OUTPUTS = 32  # consecutive outputs per thread (16 pairs): measured fastest of 16/32/64 at 4096 x 63
MAX_TAPS = 128  # the generated code grows as taps x OUTPUTS (128 taps: ~16 s to compile on 2 CPU cores)
MEASURED_TAPS = 64  # method="auto" picks this kernel only up to here: measured against the FFT kernel
MAX_N = 8192  # a row (plus halo and padding) in static shared memory, < 48 KiB
ROW_THREADS = 128  # threads per block at least (several rows per block for short rows)
MAX_SHARED = 48 * 1024  # static shared memory per block, bytes


def faster(n: int, m: int) -> bool:
    """Whether this kernel was measured faster than the FFT kernel for rows of ``n`` samples and
    ``m <= MAX_TAPS`` taps (what ``method="auto"`` picks; ``benchmarks/conv_methods.py`` on the
    H200, 2026-12-04, direct / FFT time: n = 4096 and 1024 at 15, 31, 63 taps 0.55-0.84; n = 512
    at 15 and 31 taps 0.68 and 0.77, at 63 taps 1.04; shorter rows not measured: FFT)."""
    return m <= MEASURED_TAPS and (n >= 1024 or (n >= 512 and m <= 32))


def unsupported(n: int, m: int, dtype, device_taps: bool, linear: bool = False) -> str | None:
    """Why ``method="direct"`` cannot run for rows of ``n`` ``dtype`` samples and ``m`` taps
    (a sentence naming the argument), or None when it can; ``linear``: ``fir_filter``'s rows
    (any multiple of 64 samples, cut into :func:`segments`), whose taps are named ``taps``."""
    h = "taps" if linear else "h"
    if np.dtype(dtype) != np.float32:
        return f"x must be float32, got {np.dtype(dtype)} (other dtypes: method='fft')"
    if device_taps:
        return f"{h} must be host taps (NumPy, list): they become kernel parameters (device taps: method='fft')"
    if m > MAX_TAPS:
        return f"{h} has {m} taps; at most {MAX_TAPS} (longer filters: method='fft')"
    if linear:
        return None if n % (2 * OUTPUTS) == 0 else f"x's rows must have a multiple of {2 * OUTPUTS} samples, got {n}"
    if m > n:
        return f"h has {m} taps; at most the row length, {n}"
    if n % (2 * OUTPUTS) or n > MAX_N:
        return f"x's rows must have a multiple of {2 * OUTPUTS} samples up to {MAX_N}, got {n}"
    return None


@functools.lru_cache(maxsize=64)
def _taps_cached(raw: bytes, lev: int) -> ScalarTuple:
    h = np.frombuffer(raw, np.float64)
    g = np.zeros(padded_taps(h.size, lev))
    g[:h.size] = h[::-1]
    return ScalarTuple(np.concatenate(_leaf_taps(g, lev)).astype(np.float32))


def _leaf_taps(g: np.ndarray, lev: int) -> list:
    """The correlations' taps, in the kernel's order: ``g`` split ``lev`` times into
    ``g[0::2]``, ``g[1::2]`` and their sum (depth first)."""
    if lev == 0:
        return [g]
    g0, g1 = g[0::2], g[1::2]
    return _leaf_taps(g0, lev - 1) + _leaf_taps(g1, lev - 1) + _leaf_taps(g0 + g1, lev - 1)


def taps_param(h: np.ndarray, lev: int | None = None) -> ScalarTuple:
    """The kernel's taps parameter for host taps ``h`` (float64, 1-D): the reversed taps,
    zero-padded to :func:`padded_taps`, split ``lev`` (default :func:`levels`) times by phase
    (``3^lev`` correlations of ``padded_taps / 2^lev`` float32 taps), cached by value."""
    h = np.ascontiguousarray(h, np.float64)
    return _taps_cached(h.tobytes(), levels(h.size) if lev is None else lev)


def segments(length: int) -> tuple:
    """``(n, nseg)``: ``fir_filter``'s rows of ``length`` samples (a multiple of 64) as ``nseg``
    segments of ``n`` samples, ``n`` the largest of 64, 128, ..., 4096 that divides ``length``
    (one block of 128 threads per segment where ``n`` is 4096, several segments per block below)."""
    n = OUTPUTS * math.gcd(length // OUTPUTS, ROW_THREADS)
    return n, length // n


@functools.cache
def geometry(n: int, m: int, lev: int) -> tuple:
    """``(threads per row, rows per block)`` of the kernel for rows (or segments) of ``n``
    samples and ``m`` taps split ``lev`` times: at least ROW_THREADS threads per block where
    the rows' shared memory fits the 48 KiB of static shared memory, fewer rows where not
    (long filters on short segments)."""
    t = n // OUTPUTS
    fit = MAX_SHARED // (4 * _row_floats(n, m, lev))
    return t, max(1, min(ROW_THREADS // t, fit))


PAD = 2  # floats of padding after every OUTPUTS floats of s in shared memory (see source())


def _row_floats(n: int, m: int, lev: int) -> int:
    """Shared floats per row: the padded ``s[0 : n + M]`` (``M`` = :func:`padded_taps`; the
    thread reads ``s`` in pairs, the last pair's second sample unused), and congruent to twice
    the threads per row modulo 32, so that the pairs a half-warp reads at once, across rows too,
    fall on distinct banks."""
    t = n // OUTPUTS
    end = n + padded_taps(m, lev)  # one past the largest index of s any thread reads
    need = end + PAD * (-(-end // OUTPUTS))
    return need + (2 * t - need) % 32


_BLOCK = 256  # generated statements per IR block (see source())


@functools.cache
def _sums(M: int, lev: int) -> tuple:
    """The thread's arithmetic for :data:`OUTPUTS` outputs of an ``M``-tap correlation split
    ``lev`` times: ``(statements, outputs, counts)``. The statements read the window ``s``
    in order, each input once (``u{i} = s[i]``, which :func:`source` turns into shared-memory
    reads), and feed it at once to every correlation that uses it (products into accumulators
    that start from their first product) and to the sums ``X[2j + 1] + X[2j + 2]`` the next
    level reads; the outputs are the names holding ``y[0 : OUTPUTS]``; counts are the ``fma``,
    ``mul`` and ``add`` statements."""
    body, counts, leaves = [], {"fma": 0, "mul": 0, "add": 0}, []

    def node(taps, nout, depth, name):  # (feed(i, var), outputs()) of a correlation on sequence `name`
        if depth == lev:
            q = len(leaves)
            leaves.append(q)
            started = set()

            def feed(i, v):
                for k in range(max(0, i - taps + 1), min(nout - 1, i) + 1):
                    op = "+=" if k in started else "="
                    counts["fma" if k in started else "mul"] += 1
                    started.add(k)
                    body.append(f"a{q}_{k} {op} h{q * taps + i - k} * {v}")

            return feed, lambda: [f"a{q}_{k}" for k in range(nout)]
        half = taps // 2
        # X = E, O: y[2k] = A[k] + B[k], y[2k + 1] = P[k] - A[k + 1] - B[k] (module docstring)
        fa, oa = node(half, nout // 2 + 1, depth + 1, name + "e")
        fb, ob = node(half, (nout + 1) // 2, depth + 1, name + "o")
        fp, op = node(half, nout // 2, depth + 1, name + "s")
        nsum, odd = nout // 2 + half - 1, {}

        def feed(i, v):
            if i % 2:
                odd[i // 2] = v
                fb(i // 2, v)
                return
            fa(i // 2, v)
            j = i // 2 - 1
            if 0 <= j < nsum:
                body.append(f"{name}_s{j} = {odd[j]} + {v}")
                counts["add"] += 1
                fp(j, f"{name}_s{j}")

        def outputs():
            A, B, P = oa(), ob(), op()
            for k in range(nout // 2):
                body.append(f"{name}_y{2 * k} = {A[k]} + {B[k]}")
                body.append(f"{name}_y{2 * k + 1} = {P[k]} - {A[k + 1]} - {B[k]}")
            if nout % 2:
                body.append(f"{name}_y{nout - 1} = {A[nout // 2]} + {B[nout // 2]}")
            counts["add"] += 3 * (nout // 2) + nout % 2
            return [f"{name}_y{k}" for k in range(nout)]

        return feed, outputs

    feed, outputs = node(M, OUTPUTS, 0, "z")
    for i in range(OUTPUTS + M - 1):
        body.append(f"u{i} = s[{i}]")
        feed(i, f"u{i}")
    outs = outputs()
    return body, outs, counts


def _tap_count(M: int, lev: int) -> int:
    return 3 ** lev * (M >> lev)


def _ops(m: int, lev: int) -> int:
    c = _sums(padded_taps(m, lev), lev)[2]
    return c["fma"] + c["mul"] + c["add"]


NESTED_FROM = 65
"""The fewest taps for which :func:`levels` considers splitting twice. Measured on the H200
(``benchmarks/conv_methods.py --sizes 4096 --taps 31 63 127 --levels 1 2``, 65536 rows,
2026-12-05): once / twice 0.519 / 0.534 ms at 31 taps, 0.633 / 0.672 at 63 (72 / 127 registers:
the nested kernel's fewer instructions lose to its lower occupancy), 1.167 / 1.063 at 127."""


@functools.cache
def levels(m: int) -> int:
    """How many times the kernel splits ``m`` taps by phase (0: plain direct summation, 1: the
    two-parallel fast FIR, 2: it nested, four-parallel): the one with the fewest arithmetic
    instructions per thread (63 taps: 2016, 1663, 1453) of 0 and 1, and of 2 as well from
    :data:`NESTED_FROM` taps up (below, measured slower despite fewer instructions)."""
    top = 2 if m >= NESTED_FROM else 1
    return min(range(top + 1), key=lambda lev: (_ops(m, lev), lev))


def padded_taps(m: int, lev: int) -> int:
    """The tap count the kernel correlates with when it splits ``m`` taps ``lev`` times: ``m``
    rounded up to a multiple of ``2^lev``."""
    return -(-m >> lev) << lev


def _slot(i: int) -> int:
    """The padded shared index of ``s[i]`` relative to that of ``s[0]`` (``i`` from a multiple
    of OUTPUTS)."""
    return i + PAD * (i // OUTPUTS)


def _pair_slots(a, ind: str, t: int, first: int, unit: int):
    """Emit the shared slot of the thread's first sample pair's sample ``s[2 tx + first]`` and
    return ``slot(k)``: the expression of that of pair ``tx + k t`` (``unit`` 2: a complex
    index, ``first`` even; 1: a float index). Where ``2 t`` is a multiple of OUTPUTS the padding
    of pair ``tx + k t`` is that of pair ``tx`` plus a constant: one address for all pairs, the
    rest immediate offsets (the compiler cannot fold ``(i + c) // R`` itself: unsigned
    wraparound)."""
    R = OUTPUTS
    name = f"q{first}"
    a(f"{ind}i = tx * uint64(2) + uint64({first})")
    if 2 * t % R == 0:
        a(f"{ind}{name} = (i + i // uint64({R}) * uint64({PAD})) // uint64({unit})")
        return lambda k: f"{name} + uint64({2 * k * t * (R + PAD) // R // unit})"
    a(f"{ind}{name} = i")
    return lambda k: (f"({name} + uint64({2 * k * t}) + ({name} + uint64({2 * k * t})) // uint64({R}) * uint64({PAD}))"
                      f" // uint64({unit})")


def pipelines(n: int, m: int, lev: int) -> bool:
    """Whether the pipelined (persistent, two-buffer) kernel exists for rows of ``n`` samples and
    ``m`` taps split ``lev`` times: one row per block, two rows' shared memory within 48 KiB
    (rows or segments of 4096 samples)."""
    return geometry(n, m, lev)[1] == 1 and 2 * 4 * _row_floats(n, m, lev) <= MAX_SHARED


@functools.cache
def source(n: int, m: int, lev: int, nseg: int = 0, pipe: bool = False) -> str:
    """The kernel's Python source for rows of ``n`` samples and ``m`` taps split ``lev`` times
    (see the module): circular convolution (``nseg`` 0) or, with ``nseg`` > 0, causal linear
    filtering of rows of ``nseg`` consecutive such segments (``fir_filter``). ``pipe``: the
    persistent form (one row per block only): each block loops over rows ``gridDim.x`` apart,
    two row buffers in shared memory, the next row copied in by ``cp.async`` while the current
    one is summed."""
    R, K = OUTPUTS, OUTPUTS // 2
    M = padded_taps(m, lev)
    t, rows = geometry(n, m, lev)
    sh = _row_floats(n, m, lev)
    # s[D + j] = x[j]; s[0 : D] = the row's end (circular), the previous segment's end or zeros
    # (linear); s[n + D + j] = 0 for j < M - m: read by zero taps only
    D = m - 1
    halo = M - 1
    slot = f"uint64({R}) * uint64({PAD})"

    # one row per block (n >= 4096): no row test (the grid is the rows), no row count parameter,
    # a 1-D shared array. At 4096 x 63 the general form ran 0.734 ms,
    # the 1-D array 0.718, no row test 0.713 (H200, one float of padding per 32, float accesses)
    one = rows == 1
    if pipe and not pipelines(n, m, lev):
        raise ValueError(f"no pipelined kernel for rows of {n} samples and {m} taps (one row per block, two "
                         f"rows in {MAX_SHARED} bytes of shared memory)")
    lines = [
        "def kernel(x2, x, y2, g):" if one and not pipe else "def kernel(x2, x, y2, nrows, g):",
        f"    xc = cuda.shared.array({sh // 2 * (2 if pipe else 1)}, complex64)" if one else
        f"    sm = cuda.shared.array(({rows}, {sh // 2}), complex64)",
        "    tx = uint64(cuda.threadIdx.x)",
        f"    row = uint64(cuda.blockIdx.x){'' if one else f' * uint64({rows}) + uint64(cuda.threadIdx.y)'}",
    ]
    a = lines.append
    if not one:
        a("    xc = sm[cuda.threadIdx.y]")
    a("    xs = xc.view(np.float32)")  # s as floats: the halo, and the pairs when D is odd
    for q in range(_tap_count(M, lev)):  # the taps as locals: one IR variable each, not one per use
        a(f"    h{q} = g[{q}]")

    def halo_passes(ind, body):  # body(i) for i = tx, tx + t, ... below `halo`: one sample per thread per pass
        for c in range(0, halo, t):
            body(ind, f"tx + uint64({c})" if c else "tx")

    def zeros_after(ind, i, off="", test="elif"):  # s[n + D + j], j < M - m: zeros (read by zero taps only)
        if halo > D:
            a(f"{ind}{test if D else 'if'} {i} < uint64({halo}){f' and {i} >= uint64({D})' if test == 'if' else ''}:")
            a(f"{ind}    j = {i} + uint64({n})")
            a(f"{ind}    xs[{off}j + j // {slot}] = float32(0)")

    if D % 2 == 0:
        pairs = _pair_slots(a, "    ", t, D, 2)
    else:
        pr, pi = _pair_slots(a, "    ", t, D, 1), _pair_slots(a, "    ", t, D + 1, 1)
    out = _pair_slots(a, "    ", t, 0, 2)

    def fill(ind, off, row="row"):
        """The row ``row`` (a variable's name) into the buffer at float offset ``off`` ("" or a
        name + " + "): loads and stores, or, pipelined, cp.async copies."""
        coff = f"({off[:-3]} >> uint64(1)) + " if off else ""
        a(f"{ind}base = {row} * uint64({n // 2}) + tx")
        for k in range(K):  # the row as sample pairs, coalesced: s[D + 2p], s[D + 2p + 1]
            src = f"base + uint64({k * t})"
            if D % 2 == 0 and pipe:
                a(f"{ind}copy_async(xc, {coff}{pairs(k)}, x2, {src})")
            elif D % 2 == 0:
                a(f"{ind}store_complex(xc, {pairs(k)}, load_complex(x2, {src}))")
            elif pipe:
                a(f"{ind}copy_async(xs, {off}{pr(k)}, x, ({src}) * uint64(2))")
                a(f"{ind}copy_async(xs, {off}{pi(k)}, x, ({src}) * uint64(2) + uint64(1))")
            else:
                a(f"{ind}v = load_complex(x2, {src})")
                a(f"{ind}xs[{pr(k)}] = v.real")
                a(f"{ind}xs[{pi(k)}] = v.imag")
        if nseg > 1:
            a(f"{ind}first = {row} % uint64({nseg}) * uint64({n})")  # the segment's first sample in its row

        def before(ind, i):
            if not D:
                if not pipe:
                    zeros_after(ind, i)
                return
            top = ind
            dst = f"{off}{i} + ({i}) // {slot}"
            a(f"{ind}if {i} < uint64({D}):")
            if nseg == 1:
                a(f"{ind}    xs[{dst}] = float32(0)")
                if not pipe:
                    zeros_after(top, i)
                return
            src = (f"{row} * uint64({n}) + uint64({n - D}) + {i}" if nseg == 0 else
                   f"{row} * uint64({n}) + {i} - uint64({D})")
            if nseg > 1:
                a(f"{ind}    if first + {i} < uint64({D}):")
                a(f"{ind}        xs[{dst}] = float32(0)")
                a(f"{ind}    else:")
                ind += "    "
            a(f"{ind}    copy_async(xs, {dst}, x, {src})" if pipe else f"{ind}    xs[{dst}] = x[{src}]")
            if not pipe:
                zeros_after(top, i)

        halo_passes(ind, before)

    def compute_and_store(ind, off):
        coff = f"({off[:-3]} >> uint64(1)) + " if off else ""
        body, outs, _ = _sums(M, lev)
        a(f"{ind}w = xc[{coff}tx * uint64({(R + PAD) // 2}):]")  # the thread's window, s[R tx:], as pairs
        for c in range(0, len(body), _BLOCK):
            # an always-true test every _BLOCK statements splits numba's IR into blocks: its lowering's
            # singly-assigned-variable search is quadratic in a block's size (4096 x 63: 26 s to
            # compile in one block, 11 s in blocks; LLVM folds the test: the same cubin, byte for byte)
            a(f"{ind}if tx >= uint64(0):")
            for b in body[c:c + _BLOCK]:
                if b.startswith("u"):  # u{i} = s[i]: s[i - 1], s[i] read as one pair where i is odd
                    i = int(b[b.index("[") + 1:-1])
                    if i % 2 == 0:
                        a(f"{ind}    c{i // 2} = load_complex(w, {_slot(i) // 2})")
                    b = f"u{i} = c{i // 2}.{'imag' if i % 2 else 'real'}"
                a(f"{ind}    {b}")
        a(f"{ind}cuda.syncthreads()")  # every read of s done: the outputs go where the thread read
        for k in range(K):
            a(f"{ind}store_complex(w, {_slot(2 * k) // 2}, complex({outs[2 * k]}, {outs[2 * k + 1]}))")
        a(f"{ind}cuda.syncthreads()")
        ok = "" if one else "if ok: "
        a(f"{ind}base = row * uint64({n // 2}) + tx")
        for k in range(K):  # y[2p], y[2p + 1] from s's slots 2p, 2p + 1, coalesced
            a(f"{ind}{ok}store_complex(y2, base + uint64({k * t}), load_complex(xc, {coff}{out(k)}))")

    if not pipe:
        if not one:
            a("    ok = row < uint64(nrows)")
            a("    if ok:")
            fill("        ", "")
            a("    else:")  # a row past the last: zeros, so that its (unstored) sums are finite
            a("        i = tx")
            a(f"        while i < uint64({sh}):")
            a("            xs[i] = float32(0)")
            a(f"            i += uint64({t})")
        else:
            fill("    ", "")
        a("    cuda.syncthreads()")
        compute_and_store("    ", "")
        return "\n".join(lines) + "\n"

    # pipelined: the zeros after the halo once in both buffers, the first row's copies, then per
    # row: start the next row's copies into the other buffer, wait for this row's, sum, store
    for boff in ("", f"uint64({sh}) + "):
        halo_passes("    ", lambda ind, i, boff=boff: zeros_after(ind, i, boff, test="if"))
    a("    step = uint64(cuda.gridDim.x)")
    a("    bo = uint64(0)")  # the current row's buffer: float offset 0 or sh
    a("    if row < uint64(nrows):")
    fill("        ", "bo + ")
    a("    copy_async_commit()")
    a("    while row < uint64(nrows):")
    a("        nxt = row + step")
    a(f"        nb = uint64({sh}) - bo")
    a("        if nxt < uint64(nrows):")
    fill("            ", "nb + ", "nxt")
    a("        copy_async_commit()")  # (an empty group after the last row: the wait below stays 1)
    a("        copy_async_wait(1)")
    a("        cuda.syncthreads()")
    compute_and_store("        ", "bo + ")
    a("        cuda.syncthreads()")  # every read of this buffer done before its next fill
    a("        row = nxt")
    a("        bo = nb")
    return "\n".join(lines) + "\n"


MIN_BLOCKS = 4
"""Blocks of 128 threads per SM the launch bounds ask for (the register cap: 65536 / (128 x
MIN_BLOCKS)); the compiler takes fewer where it needs fewer."""


def kernel(n: int, m: int, lev: int, nseg: int = 0, pipe: bool = False):
    """The ``@cuda.jit`` kernel ``(x2, x, y2, nrows, g)`` for rows of ``n`` samples and ``m``
    taps split ``lev`` times (``(x2, x, y2, g)`` where :func:`geometry` puts one row in a block
    and not ``pipe``: one block per row): ``x2``/``y2`` the rows as flat complex64 sample pairs,
    ``x`` the same rows as flat float32, ``g`` the :func:`taps_param` tuple (same ``lev``).
    Launch :func:`geometry`'s block shape over ``ceil(nrows / rows per block)`` blocks, or, for
    ``pipe`` (:func:`source`), over any number of blocks up to the rows (each loops over rows
    ``gridDim.x`` apart). Built once per arguments and :data:`MIN_BLOCKS`."""
    return _kernel(n, m, lev, nseg, pipe, MIN_BLOCKS)


@functools.cache
def _kernel(n: int, m: int, lev: int, nseg: int, pipe: bool, min_blocks: int):
    t, rows = geometry(n, m, lev)
    ns = {"__name__": __name__, "np": np, "cuda": cuda, "float32": float32, "complex64": complex64, "uint64": uint64,
          "load_complex": load_complex, "store_complex": store_complex, "copy_async": copy_async,
          "copy_async_commit": copy_async_commit, "copy_async_wait": copy_async_wait}
    code = compile(source(n, m, lev, nseg, pipe), f"<kernels._direct n={n} m={m} lev={lev} nseg={nseg} pipe={pipe}>",
                   "exec")
    exec(code, ns)  # noqa: S102 - our own generated source (see source())
    # launch bounds: the block, and MIN_BLOCKS blocks of 128 threads per SM (4: measured equal to
    # 3 and faster than 5 with the taps split once and one float of padding, 96 registers at
    # 4096 x 63; this form: 127 registers split twice, 72 once, no spills)
    return cuda.jit(launch_bounds=(t * rows, max(1, 128 * min_blocks // (t * rows))))(ns["kernel"])


SIM_GRID = 3  # blocks of the pipelined kernel under the simulator (each loops over several rows)
# convolve()'s default where pipelines(): the pipelined kernel is built and tested, not yet timed
# against the one-block-per-row kernel (benchmarks/conv_methods.py --pipeline times both)
PIPELINE = False


def convolve(xp, x, yp, nrows: int, n: int, taps: np.ndarray, stream, lev: int | None = None,
             nseg: int = 0, pipe: bool | None = None) -> None:
    """Launch the kernel: ``xp``/``yp`` complex64 pair views of the flat rows, ``x`` the flat
    float32 rows, ``taps`` host float64, the taps split ``lev`` times (default :func:`levels`);
    ``nrows`` rows of ``n`` samples (``nseg`` 0: circular convolution), or ``nrows`` segments
    of ``n`` samples, ``nseg`` to a row (linear filtering); ``pipe``: the pipelined kernel
    (where :func:`pipelines`; default :data:`PIPELINE`), as many blocks as fit the GPU at once."""
    lev = levels(taps.size) if lev is None else lev
    t, rows = geometry(n, taps.size, lev)
    if pipe is None:
        pipe = PIPELINE and pipelines(n, taps.size, lev)
    k, g = kernel(n, taps.size, lev, nseg, pipe), taps_param(taps, lev)
    if pipe:
        args = (xp, x, yp, nrows, g)
        grid = min(nrows, resident_blocks(k, (t, 1), 0, *args) or SIM_GRID)
        launch(k, grid, (t, 1), stream, 0, *args)
    elif rows == 1:
        launch(k, nrows, (t, 1), stream, 0, xp, x, yp, g)
    else:
        launch(k, -(-nrows // rows), (t, rows), stream, 0, xp, x, yp, nrows, g)


def flops(n: int, m: int, lev: int | None = None) -> int:
    """Floating-point operations per row of ``n`` samples and ``m`` taps as the kernel does them
    with the taps split ``lev`` times (default :func:`levels`): 2 per multiply-add, 1 per
    multiply or add (:func:`_sums`' counts), over ``n / OUTPUTS`` threads."""
    lev = levels(m) if lev is None else lev
    c = _sums(padded_taps(m, lev), lev)[2]
    return n // OUTPUTS * (2 * c["fma"] + c["mul"] + c["add"])
