# SPDX-License-Identifier: Apache-2.0
"""What bounds ``Matmul.execute`` + synchronize against torch's ``_addmm_activation`` at small sizes.

At 128^3 fp16 RELU_BIAS, ``host_matmul.py`` puts the two within 0.1 us of each other. The
synchronize waits for the kernel, so a call's latency is the host's enqueue plus the kernel's GPU
time plus the synchronisation. This script separates the parts. It times, in one process, on the
same torch tensors, three rounds interleaved (each row's best round's median of 2,000 calls,
each call followed by ``torch.cuda.synchronize()``):

- torch ``_addmm_activation(bias, a, b)``;
- ``Matmul.execute`` as the library runs it (cuBLASLt's heuristic #0, up to 32 MiB of workspace);
- the plan with ``MatmulPlanPreferences(max_workspace=1 MiB)`` and with ``max_workspace=0``
  (other algorithms from the heuristic);
- the plan after ``Matmul.autotune`` (its fastest algorithm);
- the result allocated by ``torch.empty_strided(shape, strides, dtype=, device=)``, as before the
  forty-fifth session (the library now calls a template tensor's ``new_empty_strided``);
- a floor for the Python of a call: the same plan launched by a stand-in executor that only
  allocates the result and calls ``cublasLtMatmul`` on a list of its arguments;
- ``Matmul.execute`` on CuPy arrays sharing the tensors' memory, and ``matmul()``.

Each row's result must match torch's (max abs difference <= 1e-2 x max |torch|) before anything is
timed. Each row also gets its GPU time (``triton.testing.do_bench`` median) and the cuBLASLt workspace
of its algorithm.

Usage: ``python benchmarks/execute_variants.py --out DIR [--size 128]``; writes
``DIR/execute_variants.json`` and ``DIR/execute_variants.md``. Exits with status 2 and a message
when no GPU is usable.
"""

from __future__ import annotations

import argparse
import json
import os
import sys

sys.path.insert(0, os.path.join(os.path.dirname(__file__), ".."))
sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))  # host_matmul.py beside this one

from host_matmul import latency_us  # noqa: E402  (median of fn(); sync() over n calls, us)

ROUNDS = 3
CALLS = 2000


def table(rows, device, size) -> str:
    """The markdown table of ``rows`` (dicts with name, best_us, rounds_us, gpu_us, workspace)."""
    torch_us = next((r["best_us"] for r in rows if r["name"].startswith("torch")), None)
    out = [
        f"execute + synchronize at {size}^3 fp16 RELU_BIAS, {device}; best of {ROUNDS} interleaved rounds' "
        f"medians of {CALLS} calls (`python benchmarks/execute_variants.py`)",
        "",
        "| variant | per call us | vs torch us | rounds us | GPU time us | workspace bytes |",
        "|---|---:|---:|---|---:|---:|",
    ]
    for r in rows:
        diff = "" if torch_us is None else f"{r['best_us'] - torch_us:+.2f}"
        ws = "" if r.get("workspace") is None else str(r["workspace"])
        out.append(
            f"| {r['name']} | {r['best_us']:.2f} | {diff} | {' / '.join(f'{x:.2f}' for x in r['rounds_us'])} | "
            f"{r['gpu_us']:.2f} | {ws} |"
        )
    return "\n".join(out) + "\n"


class _MinimalExecutor:
    """Stands in for a plan's executor: allocates the result and calls cublasLtMatmul on a list of
    its arguments, nothing else (the floor of the Python of a call)."""

    outputs = ()

    def __init__(self, ex, new_result):
        self.current_stream, self.rt = ex.current_stream, ex.rt
        self._vals, self._fn, self._c_from_d = list(ex.args.values()), ex.fn, ex.args.c_from_d
        self._new = new_result

    def run(self, stream, current):
        d = self._new()
        vals = self._vals
        vals[10] = d.data_ptr()
        vals[15] = stream
        if self._c_from_d:
            vals[8] = vals[10]
        st = self._fn(*vals)
        if st:
            raise RuntimeError(f"cublasLtMatmul failed: status {st}")
        return d, {}


