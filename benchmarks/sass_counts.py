# SPDX-License-Identifier: Apache-2.0
"""The direct-summation kernel's sm_90 machine code, counted without a GPU: registers, local
memory and instructions per thread by opcode, for each (row length, taps, levels, segments);
with ``--fft``, also the complex FFT convolution kernel's (``kernels._fused.filter_kernel``, one
row per FFT) with our own FFT (``kernels._regfft``) and with cuFFTDx's at the same elements per
thread.

    python benchmarks/sass_counts.py --out DIR [--cases 4096:63 1024:63 4096:127:256] [--levels 1 2] [--pipeline]
    python benchmarks/sass_counts.py --out DIR --cases --fft 512:8 1024:16 4096:16 4096:16:real 512:8:real

A case is ``n:taps`` (``fft_convolve``'s circular kernel for rows of n samples) or
``n:taps:nseg`` (``fir_filter``'s kernel for rows of nseg segments of n samples). Each is
compiled for sm_90 by ``nvmath_device.aot.compile_kernel`` (NVVM + nvJitLink, no driver) at each
of ``--levels`` (default: what ``kernels._direct.levels`` picks; with ``--pipeline`` also the
pipelined kernel where it exists, whose count holds its first row's copies once and the loop's
per-row code) and disassembled by
``nvdisasm`` (``$NVDISASM``, else on ``PATH``, else that of the ``nvidia-cuda-nvdisasm`` wheel,
which the test extras install).
The kernel is unrolled, so these static counts are the instructions every thread issues. An
instruction-bound kernel's time scales with them (the 4096 x 63 kernel was: issue slots 87 %
busy); they do not replace a timing. Writes sass_counts.json (and with --fft sass_counts_fft.json)
and sass_counts.md into --out;
exits with status 2 and a message when nvdisasm is not found.
"""

from __future__ import annotations

import argparse
import collections
import json
import os
import re
import shutil
import subprocess
import sys
import tempfile

# one instruction line of nvdisasm's output: /*0a30*/  [@!P0] OPCODE.MODIFIERS operands ;
_INSTR = re.compile(r"^\s*/\*[0-9a-f]{4,}\*/\s+(?:@!?U?P[T0-9]+\s+)?([A-Z][A-Z0-9_.]*)")
COLUMNS = ("FFMA", "FMUL", "FADD", "LDS", "STS", "LDG", "LDGSTS", "STG", "ULDC", "LDC")


def parse_case(text: str) -> tuple:
    """``"n:taps"`` or ``"n:taps:nseg"`` -> ``(n, taps, nseg)`` (nseg 0: circular)."""
    parts = text.split(":")
    if len(parts) not in (2, 3) or not all(p.isdigit() for p in parts):
        raise argparse.ArgumentTypeError(f"a case is n:taps or n:taps:nseg, got {text!r}")
    n, m, nseg = (int(p) for p in (*parts, "0")[:3])
    return n, m, nseg


