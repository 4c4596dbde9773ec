# SPDX-License-Identifier: Apache-2.0
"""benchmarks/random_backends.py without a GPU: every kernel of both backends (cuRAND's
curand_kernel.h, cuRANDDx) compiles with NVRTC to a cubin for sm_90 with the options CuPy would
get; the argument parser's validation; the NumPy Philox4x32-10 reference against Random123's
known answers; the cross-check's comparisons; the files it writes; exit status 2 without a GPU."""

import json
import os
import subprocess
import sys

import numpy as np
import pytest

from tests.benchmark_script import load

ROOT = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
SCRIPT = os.path.join(ROOT, "benchmarks", "random_backends.py")

# What CuPy's RawModule adds to our options for an sm_90 GPU (cupy/cuda/compiler.py).
CUPY_EXTRA = ["-arch=sm_90", "--device-as-default-execution-space", "-ftz=true"]


@pytest.fixture(scope="module")
def rb():
    return load("random_backends")


def nvrtc_cubin(src: str, opts, name="bench.cu") -> bytes:
    """NVRTC ``src`` -> cubin (no GPU needed); AssertionError with the log when it fails."""
    from cuda.bindings import nvrtc

    err, prog = nvrtc.nvrtcCreateProgram(src.encode(), name.encode(), 0, [], [])
    assert err == nvrtc.nvrtcResult.NVRTC_SUCCESS, err
    try:
        (err,) = nvrtc.nvrtcCompileProgram(prog, len(opts), [o.encode() for o in opts])
        _, size = nvrtc.nvrtcGetProgramLogSize(prog)
        logbuf = bytearray(size)
        nvrtc.nvrtcGetProgramLog(prog, logbuf)
        assert err == nvrtc.nvrtcResult.NVRTC_SUCCESS, (
            f"{name} does not compile ({err.name}):\n{logbuf.decode(errors='replace')[:6000]}")
        _, size = nvrtc.nvrtcGetCUBINSize(prog)
        cubin = bytearray(size)
        (err,) = nvrtc.nvrtcGetCUBIN(prog, cubin)
        assert err == nvrtc.nvrtcResult.NVRTC_SUCCESS, err
        return bytes(cubin)
    finally:
        nvrtc.nvrtcDestroyProgram(prog)


# ----------------------------------------------------------------------------------------------
# The CUDA sources compile (NVRTC, sm_90, no GPU)


@pytest.mark.parametrize("backend", ["curand", "curanddx"])
def test_every_kernel_compiles_for_sm90(rb, backend):
    src = rb.source(backend)
    names = rb.kernel_names(backend)
    assert len(names) == 6 and len(set(names)) == 6
    for n in names:
        assert f'extern "C" __global__ void {n}(' in src
    cubin = nvrtc_cubin(src, rb.nvrtc_options(backend, 900) + CUPY_EXTRA, f"{backend}.cu")
    assert cubin[:4] == b"\x7fELF"
    for n in names:  # each kernel is an entry of the cubin, under its extern "C" name
        assert n.encode() + b"\x00" in cubin, n


def test_compile_helper_fails_on_a_bad_source(rb):
    """The compile check can fail: an undefined call is an NVRTC error, reported with its log."""
    bad = 'extern "C" __global__ void k(float* o) { o[0] = no_such_function(); }\n'
    with pytest.raises(AssertionError, match="no_such_function"):
        nvrtc_cubin(bad, ["-std=c++17", "-arch=sm_90"])


def test_options(rb):
    for b in rb.BACKENDS:
        opts = rb.nvrtc_options(b, 900)
        assert "-std=c++17" in opts
        assert not any(o.startswith(("-arch", "--gpu-architecture")) for o in opts)  # CuPy adds it
        inc = [o[2:] for o in opts if o.startswith("-I")]
        assert any(os.path.isfile(os.path.join(d, "curand_kernel.h")) for d in inc)
        assert any(os.path.isfile(os.path.join(d, "curanddx.hpp")) for d in inc)
        assert all(os.path.isdir(d) for d in inc)
    assert "-DBENCH_SM=900" in rb.nvrtc_options("curanddx", 900)
    assert not any("BENCH_SM" in o for o in rb.nvrtc_options("curand", 900))
    assert "curanddx::SM<BENCH_SM>" in rb.source("curanddx")
    assert "curanddx::box_muller" in rb.source("curanddx") and "curand_normal4" in rb.source("curand")


