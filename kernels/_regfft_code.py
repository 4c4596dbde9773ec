# SPDX-License-Identifier: Apache-2.0
"""The code of our own block FFT (:class:`kernels._regfft.RegFFT` is its descriptor): the
straight-line numba source of its ``execute(r, sc)`` and its shared-memory layout, as text and
tables. Plain Python: nothing here imports numba or compiles anything.

The algorithm is Stockham's autosort FFT (radix ``R`` per pass, ``Ns`` the size of the
transforms done so far): a butterfly ``j`` reads elements ``j + r N/R``, multiplies them by
``exp(s 2 pi i r (j mod Ns) / (Ns R))``, takes their ``R``-point DFT and writes output ``r`` to
``(j div Ns) Ns R + (j mod Ns) + r Ns``. Thread ``t`` of ``T = N / E`` runs butterflies
``j = t + T b``, so it reads elements ``t + T i`` (``i = b + r E/R``): cuFFTDx's register
layout (``stride = T``). The first pass reads the input from registers and the last writes the
output to registers in that layout, natural order; between passes the data goes through shared
memory, at padded addresses ``a + (a div P) pad`` chosen per exchange so that every warp access
is conflict-free and every address is one per-thread base plus a constant. Exchanges alternate
between two buffers (one barrier each) where they fit, else share one (two barriers); where a
row is at most one warp (32 threads) the barriers are the warp's (``syncwarp``), not the block's.

The twiddles of a pass come from one ``sincospif`` per butterfly and its powers (products), of
the positive angle in both directions, so that a kernel's forward and inverse share them. The
arithmetic is shaped for FFMAs: a butterfly's rotation by a constant ``c + i d`` is
``c ((x - (d/c) y) + i (y + (d/c) x))`` with the factor left to the butterfly's add (six
instructions, not eight), and a c2c FFT's passes of radix :data:`FOLD_RADIX` or more fold their
twiddle products into the first butterflies (:meth:`_Gen.twiddled_pair`). A real FFT of ``2 n``
points runs the ``n``-point complex FFT of the sample pairs and one more exchange that brings each
value its partner ``n - k`` (the standard split of even and odd samples).

The generated source names ``cuda``, ``np``, ``sincospi``, ``load_complex``, ``store_complex`` and
the constants it returns; the descriptor's module (``kernels._regfft._namespace``) supplies them
when it compiles the source.
"""

from __future__ import annotations

import functools
import math

SIZES = tuple(2**k for k in range(6, 13))  # 64 .. 4096
EPTS = (4, 8, 16, 32)  # values per thread (32: ~100 registers; 1024 points in one warp per row)
HALF_WARP = 16  # threads whose 8-byte shared accesses share one wavefront
MAX_SHARED = 48 * 1024  # bytes per block without the opt-in attribute
# passes of at least this radix of a complex (c2c) FFT fold their twiddle products into the first
# butterflies (:meth:`_Gen.twiddled_pair`). At radix 8 that saved 2 % of the instructions but took
# the 512-point real FFT (8 values per thread) from 48 to 56 registers; in the real FFTs (r2c, c2r)
# it took the 2048-point one at 16 values per thread from 72 to 73 registers and made the STFT's
# 2048-point r2c at 32 spill 8 bytes under its 64-register cap, so those keep the plain products
FOLD_RADIX = 16


