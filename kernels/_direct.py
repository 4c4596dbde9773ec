# SPDX-License-Identifier: Apache-2.0
"""Circular convolution of float32 rows with a short real filter by direct summation, in one
kernel and without an FFT (``fft_convolve(..., method="direct")``).

Two-parallel fast FIR: with ``g`` the reversed taps (zero-padded to an even count ``2J``), each
row read through its ``m - 1`` last samples first (``s[i] = x[(i - m + 1) mod n]``) and
``E[i] = s[2i]``, ``O[i] = s[2i + 1]``, ``S[i] = O[i] + E[i + 1]``, the three correlations
``A = g[0::2] * E``, ``B = g[1::2] * O`` and ``P = (g[0::2] + g[1::2]) * S`` (``J`` taps each) give
``y[2k] = A[k] + B[k]`` and ``y[2k + 1] = P[k] - A[k + 1] - B[k]``: 3J multiply-adds per output
pair instead of 4J. Each thread keeps the accumulators of :data:`OUTPUTS` consecutive outputs in
registers and streams its inputs from shared memory once; the taps are kernel parameters (a
tuple), which the FMAs read from the constant bank with no register or load per tap. The kernel
source is generated, unrolled, for each (row length, tap count).
"""

from __future__ import annotations

import functools

import numpy as np
from numba import cuda, float32, uint64

from nvmath_device import load_complex, store_complex

from ._launch import ScalarTuple, launch

OUTPUTS = 32  # consecutive outputs per thread (16 pairs): measured fastest of 16/32/64 at 4096 x 63
MAX_TAPS = 64  # the generated code grows as taps x OUTPUTS (4096 x 64: ~11 s to compile on 2 CPU cores)
MAX_N = 8192  # a row (plus halo and padding) in static shared memory, < 48 KiB
ROW_THREADS = 128  # threads per block at least (several rows per block for short rows)


def faster(n: int, m: int) -> bool:
    """Whether this kernel was measured faster than the FFT kernel for rows of ``n`` samples and
    ``m <= MAX_TAPS`` taps (what ``method="auto"`` picks; ``benchmarks/conv_methods.py`` on the
    H200, 2026-12-04, direct / FFT time: n = 4096 and 1024 at 15, 31, 63 taps 0.55-0.84; n = 512
    at 15 and 31 taps 0.68 and 0.77, at 63 taps 1.04; shorter rows not measured: FFT)."""
    return n >= 1024 or (n >= 512 and m <= 32)


def unsupported(n: int, m: int, dtype, device_taps: bool) -> str | None:
    """Why ``method="direct"`` cannot run for rows of ``n`` ``dtype`` samples and ``m`` taps
    (a sentence naming the argument), or None when it can."""
    if np.dtype(dtype) != np.float32:
        return f"x must be float32, got {np.dtype(dtype)} (other dtypes: method='fft')"
    if device_taps:
        return "h must be host taps (NumPy, list): they become kernel parameters (device taps: method='fft')"
    if m > MAX_TAPS:
        return f"h has {m} taps; at most {MAX_TAPS} (longer filters: method='fft')"
    if n % (2 * OUTPUTS) or n > MAX_N:
        return f"x's rows must have a multiple of {2 * OUTPUTS} samples up to {MAX_N}, got {n}"
    return None


@functools.lru_cache(maxsize=64)
def _taps_cached(raw: bytes) -> ScalarTuple:
    g = np.frombuffer(raw, np.float64)[::-1]
    if g.size % 2:
        g = np.append(g, 0.0)
    g0, g1 = g[0::2], g[1::2]
    return ScalarTuple(np.concatenate([g0, g1, g0 + g1]).astype(np.float32))


def taps_param(h: np.ndarray) -> ScalarTuple:
    """The kernel's taps parameter for host taps ``h`` (float64, 1-D): ``3J`` float32 values
    (``g[0::2]``, ``g[1::2]``, their sum), cached by value."""
    return _taps_cached(np.ascontiguousarray(h, np.float64).tobytes())