def test_helpers_name_bad_arguments(rb):
    with pytest.raises(ValueError, match="backend"):
        rb.source("hiprand")
    with pytest.raises(ValueError, match="backend"):
        rb.nvrtc_options("xorwow", 900)
    with pytest.raises(ValueError, match="sm must be"):
        rb.nvrtc_options("curanddx", 90)
    with pytest.raises(ValueError, match="dist"):
        rb.kernel_name("curand", "normal2", "sum")
    with pytest.raises(ValueError, match="mode"):
        rb.kernel_name("curand", "normal4", "max")
    assert rb.dx_sm("90") == 900 and rb.dx_sm(100) == 1000 and rb.dx_sm("80") == 800
    with pytest.raises(ValueError, match="SM<610>"):
        rb.dx_sm("61")
    with pytest.raises(ValueError, match="compute_capability"):
        rb.dx_sm("sm90")


# ----------------------------------------------------------------------------------------------
# Arguments


def test_parse_args_defaults(rb):
    a = rb.parse_args([])
    assert (a.out, a.threads, a.draws, a.block, a.reps, a.seed) == ("bench_out", 2**20, 64, 256, 20, 1234)
    assert (a.check_threads, a.check_draws) == (4096, 8)
    a = rb.parse_args(["--threads", "2**16", "--draws", "1<<3", "--block", "128", "--reps", "5",
                       "--seed", str(2**64 - 1), "--out", "/tmp/x"])
    assert (a.threads, a.draws, a.block, a.reps, a.seed, a.out) == (65536, 8, 128, 5, 2**64 - 1, "/tmp/x")


@pytest.mark.parametrize("args, named", [
    (["--threads", "0"], "--threads"),
    (["--threads", "-4"], "--threads"),
    (["--threads", str(2**31)], "--threads"),
    (["--threads", "many"], "--threads"),
    (["--draws", "0"], "--draws"),
    (["--block", "48"], "--block"),
    (["--block", "2048"], "--block"),
    (["--block", "0"], "--block"),
    (["--reps", "0"], "--reps"),
    (["--seed", "-1"], "--seed"),
    (["--seed", str(2**64)], "--seed"),
    (["--check-threads", "0"], "--check-threads"),
    (["--check-draws", "0"], "--check-draws"),
])
def test_parse_args_rejects(rb, capsys, args, named):
    with pytest.raises(SystemExit) as e:
        rb.parse_args(args)
    assert e.value.code == 2
    err = capsys.readouterr().err
    assert named in err, err


def test_help_and_no_gpu_exit(rb):
    p = subprocess.run([sys.executable, SCRIPT, "--help"], capture_output=True, text=True, timeout=120)
    assert p.returncode == 0
    for opt in ("--threads", "--draws", "--block", "--reps", "--seed", "--out", "--check-threads"):
        assert opt in p.stdout
    # no GPU usable, deterministically: the simulator, or no visible device
    for env in ({"NUMBA_ENABLE_CUDASIM": "1"}, {"NUMBA_ENABLE_CUDASIM": "0", "CUDA_VISIBLE_DEVICES": ""}):
        p = subprocess.run([sys.executable, SCRIPT, "--out", "/nonexistent/never"], capture_output=True,
                           text=True, env={**os.environ, **env}, timeout=120)
        assert p.returncode == 2, (env, p.stdout, p.stderr)
        lines = p.stderr.strip().splitlines()
        assert len(lines) == 1 and "needs a CUDA GPU" in lines[0], (env, p.stderr)
        assert not os.path.exists("/nonexistent/never")


# ----------------------------------------------------------------------------------------------
# Host references and the cross-check


def test_philox_known_answers(rb):
    """Random123's kat_vectors for philox4x32 with 10 rounds."""
    kat = [([0, 0, 0, 0], [0, 0], [0x6627E8D5, 0xE169C58D, 0xBC57AC4C, 0x9B00DBD8]),
           ([0xFFFFFFFF] * 4, [0xFFFFFFFF] * 2, [0x408F276D, 0x41C83B0E, 0xA20BC7C6, 0x6D5451FD]),
           ([0x243F6A88, 0x85A308D3, 0x13198A2E, 0x03707344], [0xA4093822, 0x299F31D0],
            [0xD16CFE09, 0x94FDCCEB, 0x5001E420, 0x24126EA1])]
    ctr = np.array([c for c, _, _ in kat], dtype=np.uint32)
    key = np.array([k for _, k, _ in kat], dtype=np.uint32)
    assert rb.philox4x32_10(ctr, key).tolist() == [r for _, _, r in kat]