def radices(n: int, ept: int) -> tuple:
    """The passes' radices for ``n`` points with ``ept`` elements per thread: ``ept`` each, one
    smaller radix first where ``log2 ept`` does not divide ``log2 n``."""
    ln, le = n.bit_length() - 1, ept.bit_length() - 1
    rem = ln % le
    return ((1 << rem,) if rem else ()) + (ept,) * (ln // le)


def unsupported(n: int, ept: int, fpb: int) -> str | None:
    """Why an FFT of ``n`` points with ``ept`` elements per thread and ``fpb`` rows per block
    cannot be built (a sentence naming the argument), or None."""
    if n not in SIZES:
        return f"size must be a power of 2 from {SIZES[0]} to {SIZES[-1]}, got {n}"
    if ept not in EPTS or ept > n:
        return f"elements_per_thread must be 4, 8, 16 or 32 (at most size), got {ept}"
    if n // ept < HALF_WARP:
        return f"size / elements_per_thread must be at least {HALF_WARP} threads, got {n}/{ept}"
    if not isinstance(fpb, int) or fpb < 1 or (n // ept) * fpb > 1024:
        return f"ffts_per_block must be a positive int with at most 1024 threads per block, got {fpb}"
    return None


# ---------------------------------------------------------------------------- shared layout

def _write_index(t, b, r, n, T, ns, R):
    """Element (pre-padding) index where butterfly ``j = t + T b`` of the pass ``(ns, R)`` puts
    its output ``r``."""
    j = t + T * b
    return (j // ns) * ns * R + j % ns + r * ns


def _padded(a, P, pad):
    return a + (a // P) * pad if pad else a


def wavefronts(addresses) -> int:
    """Shared-memory wavefronts of one warp-wide 8-byte access: per half-warp, the largest number
    of distinct 8-byte words that fall on one bank pair (32 banks of 4 bytes = 16 pairs)."""
    total = 0
    for h in range(0, len(addresses), HALF_WARP):
        banks: dict = {}
        for a in addresses[h:h + HALF_WARP]:
            banks.setdefault(a % HALF_WARP, set()).add(a)
        total += max(len(s) for s in banks.values())
    return total


@functools.cache
def exchange(n: int, ept: int, ns: int, R: int) -> dict:
    """The padding of the exchange after the pass ``(ns, R)``: ``P``, ``pad`` (8-byte words
    inserted after every ``P``; 0: none), ``space`` (words), and per access the constant offsets
    from the thread's base (``write[b][r]``, ``read[i]``), with the wavefronts per warp access
    of the chosen layout (``write_wf``, ``read_wf``; the minimum is 2 per 32 threads)."""
    T = n // ept
    best = None
    for P, pad in [(n, 0)] + [(1 << p, q) for p in range(4, n.bit_length()) for q in (1, 2, 4, 8, 16)]:
        w = [[[_padded(_write_index(t, b, r, n, T, ns, R), P, pad) for t in range(T)]
              for r in range(R)] for b in range(ept // R)]
        rd = [[_padded(t + T * i, P, pad) for t in range(T)] for i in range(ept)]
        wbase, rbase = w[0][0], rd[0]
        woff = [[{x - y for x, y in zip(w[b][r], wbase)} for r in range(R)] for b in range(ept // R)]
        roff = [{x - y for x, y in zip(rd[i], rbase)} for i in range(ept)]
        if any(len(s) != 1 for row in woff for s in row) or any(len(s) != 1 for s in roff):
            continue  # not one base per thread plus constants
        warps = [range(k, min(k + 32, T)) for k in range(0, T, 32)]
        wwf = max(wavefronts([w[b][r][t] for t in wr]) for b in range(ept // R) for r in range(R) for wr in warps)
        rwf = max(wavefronts([rd[i][t] for t in wr]) for i in range(ept) for wr in warps)
        space = n + (n // P) * pad
        key = (wwf + rwf, space)
        if best is None or key < best[0]:
            best = (key, dict(P=P, pad=pad, space=space, write_wf=wwf, read_wf=rwf,
                              write=[[s.pop() for s in row] for row in woff], read=[s.pop() for s in roff]))
    return best[1]


# ---------------------------------------------------------------------------- code generation

class _Gen:
    """Straight-line float32 code on named scalars; complex values are (re, im) name pairs."""

    def __init__(self, barrier: str = "cuda.syncthreads()"):
        self.barrier = barrier
        self.lines: list = []
        self.consts: dict = {}
        self.k = 0

    def emit(self, s: str) -> None:
        self.lines.append("    " + s)

    def new(self, expr: str) -> str:
        self.k += 1
        name = f"v{self.k}"
        self.emit(f"{name} = {expr}")
        return name

    def const(self, value: float) -> str:
        name = self.consts.get(value)
        if name is None:
            name = self.consts[value] = f"C{len(self.consts)}"
        return name

    def cmul(self, a, w, conj: bool = False):
        """a * w (``conj``: a * conj(w)), both (re, im) names."""
        if conj:
            return (self.new(f"{a[0]} * {w[0]} + {a[1]} * {w[1]}"), self.new(f"{a[1]} * {w[0]} - {a[0]} * {w[1]}"))
        return (self.new(f"{a[0]} * {w[0]} - {a[1]} * {w[1]}"), self.new(f"{a[0]} * {w[1]} + {a[1]} * {w[0]}"))

    def rotate(self, a, k: int, R: int, s: int):
        """``a * exp(s 2 pi i k / R)``, with the cheap cases (1, +-i, (+-1 +-i)/sqrt 2) by hand.
        Returns ((re, sign), (im, sign)): a name or a product of two (left for the butterfly's
        add to contract) and the sign it enters with."""
        k %= R
        if k == 0:
            return (a[0], 1), (a[1], 1)
        q = 8 * k * s % (8 * R)  # the angle in units of 2 pi / (8 R), direction folded in
        if q * 4 % (8 * R) == 0:  # a multiple of pi/2: quarter turns
            turns = q * 4 // (8 * R) % 4
            re, im = [((a[0], 1), (a[1], 1)), ((a[1], -1), (a[0], 1)),
                      ((a[0], -1), (a[1], -1)), ((a[1], 1), (a[0], -1))][turns]
            return re, im
        c, d = math.cos(2 * math.pi * q / (8 * R)), math.sin(2 * math.pi * q / (8 * R))
        if abs(abs(c) - abs(d)) < 1e-12:  # odd multiples of pi/4: sqrt(1/2) (+-1 +-i)
            h = self.const(abs(c))
            # (x + iy)(c + id) with |c| = |d| = h: re = h(sgn_c x - sgn_d y), im = h(sgn_d x + sgn_c y)
            sc, sd = (1 if c > 0 else -1), (1 if d > 0 else -1)
            u = self.new(f"{a[0]} {'-' if sc == sd else '+'} {a[1]}")  # sgn_c x - sgn_d y = sgn_c (x - sc sd y)
            v = self.new(f"{a[0]} {'+' if sc == sd else '-'} {a[1]}")  # sgn_d x + sgn_c y = sgn_d (x + sc sd y)
            # products left as expressions: each of e + t and e - t contracts to one FFMA
            return (f"{h} * {u}", sc), (f"{h} * {v}", sd)
        # (x + iy)(c + id) = c ((x - (d/c) y) + i (y + (d/c) x)), or d ((c/d) x - y + i ((c/d) y + x))
        # where |d| > |c|: two FFMAs here and the factor left as a product, which e + t and e - t
        # contract into one FFMA each (6 instructions a butterfly, not 2 FMUL + 2 FFMA + 4 FADD)
        if abs(c) >= abs(d):
            f, q = self.const(c), self.const(d / c)
            u, v = self.new(f"{a[0]} - {q} * {a[1]}"), self.new(f"{a[1]} + {q} * {a[0]}")
        else:
            f, q = self.const(d), self.const(c / d)
            u, v = self.new(f"{q} * {a[0]} - {a[1]}"), self.new(f"{q} * {a[1]} + {a[0]}")
        return (f"{f} * {u}", 1), (f"{f} * {v}", 1)

    def addsub(self, e, t):
        """(e + t, e - t): e plain names, t (name, sign) pairs."""
        def comb(x, y, plus):
            op = "+" if (y[1] > 0) == plus else "-"
            return self.new(f"{x} {op} {y[0]}")
        return ((comb(e[0], t[0], True), comb(e[1], t[1], True)), (comb(e[0], t[0], False), comb(e[1], t[1], False)))

    def twiddled_pair(self, a, b, wa, wb, conj: bool):
        """(A + B, A - B) with A = a wa, B = b wb (``conj``: times conj(wa), conj(wb); ``wa`` None:
        A = a): B by 2 FMUL + 2 FFMA, A + B by four FFMAs on B and A - B as (A + B) - 2 B, two
        more; 10 instructions where the products then the butterfly took 12."""
        p = self.cmul(b, wb, conj)
        if wa is None:
            return self.addsub(a, ((p[0], 1), (p[1], 1)))
        if conj:  # a conj(w) = (ar wr + ai wi) + i (ai wr - ar wi)
            re = self.new(f"{p[0]} + {a[1]} * {wa[1]} + {a[0]} * {wa[0]}")
            im = self.new(f"{p[1]} - {a[0]} * {wa[1]} + {a[1]} * {wa[0]}")
        else:  # a w = (ar wr - ai wi) + i (ar wi + ai wr)
            re = self.new(f"{p[0]} - {a[1]} * {wa[1]} + {a[0]} * {wa[0]}")
            im = self.new(f"{p[1]} + {a[1]} * {wa[0]} + {a[0]} * {wa[1]}")
        # an explicit fma: LLVM rewrites e - 2 x (and e + (-2) x) with x + x, which no FFMA absorbs
        m2 = self.const(-2.0)
        return (re, im), (self.new(f"cuda.fma({p[0]}, {m2}, {re})"), self.new(f"cuda.fma({p[1]}, {m2}, {im})"))

    def dft(self, x: list, s: int, tw: list | None = None, conj: bool = False) -> list:
        """The ``len(x)``-point DFT of the (re, im) names ``x``, natural order (radix-2 DIT);
        with ``tw``, of ``x[r]`` times ``tw[r]`` (a name pair, or None: 1; ``conj``: times its
        conjugate), each product folded into its first butterfly (:meth:`twiddled_pair`)."""
        R = len(x)
        if tw is not None and R == 2:
            return list(self.twiddled_pair(x[0], x[1], tw[0], tw[1], conj))
        if R == 1:
            return list(x)
        sub = (None, None) if tw is None else (tw[0::2], tw[1::2])
        ev, od = self.dft(x[0::2], s, sub[0], conj), self.dft(x[1::2], s, sub[1], conj)
        out = [None] * R
        for k in range(R // 2):
            out[k], out[k + R // 2] = self.addsub(ev[k], self.rotate(od[k], k, R, s))
        return out

    def powers(self, w, R: int) -> list:
        """[w^1 .. w^(R-1)] by squarings and products (at most log2 R deep)."""
        p = {1: w}
        for r in range(2, R):
            hi = 1 << (r.bit_length() - 1)
            p[r] = self.cmul(p[hi // 2], p[hi // 2]) if r == hi else self.cmul(p[hi], p[r - hi])
        return [p[r] for r in range(1, R)]


def _pad_expr(z: str, e: dict) -> str:
    """Code for the padded index of element ``z`` in exchange ``e``."""
    return f"({z} + (({z}) >> {e['P'].bit_length() - 1}) * {e['pad']})" if e["pad"] else z


def _passes(m: int, ept: int) -> list:
    passes, ns = [], 1
    for R in radices(m, ept):
        passes.append((ns, R))
        ns *= R
    return passes


def layout(m: int, ept: int, fpb: int, kind: str, buffers: int | None) -> dict:
    """The shared memory of one FFT of ``m`` complex points (``kind`` "c2c", or "r2c"/"c2r" of
    ``2 m`` real points): its exchanges, words per buffer, whether it uses two buffers
    (``buffers`` 1, 2 where they fit :data:`MAX_SHARED`, or None: two where they fit, else one;
    :data:`kernels._regfft.BUFFERS` says what each costs) and the bytes per block."""
    if buffers not in (None, 1, 2):
        raise ValueError(f"buffers must be None, 1 or 2, got {buffers!r}")
    exs = [exchange(m, ept, ns, R) for ns, R in _passes(m, ept)[:-1]]
    space = max([e["space"] for e in exs] + ([m + 1] if kind != "c2c" else []), default=0)
    double = buffers != 1 and 2 * space * 8 * fpb <= MAX_SHARED
    row = space * (2 if double else 1)
    return dict(exchanges=exs, space=space, double=double, row=row, bytes=fpb * row * 8)


class _Exchanges:
    """Emits the shared-memory exchanges of one ``execute`` in turn: the k-th uses buffer
    ``k mod 2`` (two buffers: one barrier each) or the one buffer (a barrier before each write
    after the first, too)."""

    def __init__(self, g: _Gen, lay: dict):
        self.g, self.lay, self.k = g, lay, 0

    def begin(self) -> int:
        """Start the next exchange: its buffer's offset in words (after ``o``)."""
        lay = self.lay
        if not lay["double"] and self.k > 0:
            self.g.emit(self.g.barrier)  # the previous exchange's reads are done
        buf = (self.k % 2) * lay["space"] if lay["double"] else 0
        self.k += 1
        return buf


def source(n: int, ept: int, fpb: int, sign: int, registers: str = "float", kind: str = "c2c",
           warp: bool = False, *, buffers: int | None) -> tuple:
    """(source of ``execute(r, sc)``, constants, shared bytes per block, exchanges).

    ``kind`` "c2c": ``n`` complex points; "r2c" / "c2r": ``2 n`` real points through an
    ``n``-point complex FFT of the sample pairs ``x[2j] + i x[2j + 1]`` (cuFFTDx's folded layout:
    ``ept`` pairs in, ``ept + 1`` spectrum values out, or the reverse; value ``ept`` is the
    Nyquist bin on thread 0). ``registers``: ``r`` holds float32 pairs ("float") or complex64
    values ("complex"). ``warp``: the exchanges' barriers are ``syncwarp`` (see :func:`warp_rows`),
    else ``syncthreads``. ``buffers``: as :func:`layout`'s."""
    T = n // ept
    g = _Gen(barrier="cuda.syncwarp()" if warp else "cuda.syncthreads()")
    lay = layout(n, ept, fpb, kind, buffers)
    ex = _Exchanges(g, lay)
    g.emit("t = cuda.threadIdx.x")
    if lay["row"]:
        g.emit(f"o = cuda.threadIdx.y * {lay['row']}")
    nin = ept + (kind == "c2r")
    x = []
    for i in range(nin):
        if registers == "complex":
            x.append((g.new(f"r[{i}].real"), g.new(f"r[{i}].imag")))
        else:
            x.append((g.new(f"r[{2 * i}]"), g.new(f"r[{2 * i + 1}]")))
    if kind == "c2r":
        x = _c2r_pre(g, ex, x, n, T, ept)
    y = _core(g, ex, x, n, ept, sign, fold=kind == "c2c")
    if kind == "r2c":
        y = _r2c_post(g, ex, y, n, T, ept)
    for i, v in enumerate(y):
        if registers == "complex":
            g.emit(f"r[{i}] = complex({v[0]}, {v[1]})")
        else:
            g.emit(f"r[{2 * i}] = {v[0]}")
            g.emit(f"r[{2 * i + 1}] = {v[1]}")
    body = "\n".join(g.lines)
    src = f"def execute(r, sc):\n{body}\n"
    return src, dict(g.consts), lay["bytes"], lay["exchanges"]


def _core(g: _Gen, ex: _Exchanges, x: list, n: int, ept: int, sign: int, fold: bool) -> list:
    """The ``n``-point complex FFT of the registers ``x`` (names), returning the output names;
    ``fold``: passes of radix :data:`FOLD_RADIX` or more fold their twiddle products."""
    T = n // ept
    passes = _passes(n, ept)
    for p, (ns, R) in enumerate(passes):
        nb = ept // R
        y = [None] * ept
        for b in range(nb):
            v = [x[b + rr * nb] for rr in range(R)]
            if ns > 1:  # twiddles exp(s 2 pi i r k / (ns R)), k = (t + T b) mod ns
                k = f"(t & {ns - 1})" if ns <= T else (f"(t + {T * b % ns})" if T * b % ns else "t")
                # the powers of exp(+2 pi i k / (ns R)) in both directions (the forward multiplies
                # by their conjugates): a kernel that runs both FFTs computes them once (LLVM
                # merges the identical code of the two inlined calls)
                f = g.new(f"sincospi(np.float32({k}) * np.float32({2.0 / (ns * R)!r}))")
                ws = g.powers((g.new(f"{f}[1]"), g.new(f"{f}[0]")), R)
                if fold and R >= FOLD_RADIX:
                    out = g.dft(v, sign, [None] + ws, conj=sign < 0)
                else:
                    out = g.dft([v[0]] + [g.cmul(v[rr], ws[rr - 1], conj=sign < 0) for rr in range(1, R)], sign)
            else:
                out = g.dft(v, sign)
            for rr in range(R):
                y[b + rr * nb] = out[rr]
        if p == len(passes) - 1:
            return y
        e = ex.lay["exchanges"][p]
        buf = ex.begin()
        # the thread's write base: element (t div ns) ns R + t mod ns (t + 0 when ns > T), padded
        a0 = f"(((t >> {ns.bit_length() - 1}) << {(ns * R).bit_length() - 1}) + (t & {ns - 1}))" if ns <= T else "t"
        wb = g.new(f"o + {buf} + {_pad_expr(a0, e)}")
        for b in range(nb):
            for rr in range(R):
                val = y[b + rr * nb]
                g.emit(f"store_complex(sc, {wb} + {e['write'][b][rr]}, complex({val[0]}, {val[1]}))")
        g.emit(g.barrier)
        rb = g.new(f"o + {buf} + {_pad_expr('t', e)}")
        x = []
        for i in range(ept):
            c = g.new(f"load_complex(sc, {rb} + {e['read'][i]})")
            x.append((g.new(f"{c}.real"), g.new(f"{c}.imag")))
    return x


def _partners(g: _Gen, ex: _Exchanges, vals: list, n: int, T: int, extra) -> list:
    """Each thread's values ``vals[i]`` (index ``k = t + T i``) through shared memory, natural
    order, plus ``extra`` at index ``n`` (thread 0); returns the names of the values at
    ``n - k``, which another thread holds (consecutive threads read consecutive words)."""
    buf = ex.begin()
    base = g.new(f"o + {buf} + t")
    for i, v in enumerate(vals):
        g.emit(f"store_complex(sc, {base} + {T * i}, complex({v[0]}, {v[1]}))")
    g.emit("if t == 0:")
    g.emit(f"    store_complex(sc, o + {buf + n}, complex({extra[0]}, {extra[1]}))")
    g.emit(g.barrier)
    rb = g.new(f"o + {buf + n} - t")
    out = []
    for i in range(len(vals)):
        c = g.new(f"load_complex(sc, {rb} - {T * i})")
        out.append((g.new(f"{c}.real"), g.new(f"{c}.imag")))
    return out


def _half_turns(g: _Gen, n: int, T: int, ept: int, scale: float) -> list:
    """``scale exp(+2 pi i k / (2 n))`` for the thread's ``k = t + T i``: one sincospif of ``t``
    (shared by a kernel's r2c and c2r) times constants."""
    f = g.new(f"sincospi(np.float32(t) * np.float32({1.0 / n!r}))")
    u = (g.new(f"{f}[1]"), g.new(f"{f}[0]"))
    out = []
    for i in range(ept):
        ang = math.pi * T * i / n
        c = (g.const(scale * math.cos(ang)), g.const(scale * math.sin(ang)))
        out.append(g.cmul(u, c))
    return out


def _r2c_post(g: _Gen, ex: _Exchanges, z: list, n: int, T: int, ept: int) -> list:
    """Spectrum of the 2n real samples from Z (the pairs' n-point FFT): for k = t + T i,
    X[k] = (A + B) / 2 - i exp(-2 pi i k / 2n) (A - B) / 2 with A = Z[k], B = conj(Z[n - k])
    (Z[n] = Z[0]); plus X[n] = Re Z[0] - Im Z[0] (meaningful on thread 0)."""
    q = _partners(g, ex, z, n, T, z[0])
    u = _half_turns(g, n, T, ept, 0.5)  # 0.5 exp(+...): its conjugate is the forward's turn
    out = []
    for (ar, ai), (qr, qi), (ur, ui) in zip(z, q, u):
        sr, si = g.new(f"{ar} + {qr}"), g.new(f"{ai} - {qi}")
        dr, di = g.new(f"{ar} - {qr}"), g.new(f"{ai} + {qi}")
        # 0.5 (S + conj(U') (D_i - i D_r)) with U' = 2 u: conj(u)(D_i - i D_r)
        out.append((g.new(f"{g.const(0.5)} * {sr} + ({ur} * {di} - {ui} * {dr})"),
                    g.new(f"{g.const(0.5)} * {si} - ({ur} * {dr} + {ui} * {di})")))
    out.append((g.new(f"{z[0][0]} - {z[0][1]}"), g.const(0.0)))
    return out


def _c2r_pre(g: _Gen, ex: _Exchanges, x: list, n: int, T: int, ept: int) -> list:
    """The pairs' spectrum from the real signal's X[0..n]: Z'[k] = S + i exp(+2 pi i k / 2n) D
    with S = X[k] + conj(X[n - k]), D = X[k] - conj(X[n - k]); its unnormalized n-point inverse
    is 2n times the pairs (the c2r's scale)."""
    p = _partners(g, ex, x[:ept], n, T, x[ept])
    u = _half_turns(g, n, T, ept, 1.0)
    out = []
    for (ar, ai), (pr, pi_), (ur, ui) in zip(x, p, u):
        sr, si = g.new(f"{ar} + {pr}"), g.new(f"{ai} - {pi_}")
        dr, di = g.new(f"{ar} - {pr}"), g.new(f"{ai} + {pi_}")
        # i U D = i (ur dr - ui di) - (ur di + ui dr)
        out.append((g.new(f"{sr} - ({ur} * {di} + {ui} * {dr})"), g.new(f"{si} + ({ur} * {dr} - {ui} * {di})")))
    return out


def warp_rows(n: int, ept: int, fpb: int) -> bool:
    """Whether each row's exchanges stay inside one warp (at most 32 threads per row, whole
    warps per block): then they synchronize the warp (``syncwarp``), not the block."""
    return n // ept <= 32 and (n // ept * fpb) % 32 == 0