def parse_fft(text: str) -> tuple:
    """``"n:ept"`` (complex) or ``"n:ept:real"`` (n real samples, ept complex values per thread of
    their n/2-point FFT) -> ``(n, ept, real)``, a case kernels._regfft takes."""
    from kernels import _regfft

    parts = text.split(":")
    real = len(parts) == 3 and parts[2] == "real"
    if len(parts) not in (2, 3) or (len(parts) == 3 and not real) or not all(p.isdigit() for p in parts[:2]):
        raise argparse.ArgumentTypeError(f"an FFT case is n:ept or n:ept:real, got {text!r}")
    n, ept = int(parts[0]), int(parts[1])
    why = _regfft.unsupported(n // 2 if real else n, ept, 1) if not (real and n % 2) else "n must be even"
    if why:
        raise argparse.ArgumentTypeError(f"{text}: {why}")
    return n, ept, real


def parse_args(argv=None):
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--out", default="bench_out", help="folder for sass_counts.json and .md")
    ap.add_argument("--cases", type=parse_case, nargs="*", default=[(4096, 63, 0), (1024, 63, 0), (4096, 127, 256)],
                    help="n:taps (circular) or n:taps:nseg (FIR segments)")
    ap.add_argument("--levels", type=int, nargs="+", choices=(0, 1, 2), default=None,
                    help="times the taps are split (default: kernels._direct.levels' choice)")
    ap.add_argument("--pipeline", action="store_true", help="also the pipelined kernel, where it exists")
    ap.add_argument("--fft", type=parse_fft, nargs="+", default=[],
                    help="n:ept cases of the complex FFT convolution kernel, our FFT and cuFFTDx's")
    a = ap.parse_args(argv)
    from kernels import _direct

    for n, m, nseg in a.cases:
        why = _direct.unsupported(n, m, "float32", False, linear=bool(nseg))
        if why is None and n > _direct.MAX_N:
            why = f"at most {_direct.MAX_N} samples per row or segment, got {n}"
        if why is not None:
            ap.error(f"--cases {n}:{m}: {why}")
    return a


def opcodes(sass: str) -> collections.Counter:
    """Instructions by opcode (without modifiers: ``LDS.64`` counts as ``LDS``) in nvdisasm's text."""
    return collections.Counter(m.group(1).split(".")[0] for line in sass.splitlines() if (m := _INSTR.match(line)))


def count(n: int, m: int, lev: int, nseg: int, nvdisasm: str, pipe: bool = False) -> dict:
    """One case: compile, disassemble, count."""
    import numpy as np
    from numba import types

    from kernels import _direct
    from nvmath_device.aot import compile_kernel

    ntaps = len(_direct.taps_param(np.ones(m), lev))
    one_row = _direct.geometry(n, m, lev)[1] == 1 and not pipe
    argtypes = ((types.complex64[::1], types.float32[::1], types.complex64[::1])
                + (() if one_row else (types.int64,)) + (types.UniTuple(types.float32, ntaps),))
    ck = compile_kernel(_direct.kernel(n, m, lev, nseg, pipe), argtypes, sm=90)
    ops = opcodes(_disassemble(ck, nvdisasm))
    return dict(n=n, taps=m, levels=lev, nseg=nseg, pipelined=pipe, registers=ck.registers, local_bytes=ck.frame_bytes,
                instructions=sum(ops.values()), opcodes=dict(ops.most_common()),
                outputs_per_thread=_direct.OUTPUTS)


def _disassemble(ck, nvdisasm: str) -> str:
    with tempfile.TemporaryDirectory() as d:
        path = os.path.join(d, "k.cubin")
        with open(path, "wb") as f:
            f.write(ck.cubin)
        return subprocess.run([nvdisasm, "-c", path], capture_output=True, text=True, check=True).stdout


def count_fft(n: int, ept: int, engine: str, nvdisasm: str, real: bool = False) -> dict:
    """The FFT convolution kernel (flat rows of ``n``: complex64, or with ``real`` float32 rows
    moved as sample pairs, folded FFTs) with ``engine`` "own" (kernels._regfft) or "cufftdx"
    (rows per block: cuFFTDx's suggestion), both at ``ept`` complex values per thread."""
    import numpy as np
    from numba import types

    from kernels import _fused, _regfft
    from nvmath_device.aot import compile_kernel

    if engine == "own":
        fwd, inv = _regfft.pair(n, ept, real=real)
    else:
        fwd, inv = _fused._pair_descriptors(n, np.float32, real, 2 * ept if real else ept, "suggested", sm=90,
                                            folded=real)
    c = types.complex64[::1]
    ck = compile_kernel(_fused.filter_kernel(fwd, inv, real, False, pairs=real, flat=True),
                        (c, c, c, types.int64, types.int64, types.int64, types.int64), sm=90)
    text = _disassemble(ck, nvdisasm)
    ops = opcodes(text)
    total = sum(ops.values())
    return dict(n=n, real=real, engine=engine, ept=ept, threads_per_row=fwd.stride, ffts_per_block=fwd.ffts_per_block_value,
                registers=ck.registers, local_bytes=ck.frame_bytes, instructions=total,
                instructions_per_row=total * fwd.stride, shared_8_byte=text.count("LDS.64") + text.count("STS.64"),
                opcodes=dict(ops.most_common()))


def format_fft_table(rows) -> str:
    lines = ["FFT convolution kernel (filter_kernel, float32; real: folded r2c/c2r, ept counts the complex values "
             "of their n/2-point FFT), sm_90 code (static counts, nvdisasm; no GPU)", "",
             "| n | type | FFT | ept | threads per row | rows per block | registers | local bytes | instructions per thread "
             "| per row | LDS | STS | of them 8-byte | FFMA | FMUL | FADD |",
             "|---:|---|---|---:|---:|---:|---:|---:|---:|---:|---:|---:|---:|---:|---:|---:|"]
    for r in rows:
        o = r["opcodes"]
        lines.append(f"| {r['n']} | {'real' if r.get('real') else 'c2c'} | {r['engine']} | {r['ept']} | {r['threads_per_row']} | {r['ffts_per_block']} | "
                     f"{r['registers']} | {r['local_bytes']} | {r['instructions']} | {r['instructions_per_row']} | "
                     f"{o.get('LDS', 0)} | {o.get('STS', 0)} | {r['shared_8_byte']} | {o.get('FFMA', 0)} | "
                     f"{o.get('FMUL', 0)} | {o.get('FADD', 0)} |")
    return "\n".join(lines) + "\n"


def format_table(rows) -> str:
    lines = ["Direct-summation kernel, sm_90 code per thread (static counts, nvdisasm; no GPU)", "",
             "| n | taps | segments | levels | pipelined | registers | local bytes | instructions | "
             + " | ".join(COLUMNS) + " |",
             "|---:|---:|---:|---:|---|---:|---:|---:|" + "---:|" * len(COLUMNS)]
    for r in rows:
        cells = " | ".join(str(r["opcodes"].get(c, 0)) for c in COLUMNS)
        lines.append(f"| {r['n']} | {r['taps']} | {r['nseg'] or '-'} | {r['levels']} | "
                     f"{'yes' if r.get('pipelined') else 'no'} | {r['registers']} | "
                     f"{r['local_bytes']} | {r['instructions']} | {cells} |")
    return "\n".join(lines) + "\n"


def find_nvdisasm() -> str | None:
    """``$NVDISASM`` when set (None if it names no file), else nvdisasm on ``PATH``, else the
    one in an installed ``nvidia-cuda-nvdisasm`` wheel (``nvidia/cu*/bin``)."""
    env = os.environ.get("NVDISASM")
    if env is not None:
        return env if os.path.isfile(env) else None
    found = shutil.which("nvdisasm")
    if found:
        return found
    import importlib.util

    spec = importlib.util.find_spec("nvidia")
    for root in (spec.submodule_search_locations if spec else None) or ():
        for cu in sorted(os.listdir(root), reverse=True):
            path = os.path.join(root, cu, "bin", "nvdisasm")
            if cu.startswith("cu") and os.access(path, os.X_OK):
                return path
    return None


def main(argv=None) -> int:
    args = parse_args(argv)
    nvdisasm = find_nvdisasm()
    if nvdisasm is None:
        print("benchmarks/sass_counts.py needs nvdisasm: set NVDISASM, put it on PATH or "
              "pip install nvidia-cuda-nvdisasm", file=sys.stderr)
        return 2
    from kernels import _direct

    rows = []
    for n, m, nseg in args.cases:
        for lev in args.levels or [_direct.levels(m)]:
            for pipe in (False, True) if args.pipeline and _direct.pipelines(n, m, lev) else (False,):
                r = count(n, m, lev, nseg, nvdisasm, pipe)
                print(f"n={n} taps={m} nseg={nseg} levels={lev} pipelined={pipe}: {r['registers']} registers, "
                      f"{r['instructions']} instructions", flush=True)
                rows.append(r)
    fft_rows = []
    for n, ept, real in args.fft:
        for engine in ("own", "cufftdx"):
            r = count_fft(n, ept, engine, nvdisasm, real)
            print(f"fft n={n} ept={ept} real={real} {engine}: {r['registers']} registers, {r['instructions']} instructions "
                  f"({r['instructions_per_row']} per row)", flush=True)
            fft_rows.append(r)
    os.makedirs(args.out, exist_ok=True)
    with open(os.path.join(args.out, "sass_counts.json"), "w") as f:
        json.dump(rows, f, indent=1)
    if fft_rows:
        with open(os.path.join(args.out, "sass_counts_fft.json"), "w") as f:
            json.dump(fft_rows, f, indent=1)
    table = (format_table(rows) if rows else "") + ("\n" if rows and fft_rows else "") + (
        format_fft_table(fft_rows) if fft_rows else "")
    with open(os.path.join(args.out, "sass_counts.md"), "w") as f:
        f.write(table)
    print(table)
    return 0


if __name__ == "__main__":
    sys.exit(main())