def test_reference_stream_layout(rb):
    """Thread i = subsequence i (counter words z, w), draw k = counter word x; key = the seed."""
    seed = 0x0123456789ABCDEF
    ref = rb.reference_bits(seed, 3, 2)
    assert ref.shape == (2, 3, 4) and ref.dtype == np.uint32
    key = np.array([seed & 0xFFFFFFFF, seed >> 32], dtype=np.uint32)
    for k in range(2):
        for i in range(3):
            want = rb.philox4x32_10(np.array([k, 0, i, 0], dtype=np.uint32), key)
            assert ref[k, i].tolist() == want.tolist()
    assert len({tuple(r) for r in ref.reshape(-1, 4).tolist()}) == 6


def test_box_muller_reference(rb):
    bits = rb.reference_bits(7, 4096, 4)
    z = rb.box_muller_reference(bits)
    assert abs(z.mean()) < 0.02 and abs(z.std() - 1) < 0.02
    # the extremes: u just above 0 gives the largest radius; y = 0 gives sin ~ 0, cos ~ 1
    z = rb.box_muller_reference(np.array([[0, 0, 2**32 - 1, 2**31]], dtype=np.uint32))
    r = np.sqrt(-2 * np.log(2.0**-33))
    assert z[0, 0] == pytest.approx(r * np.sin(2 * np.pi * 2.0**-33)) and z[0, 1] == pytest.approx(r, rel=1e-6)


def _fake_check(rb, threads=64, draws=3):
    ref = rb.reference_bits(1234, threads, draws)
    normals = rb.box_muller_reference(ref).astype(np.float32)
    uniforms = (ref * 2.0**-32 + 2.0**-33).astype(np.float32)
    bits = {b: ref.copy() for b in rb.BACKENDS}
    return bits, {b: normals.copy() for b in rb.BACKENDS}, {b: uniforms.copy() for b in rb.BACKENDS}, ref


def test_compare_identical_and_different(rb):
    bits, normals, uniforms, ref = _fake_check(rb)
    res = rb.compare(bits, normals, uniforms, ref)
    assert res["ok"] and res["raw_identical"] and res["raw_words_differing"] == 0
    assert res["raw_words"] == ref.size and res["normal_max_abs_diff"] == 0.0 and res["normal_bitwise_identical"]
    assert res["curand_raw_equals_numpy_philox"] and res["curanddx_raw_equals_numpy_philox"]
    assert res["curand_normal_vs_formula_max_abs"] < 1e-5

    bits["curanddx"][1, 5, 2] ^= 1  # one word of one backend differs
    normals["curanddx"][0, 0, 0] += 0.25
    res = rb.compare(bits, normals, uniforms, ref)
    assert not res["ok"] and not res["raw_identical"] and res["raw_words_differing"] == 1
    assert not res["curanddx_raw_equals_numpy_philox"] and res["curand_raw_equals_numpy_philox"]
    assert res["normal_max_abs_diff"] == pytest.approx(0.25) and not res["normal_bitwise_identical"]
    assert res["curanddx_normal_vs_formula_max_abs"] > rb.NORMAL_FORMULA_TOL


def test_compare_one_backend_missing(rb):
    bits, normals, uniforms, ref = _fake_check(rb)
    for d in (bits, normals, uniforms):
        del d["curanddx"]
    res = rb.compare(bits, normals, uniforms, ref)
    assert not res["ok"] and "raw_identical" not in res and res["curand_raw_equals_numpy_philox"]


# ----------------------------------------------------------------------------------------------
# Rows, verdict, files


def _rows(rb):
    rows = []
    for dist in rb.DISTS:
        for mode in rb.MODES:
            base = 2.0
            written = 2**20 * 64 * 16 if mode == "store" else None
            rows.append(rb.finish_row("curand curand_kernel.h", "curand", dist, mode, 2**20, 64, base, base, written))
            rows.append(rb.finish_row("curanddx cuRANDDx", "curanddx", dist, mode, 2**20, 64,
                                      1.6 if dist == "normal4" else 2.5, base, written))
    rows.append(rb.finish_row("cupy.random.default_rng (XORWOW)", "cupy", "normal4", "store", 2**20, 64, None,
                              note="RuntimeError: no | pipes\nhere"))
    return rows