def geometry(n: int) -> tuple:
    """``(threads per row, rows per block)`` of the kernel for rows of ``n`` samples."""
    t = n // OUTPUTS
    rows = max(1, ROW_THREADS // t)
    return t, rows


def _row_floats(n: int, m: int) -> int:
    """Shared floats per row: the padded ``s[0 : n + 2J - 1]`` (one pad per OUTPUTS floats), and
    congruent to the threads per row modulo 32, so that rows of one warp use distinct banks."""
    t = geometry(n)[0]
    last = n + m + (m % 2) - 2  # the largest index of s any thread reads
    need = last + last // OUTPUTS + 1
    return need + (t - need) % 32


def _pair_slots(a, ind: str, t: int, shift: str):
    """Emit the shared slots of the thread's first sample pair (``s`` indices ``2 tx`` + shift,
    + 1, padded) and return ``slot(k, j)``: the expression of pair ``tx + k t``'s sample ``j``.
    Where ``2 t`` is a multiple of OUTPUTS the padding of pair ``tx + k t`` is that of pair
    ``tx`` plus a constant: one address for all pairs, the rest immediate offsets (the compiler
    cannot fold ``(i + c) // R`` itself: unsigned wraparound)."""
    R = OUTPUTS
    if 2 * t % R == 0:
        for j in (0, 1):
            a(f"{ind}i = tx * uint64(2){shift} + uint64({j})")
            a(f"{ind}q{j} = i + i // uint64({R})")
        return lambda k, j: f"q{j} + uint64({2 * k * t * (R + 1) // R})"
    for j in (0, 1):
        a(f"{ind}r{j} = tx * uint64(2){shift} + uint64({j})")
    return lambda k, j: f"r{j} + uint64({2 * k * t}) + (r{j} + uint64({2 * k * t})) // uint64({R})"


@functools.cache
def source(n: int, m: int) -> str:
    """The kernel's Python source for rows of ``n`` samples and ``m`` taps (see the module)."""
    R, K = OUTPUTS, OUTPUTS // 2
    J = (m + 1) // 2
    t, rows = geometry(n)
    sh = _row_floats(n, m)
    halo = m - 1 + m % 2  # s[0 : m - 1] = the row's end, s[n + m - 1] = x[0] (odd m: read by a zero tap)

    def off(i):  # padded shared index of s[i] relative to the thread's first
        return i + i // R

    # one row per block (n >= 4096): no row test (the grid is the rows), no row count parameter,
    # a 1-D shared array and one halo sample per thread. At 4096 x 63 the general form ran 0.734 ms,
    # the 1-D array 0.718, no row test 0.713 (H200); this form's sm_90 code (96 registers) differs
    # in 4 of 2360 instructions from that of a prototype timed at 0.686 ms (not timed itself yet)
    one = rows == 1
    ind = "    " if one else "        "
    lines = [
        "def kernel(x2, x, y2, g):" if one else "def kernel(x2, x, y2, nrows, g):",
        f"    xs = cuda.shared.array({sh}, float32)" if one else f"    sm = cuda.shared.array(({rows}, {sh}), float32)",
        "    tx = uint64(cuda.threadIdx.x)",
        "    row = uint64(cuda.blockIdx.x)" if one else
        f"    row = uint64(cuda.blockIdx.x) * uint64({rows}) + uint64(cuda.threadIdx.y)",
    ]
    a = lines.append
    if not one:
        a("    xs = sm[cuda.threadIdx.y]")
        a("    ok = row < uint64(nrows)")
        a("    if ok:")
    a(f"{ind}base = row * uint64({n // 2}) + tx")
    pairs = _pair_slots(a, ind, t, f" + uint64({m - 1})")
    for k in range(K):  # the row as sample pairs, coalesced: s[m - 1 + 2p], s[m + 2p]
        a(f"{ind}v = load_complex(x2, base + uint64({k * t}))")
        a(f"{ind}xs[{pairs(k, 0)}] = v.real")
        a(f"{ind}xs[{pairs(k, 1)}] = v.imag")
    if one:  # t >= 128 > halo: one sample per thread
        a(f"    if tx < uint64({m - 1}):")
        a(f"        xs[tx + tx // uint64({R})] = x[row * uint64({n}) + uint64({n - m + 1}) + tx]")
        a(f"    elif tx < uint64({halo}):")
        a(f"        xs[tx + uint64({n}) + (tx + uint64({n})) // uint64({R})] = x[row * uint64({n}) + tx - uint64({m - 1})]")
    else:
        a("        i = tx")
        a(f"        while i < uint64({halo}):")
        a(f"            j = i if i < uint64({m - 1}) else i + uint64({n})")
        a(f"            xs[j + j // uint64({R})] = x[row * uint64({n}) + (i + uint64({n - m + 1})) % uint64({n})]")
        a(f"            i += uint64({t})")
        a("    else:")  # a row past the last: zeros, so that its (unstored) sums are finite
        a("        i = tx")
        a(f"        while i < uint64({sh}):")
        a("            xs[i] = float32(0)")
        a(f"            i += uint64({t})")
    for q in range(3 * J):  # the taps as locals: one IR variable each, not one per use
        a(f"    h{q} = g[{q}]")
    a("    cuda.syncthreads()")
    a(f"    w = xs[tx * uint64({R + 1}):]")
    for i in range(K + J):  # E[i], then S[i - 1] = O[i - 1] + E[i], then O[i]
        if i % 8 == 0:
            # an always-true test every 8 inputs splits numba's IR into blocks: its lowering's
            # singly-assigned-variable search is quadratic in a block's size (4096 x 63: 26 s to
            # compile in one block, 11 s in blocks; LLVM folds the test: the same cubin, byte for byte)
            a("    if tx >= uint64(0):")
        a(f"        e{i} = w[{off(2 * i)}]")
        for k in range(max(0, i - J + 1), min(K, i) + 1):
            a(f"        A{k} {'+=' if i > k else '='} h{i - k} * e{i}")
        if i >= 1:
            a(f"        s = o{i - 1} + e{i}")
            for k in range(max(0, i - J), min(K - 1, i - 1) + 1):
                a(f"        P{k} {'+=' if i - 1 > k else '='} h{2 * J + i - 1 - k} * s")
        if i < K + J - 1:
            a(f"        o{i} = w[{off(2 * i + 1)}]")
            for k in range(max(0, i - J + 1), min(K - 1, i) + 1):
                a(f"        B{k} {'+=' if i > k else '='} h{J + i - k} * o{i}")
    a("    cuda.syncthreads()")  # every read of s done: the outputs go where the thread read
    for k in range(K):
        a(f"    w[{off(2 * k)}] = A{k} + B{k}")
        a(f"    w[{off(2 * k + 1)}] = P{k} - A{k + 1} - B{k}")
    a("    cuda.syncthreads()")
    if not one:
        a("    if ok:")
    pairs = _pair_slots(a, ind, t, "")
    for k in range(K):  # y[2p], y[2p + 1] from s's slots 2p, 2p + 1, coalesced
        a(f"{ind}store_complex(y2, base + uint64({k * t}), complex(xs[{pairs(k, 0)}], xs[{pairs(k, 1)}]))")
    return "\n".join(lines) + "\n"


@functools.cache
def kernel(n: int, m: int):
    """The ``@cuda.jit`` kernel ``(x2, x, y2, nrows, g)`` for rows of ``n`` samples and ``m``
    taps (``(x2, x, y2, g)`` where :func:`geometry` puts one row in a block: one block per row):
    ``x2``/``y2`` the rows as flat complex64 sample pairs, ``x`` the same rows as flat float32,
    ``g`` the :func:`taps_param` tuple. Launch :func:`geometry`'s block shape over
    ``ceil(nrows / rows per block)`` blocks."""
    t, rows = geometry(n)
    ns = {"__name__": __name__, "cuda": cuda, "float32": float32, "uint64": uint64,
          "load_complex": load_complex, "store_complex": store_complex}
    code = compile(source(n, m), f"<kernels._direct n={n} m={m}>", "exec")
    exec(code, ns)  # noqa: S102 - our own generated source (see source())
    # launch bounds: the block, and 4 blocks of 128 threads per SM (96 registers at 4096 x 63, no
    # spills; measured equal to 3 and faster than 5)
    return cuda.jit(launch_bounds=(t * rows, max(1, 512 // (t * rows))))(ns["kernel"])


def convolve(xp, x, yp, nrows: int, n: int, taps: np.ndarray, stream) -> None:
    """Launch the kernel: ``xp``/``yp`` complex64 pair views of the flat rows, ``x`` the flat
    float32 rows, ``taps`` host float64."""
    t, rows = geometry(n)
    k, g = kernel(n, taps.size), taps_param(taps)
    if rows == 1:
        launch(k, nrows, (t, 1), stream, 0, xp, x, yp, g)
    else:
        launch(k, -(-nrows // rows), (t, rows), stream, 0, xp, x, yp, nrows, g)


def flops(n: int, m: int) -> int:
    """Floating-point operations per row of ``n`` samples and ``m`` taps as the kernel does them:
    2 per multiply-add (``J (3K + 1)`` per thread of ``K`` output pairs, ``J = ceil(m / 2)``)
    and 1 per add (``K + J - 1`` sums ``S``, 3 per output pair), over ``n / OUTPUTS`` threads."""
    K, J = OUTPUTS // 2, (m + 1) // 2
    return n // OUTPUTS * (2 * J * (3 * K + 1) + (K + J - 1) + 3 * K)
