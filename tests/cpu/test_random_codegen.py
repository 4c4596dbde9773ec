# SPDX-License-Identifier: Apache-2.0
"""The cuRAND units: shim text over curand_kernel.h, compiled by NVRTC to LTO-IR, cached on disk."""

import re

import pytest

from nvmath_device import CompileError
from nvmath_device._build import cache, random_codegen, toolchain
from nvmath_device._random_states import FUNCTIONS, GENERATORS, INIT_PARAMS


def _wrappers(source: str) -> set[str]:
    return set(re.findall(r'extern "C" __device__ void (\w+)\(', source))


@pytest.mark.parametrize("generator", GENERATORS)
def test_unit_source_has_one_wrapper_per_function_of_its_generator(generator):
    src = random_codegen.render_unit_source(generator)
    want = {random_codegen.symbol(generator, "init")}
    want |= {random_codegen.symbol(generator, f.name) for f in FUNCTIONS.values() if generator in f.generators}
    assert _wrappers(src) == want
    assert src.startswith("#include <curand_kernel.h>")
    # the state pointer is cast to this generator's struct only
    structs = set(re.findall(r"static_cast<(curandState\w+)\*>", src))
    assert structs == {f"curandState{generator}_t"}


def test_wrappers_follow_the_c_overloads():
    src = random_codegen.render_unit_source("Sobol32")
    assert "curand_init(direction_vectors, offset, static_cast<curandStateSobol32_t*>(state))" in src
    assert "void nvmathdx_curand_Sobol32_skipahead(unsigned int n, void* state)" in src
    src = random_codegen.render_unit_source("Sobol64")
    assert "*static_cast<unsigned long long*>(out) = curand(" in src
    assert "void nvmathdx_curand_Sobol64_skipahead(unsigned long long n, void* state)" in src
    src = random_codegen.render_unit_source("Philox4_32_10")
    assert "*static_cast<uint4*>(out) = curand_poisson4(static_cast<curandStatePhilox4_32_10_t*>(state), lambda_)" in src
    assert "*static_cast<float4*>(out) = curand_normal4(" in src
    assert "double mean, double stddev, void* out" in src  # log_normal*_double
    src = random_codegen.render_unit_source("ScrambledSobol64")
    assert ("curand_init(direction_vectors, scramble_c, offset, static_cast<curandStateScrambledSobol64_t*>(state))"
            in src)
    assert INIT_PARAMS["MRG32k3a"] == (("seed", "u64"), ("subsequence", "u64"), ("offset", "u64"))


@pytest.mark.parametrize("bad", ["Mtgp32", "xorwow", None, 3])
def test_unknown_generator_is_a_value_error(bad):
    with pytest.raises(ValueError, match="generator must be one of"):
        random_codegen.render_unit_source(bad)
    with pytest.raises(ValueError, match="generator must be one of"):
        random_codegen.RandomUnit(bad)


@pytest.fixture
def cdir(tmp_path, monkeypatch):
    d = tmp_path / "cache"
    monkeypatch.setenv(cache.ENV_DIR, str(d))
    monkeypatch.setattr(cache, "_memory", {})
    return d


def test_unit_compiles_with_nvrtc_and_is_cached(cdir):
    n = toolchain.stats["nvrtc_compiles"]
    blob = random_codegen.unit_ltoir("MRG32k3a")
    assert toolchain.stats["nvrtc_compiles"] == n + 1
    assert isinstance(blob, bytes) and len(blob) > 1000
    assert random_codegen.unit_ltoir("MRG32k3a") == blob  # in-process hit
    cache._memory.clear()  # as a new process: the disk entry
    assert random_codegen.unit_ltoir("MRG32k3a") == blob
    assert toolchain.stats["nvrtc_compiles"] == n + 1
    assert len(cache.entries()) == 1
    unit = random_codegen.RandomUnit("MRG32k3a")
    assert unit.ltoir() == blob and unit.symbol == "nvmathdx_curand_MRG32k3a"


def test_key_names_the_generator_the_toolchain_and_curand(monkeypatch):
    keys = {random_codegen.unit_key(g) for g in GENERATORS}
    assert len(keys) == len(GENERATORS)
    assert re.fullmatch(r"curand\d+\.\d+\.\d+\.\d+", random_codegen.curand_version())
    k = random_codegen.unit_key("XORWOW")
    monkeypatch.setattr(random_codegen, "curand_version", lambda: "curand99.0.0.0")
    assert random_codegen.unit_key("XORWOW") != k


@pytest.mark.parametrize("generator", GENERATORS)
def test_every_unit_compiles(generator):
    # the shared test cache: compiled once per toolchain (~5 s each), then read back
    blob = random_codegen.unit_ltoir(generator)
    assert len(blob) > 1000


def test_a_broken_unit_reports_the_nvrtc_log(cdir, monkeypatch):
    monkeypatch.setattr(random_codegen, "render_unit_source",
                        lambda g: '#include <curand_kernel.h>\nextern "C" __device__ void f() { curand_nope(); }\n')
    with pytest.raises(CompileError, match="curand_nope"):
        random_codegen.unit_ltoir("XORWOW")