def test_rows_and_verdict(rb):
    rows = _rows(rb)
    r = rows[1]
    assert r["ns_per_draw4"] == pytest.approx(1.6e6 / 2**26) and r["vs_curand"] == pytest.approx(0.8)
    assert r["draw4_per_s"] == pytest.approx(2**26 / 1.6e-3) and r["values_per_s"] == 4 * r["draw4_per_s"]
    assert r["gb_per_s_written"] is None and rows[3]["gb_per_s_written"] == pytest.approx(2**30 / 1.6e-3 / 1e9)
    v = rb.verdict(rows)
    assert set(v) == {f"{d}_{m}" for d in rb.DISTS for m in rb.MODES}
    assert v["normal4_sum"]["faster"] == "curanddx" and v["normal4_sum"]["ratio"] == pytest.approx(1.25)
    assert v["bits4_store"]["faster"] == "curand" and v["bits4_store"]["ratio"] == pytest.approx(1.25)


def test_write_results(rb, tmp_path):
    rows = _rows(rb)
    meta = dict(device="Fake H200", cc="90", threads=2**20, draws=64, reps=20)
    check = dict(threads=4096, draws=8, raw_identical=True, raw_words_differing=0, raw_words=131072, ok=True,
                 normal_max_abs_diff=0.0)
    text = rb.write_results(str(tmp_path / "o"), rows, meta, check, rb.verdict(rows))
    data = json.loads((tmp_path / "o" / "random_backends.json").read_text())
    assert data["meta"] == meta and data["check"] == check and len(data["rows"]) == len(rows)
    assert data["verdict"]["normal4_sum"]["faster"] == "curanddx"
    md = (tmp_path / "o" / "random_backends.md").read_text()
    assert md == text
    assert "Fake H200" in md and "raw 32-bit outputs identical: **True**" in md
    assert "| curanddx cuRANDDx | curanddx | normal4 sum | 1.600 |" in md and "0.80x" in md
    assert "not run: RuntimeError: no / pipes here" in md
    assert "normal4_sum: curanddx (1.25x)" in md
    # table rows have the header's number of cells
    table = [ln for ln in md.splitlines() if ln.startswith("|")]
    assert len({ln.count("|") for ln in table}) == 1


def test_header_versions(rb):
    v = rb.header_versions()
    assert v["curand"].startswith("curand") and "?" not in v["curand"]
    assert all(p.isdigit() for p in v["curanddx"].split(".")), v


# ----------------------------------------------------------------------------------------------
# The GPU side's Python, end to end, against a fake CuPy whose kernels compute the NumPy
# references (the numbers are not timings; this catches the script's own bugs without a GPU)


class _FakeKernel:
    def __init__(self, rb, name, log):
        self.rb, self.name, self.log = rb, name, log

    def __call__(self, grid, block, args):
        seed, n, draws, out = int(args[0]), int(args[1]), int(args[2]), args[3]
        assert isinstance(args[0], np.uint64) and isinstance(args[1], np.uint32) and isinstance(args[2], np.int32)
        assert grid[0] * block[0] >= n > (grid[0] - 1) * block[0]
        self.log.append(self.name)
        backend, dist, mode = self.name.split("_")
        bits = self.rb.reference_bits(seed, n, draws)
        if dist == "bits4":
            v = bits
        elif dist == "uniform4":
            v = (bits * 2.0**-32 + 2.0**-33).astype(np.float32)
        else:
            v = self.rb.box_muller_reference(bits).astype(np.float32)
        if mode == "store":
            assert out.shape == (draws, n, 4) and out.dtype == v.dtype
            out[...] = v
        else:
            assert out.shape == (n,) and out.dtype == v.dtype
            out[...] = v.sum(axis=(0, 2), dtype=v.dtype)


class _FakeModule:
    def __init__(self, rb, log, code=None, options=()):
        assert "-std=c++17" in options
        self.rb, self.code, self.log = rb, code, log

    def get_function(self, name):
        assert f"void {name}(" in self.code
        return _FakeKernel(self.rb, name, self.log)