def main(argv=None):
    ap = argparse.ArgumentParser()
    ap.add_argument("--out", default="bench_out")
    ap.add_argument("--size", type=int, default=128, help="M = N = K (default 128)")
    args = ap.parse_args(argv)
    import torch

    if not torch.cuda.is_available():
        print("execute_variants.py: no CUDA GPU usable here", file=sys.stderr)
        return 2
    import cupy as cp
    from triton.testing import do_bench

    from nvmath_host import Matmul, MatmulEpilog, MatmulPlanPreferences, matmul

    os.makedirs(args.out, exist_ok=True)
    torch.manual_seed(0)
    n = args.size
    a = torch.randn(n, n, device="cuda", dtype=torch.float16)
    b = torch.randn(n, n, device="cuda", dtype=torch.float16)
    bias = torch.randn(n, device="cuda", dtype=torch.float16)
    ep = {"epilog": MatmulEpilog.RELU_BIAS, "epilog_inputs": {"bias": bias}}
    sync = torch.cuda.synchronize

    def planned(prefs=None):
        mm = Matmul(a, b)
        mm.plan(prefs, **ep)
        return mm

    variants = [("torch _addmm_activation", lambda: torch._addmm_activation(bias, a, b), None)]
    mm = planned()
    variants.append(("Matmul.execute (library)", mm.execute, mm))
    for ws in (1 << 20, 0):
        x = planned(MatmulPlanPreferences(max_workspace=ws))
        variants.append((f"Matmul.execute, max_workspace={ws}", x.execute, x))
    tuned = planned()
    tuned.autotune(iterations=20)
    variants.append(("Matmul.execute, autotuned", tuned.execute, tuned))
    before = planned()
    dev = torch.device("cuda", a.get_device())
    shape, strides = (n, n), (n, 1)
    before._exec.alloc_d = lambda stream, current=False: torch.empty_strided(
        shape, strides, dtype=torch.float16, device=dev
    )
    variants.append(("Matmul.execute, result by empty_strided(dtype=, device=)", before.execute, before))
    floor = planned()
    template = torch.empty((1,), dtype=torch.float16, device=dev)
    floor._exec = _MinimalExecutor(floor._exec, lambda: template.new_empty_strided(shape, strides))
    variants.append(("floor: allocate + cublasLtMatmul only", floor.execute, floor))
    ca, cb, cbias = cp.asarray(a), cp.asarray(b), cp.asarray(bias)
    mc = Matmul(ca, cb)
    mc.plan(epilog=MatmulEpilog.RELU_BIAS, epilog_inputs={"bias": cbias})
    variants.append(("Matmul.execute, CuPy operands", mc.execute, mc))
    variants.append(("matmul()", lambda: matmul(a, b, **ep), None))

    want = torch._addmm_activation(bias, a, b).float()
    scale = want.abs().max().item()
    for name, fn, _ in variants:
        got = fn()
        err = (torch.as_tensor(got, device="cuda").float() - want).abs().max().item()
        if not err <= 1e-2 * scale:
            raise AssertionError(f"{name}: max abs difference {err:.3g} from torch's result")
    rounds = {name: [] for name, _, _ in variants}
    for _ in range(ROUNDS):
        for name, fn, _ in variants:
            rounds[name].append(latency_us(fn, sync, n=CALLS))
    rows = []
    for name, fn, plan in variants:
        rows.append({
            "name": name,
            "best_us": min(rounds[name]),
            "rounds_us": rounds[name],
            "gpu_us": do_bench(fn, return_mode="median") * 1e3,
            "workspace": None if plan is None else plan.algorithms[0].workspace_size,
        })
    device = torch.cuda.get_device_name()
    text = table(rows, device, n)
    print(text)
    with open(os.path.join(args.out, "execute_variants.json"), "w") as f:
        json.dump({"device": device, "size": n, "rounds": ROUNDS, "calls": CALLS, "rows": rows}, f, indent=1)
    with open(os.path.join(args.out, "execute_variants.md"), "w") as f:
        f.write(text)
    return 0


if __name__ == "__main__":
    sys.exit(main())
