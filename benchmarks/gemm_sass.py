# SPDX-License-Identifier: Apache-2.0
"""The batched GEMM kernels' sm_90 machine code, saved without a GPU, so that a change to
``kernels.gemm`` can be checked instruction for instruction against the code before it.

    python benchmarks/gemm_sass.py --out DIR [--only NAME ...]
    python benchmarks/gemm_sass.py --out NEW_DIR --against OLD_DIR

The kernels (``KERNELS``): the vector kernel (``kernels.gemm._vector_kernel``, what
``batched_gemm`` runs) at 64^3 fp64, 32^3 fp32 and 16^3 fp32 with four GEMMs per block, and the
K-slice kernel (``_slice_kernel``) at 64^3 fp64 with 128 threads (64-wide slices, one stage,
ring epilogue; 16-wide slices, 4 stages, ring and C-tile epilogues; 32-wide, 2 stages, ring) and
with 256 threads (16-wide, 4 stages, ring). Each is made with and without a C term. Each is
compiled for sm_90 by ``nvmath_device.aot.compile_kernel`` (NVVM and nvJitLink, no driver) and
disassembled by ``nvdisasm``, found as ``benchmarks/sass_counts.py`` finds it.

Writes ``DIR/<name>.sass``, the kernel's instructions one per line, with nvdisasm's addresses and
numba's per-process counter in the kernel's mangled name removed: two compilations of the same
code give the same file. Also writes ``DIR/gemm_sass.json``, with registers, local memory,
instruction count and a hash per kernel. With ``--against``, the two folders' files are compared
kernel by kernel. The exit status is 1 when any kernel's code differs and 0 when none does. A
kernel missing from either folder counts as a difference. Without nvdisasm the exit status is 2.
The code is what nvJitLink of this machine makes: another version may make other code
(``benchmarks/RESULTS.md``, thirtieth session).
"""

from __future__ import annotations

import argparse
import hashlib
import json
import os
import re
import sys

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import sass_counts  # noqa: E402  (its nvdisasm finder and disassembler)

# name -> (m=n=k, dtype, GEMMs per block) of a vector kernel, or (kc, depth, epilogue, threads)
# of a 64^3 fp64 K-slice kernel; each with C and without
KERNELS = {
    "vec_64_float64": ("vector", 64, "float64", 1),
    "vec_32_float32": ("vector", 32, "float32", 1),
    "vec_16_float32": ("vector", 16, "float32", 4),
    "slice_128_kc64x1_ring": ("slice", 64, 1, "ring", 128),
    "slice_128_kc16x4_ring": ("slice", 16, 4, "ring", 128),
    "slice_128_kc16x4_stage": ("slice", 16, 4, "stage", 128),
    "slice_128_kc32x2_ring": ("slice", 32, 2, "ring", 128),
    "slice_256_kc16x4_ring": ("slice", 16, 4, "ring", 256),
}
NAMES = [f"{base}_c{c}" for base in KERNELS for c in (1, 0)]

_ADDRESS = re.compile(r"/\*[0-9a-f]+\*/")
_COUNTER = re.compile(r"B\d+v\d+B")  # numba's ``B<n>v<counter>B`` in a mangled kernel name


def normalize(sass: str) -> list[str]:
    """The instruction lines of nvdisasm's text, without their addresses and with numba's
    per-process counters taken out of mangled names (``B2v8B`` -> ``B``)."""
    return [_COUNTER.sub("B", _ADDRESS.sub("", line)).strip()
            for line in sass.splitlines() if sass_counts._INSTR.match(line)]