def _fake_cupy(rb, launches):
    import types

    cp = types.ModuleType("cupy")
    cp.__version__ = "fake"
    cp.uint64, cp.uint32, cp.int32, cp.float32 = np.uint64, np.uint32, np.int32, np.float32
    cp.empty = lambda shape, dtype=np.float32: np.full(shape, 7, dtype=dtype)
    cp.asnumpy = np.asarray
    cp.RawModule = lambda code=None, options=(): _FakeModule(rb, launches, code, options)
    cp.get_default_memory_pool = lambda: types.SimpleNamespace(free_all_blocks=lambda: None)
    ticks = iter(range(10**6))

    class Event:
        def record(self, stream=None):
            self.t = next(ticks)

        def synchronize(self):
            pass

    class RandomState:
        def __init__(self, seed, method=None):
            assert method == 161

        def standard_normal(self, size, dtype=np.float32):
            return np.zeros(size, dtype)

    class Gen:
        def standard_normal(self, size=None, dtype=np.float64, out=None):
            return out

    cuda = types.SimpleNamespace(
        Event=Event, get_current_stream=lambda: None, get_elapsed_time=lambda a, b: 0.5 * (b.t - a.t),
        Device=lambda: types.SimpleNamespace(id=0, compute_capability="90"),
        runtime=types.SimpleNamespace(getDeviceProperties=lambda i: {"name": b"Fake H200"}),
        nvrtc=types.SimpleNamespace(getVersion=lambda: (13, 0)),
        curand=types.SimpleNamespace(CURAND_RNG_PSEUDO_PHILOX4_32_10=161))
    cp.cuda = cuda
    cp.random = types.SimpleNamespace(RandomState=RandomState, default_rng=lambda seed: Gen())
    return cp


def test_main_with_a_fake_gpu(rb, monkeypatch, tmp_path, capsys):
    launches = []
    monkeypatch.setitem(sys.modules, "cupy", _fake_cupy(rb, launches))
    monkeypatch.setattr(rb, "no_gpu_reason", lambda: None)
    out = tmp_path / "o"
    rc = rb.main(["--out", str(out), "--threads", "1000", "--draws", "3", "--block", "64", "--reps", "2",
                  "--check-threads", "300", "--check-draws", "2"])
    assert rc == 0
    data = json.loads((out / "random_backends.json").read_text())
    check = data["check"]
    assert check["ok"] and check["raw_identical"] and check["normal_bitwise_identical"], check
    assert check["curand_raw_equals_numpy_philox"] and check["numpy_threads_checked"] == 300
    assert data["meta"]["curanddx_sm"] == 900 and data["meta"]["device"] == "Fake H200"
    assert data["meta"]["nvrtc"] == "13.0"
    rows = data["rows"]
    ours = [r for r in rows if r["backend"] in rb.BACKENDS]
    assert len(ours) == 12 and all(r["ms"] == 0.5 for r in ours), [r.get("note") for r in ours]
    assert {(r["backend"], r["dist"], r["mode"]) for r in ours} == {
        (b, d, m) for b in rb.BACKENDS for d in rb.DISTS for m in rb.MODES}
    assert all(r["vs_curand"] == 1.0 for r in ours)
    cup = [r for r in rows if r["backend"] == "cupy"]
    assert len(cup) == 2 and all(r["ms"] == 0.5 and r["gb_per_s_written"] for r in cup), cup
    # the check ran every store kernel once, then each timed kernel ran 3 warm-ups + 2 reps
    assert sum(1 for n in launches if n.endswith("_store")) == 6 + 6 * 5
    assert set(data["verdict"]) == {f"{d}_{m}" for d in rb.DISTS for m in rb.MODES}
    assert "cross-check:" in capsys.readouterr().out


def test_main_with_a_failing_backend(rb, monkeypatch, tmp_path):
    """One module that does not build leaves its rows 'not run' with the reason; the rest runs."""
    launches = []
    cp = _fake_cupy(rb, launches)
    real = cp.RawModule

    def raw_module(code=None, options=()):
        if "curanddx" in code:
            raise RuntimeError("NVRTC_ERROR_COMPILATION: curanddx.hpp(1): error: broken")
        return real(code=code, options=options)

    cp.RawModule = raw_module
    monkeypatch.setitem(sys.modules, "cupy", cp)
    monkeypatch.setattr(rb, "no_gpu_reason", lambda: None)
    assert rb.main(["--out", str(tmp_path), "--threads", "64", "--draws", "2", "--reps", "1",
                    "--check-threads", "64", "--check-draws", "1"]) == 0
    data = json.loads((tmp_path / "random_backends.json").read_text())
    assert not data["check"]["ok"] and data["check"]["curand_raw_equals_numpy_philox"]
    assert data["meta"]["compile_s"]["curanddx"] is None
    dx = [r for r in data["rows"] if r["backend"] == "curanddx"]
    assert len(dx) == 6 and all(r["ms"] is None and "broken" in r["note"] for r in dx)
    assert all(r["ms"] is not None for r in data["rows"] if r["backend"] == "curand")
    assert data["verdict"] == {}
    assert "not run: module: RuntimeError" in (tmp_path / "random_backends.md").read_text()