def build(name: str):
    """(kernel, argtypes) of the kernel called ``name`` (one of :data:`NAMES`)."""
    import numpy as np
    from numba.core import types

    from kernels.gemm import (
        _batched_descriptor_for,
        _slice_descriptor,
        _slice_kernel,
        _vector_kernel,
    )

    base, use_c = name[:-3], name.endswith("_c1")
    spec = KERNELS[base]
    v16 = types.complex128[:, ::1]
    if spec[0] == "vector":
        _, size, dtype, per_block = spec
        mm = _batched_descriptor_for(size, size, size, np.dtype(dtype), 90)
        scalar = types.float64 if dtype == "float64" else types.float32
        return _vector_kernel(mm, per_block, use_c)[0], (v16, v16, v16, v16, scalar, scalar, types.int64)
    _, kc, depth, epilogue, threads = spec
    mm = _slice_descriptor(64, 64, kc, np.float64, threads, sm=90)
    made = _slice_kernel(mm, 64, depth, use_c, None, epilogue)
    if made is None:
        raise ValueError(f"{name}: the K-slice kernel does not apply")
    return made[0], (v16, v16, v16, v16, types.float64, types.float64, types.int64)


def snapshot(name: str, nvdisasm: str, out: str) -> dict:
    """Compile and disassemble one kernel; write ``out/<name>.sass``; return its summary."""
    from nvmath_device.aot import compile_kernel

    kernel, argtypes = build(name)
    ck = compile_kernel(kernel, argtypes, sm=90)
    lines = normalize(sass_counts._disassemble(ck, nvdisasm))
    text = "\n".join(lines) + "\n"
    with open(os.path.join(out, f"{name}.sass"), "w") as f:
        f.write(text)
    return dict(registers=ck.registers, local_bytes=ck.frame_bytes, instructions=len(lines),
                sha256=hashlib.sha256(text.encode()).hexdigest()[:16])


def compare(old: str, new: str, names) -> list[str]:
    """The kernels of ``names`` whose ``.sass`` files differ between folders ``old`` and ``new``
    (a file missing from either counts as a difference), each with what differs."""
    diffs = []
    for name in names:
        texts = []
        for folder in (old, new):
            path = os.path.join(folder, f"{name}.sass")
            texts.append(open(path).read().splitlines() if os.path.isfile(path) else None)
        if texts[0] is None or texts[1] is None:
            diffs.append(f"{name}: missing from {old if texts[0] is None else new}")
        elif texts[0] != texts[1]:
            first = next((i for i, (a, b) in enumerate(zip(*texts)) if a != b), min(map(len, texts)))
            diffs.append(f"{name}: {len(texts[0])} -> {len(texts[1])} instructions, first difference at "
                         f"instruction {first}")
    return diffs


def parse_args(argv=None):
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--out", default="bench_out/gemm_sass", help="folder for the .sass files and gemm_sass.json")
    ap.add_argument("--only", nargs="+", choices=NAMES, metavar="NAME", default=None,
                    help=f"only these kernels (of {', '.join(NAMES)})")
    ap.add_argument("--against", default=None, help="an earlier --out folder to compare with")
    a = ap.parse_args(argv)
    if a.against is not None and not os.path.isdir(a.against):
        ap.error(f"--against {a.against}: no such folder")
    return a


def main(argv=None) -> int:
    args = parse_args(argv)
    nvdisasm = sass_counts.find_nvdisasm()
    if nvdisasm is None:
        print("benchmarks/gemm_sass.py needs nvdisasm: set NVDISASM, put it on PATH or "
              "pip install nvidia-cuda-nvdisasm", file=sys.stderr)
        return 2
    names = args.only or NAMES
    os.makedirs(args.out, exist_ok=True)
    summary = {}
    for name in names:
        summary[name] = s = snapshot(name, nvdisasm, args.out)
        print(f"{name}: {s['registers']} registers, {s['local_bytes']} B local, {s['instructions']} instructions, "
              f"{s['sha256']}", flush=True)
    with open(os.path.join(args.out, "gemm_sass.json"), "w") as f:
        json.dump(summary, f, indent=1)
    if args.against is None:
        return 0
    diffs = compare(args.against, args.out, names)
    print("\n".join(diffs) if diffs else f"the same code as {args.against}, for all {len(names)} kernels")
    return 1 if diffs else 0


if __name__ == "__main__":
    sys.exit(main())
