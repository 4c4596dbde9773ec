# SPDX-License-Identifier: Apache-2.0
"""nvmath_device.random in kernels without a GPU: every function types and links (nvJitLink) into
an sm_90 cubin; each bad argument is a numba TypingError naming it and what is allowed, raised
before any compiler runs; outside kernels (no simulator) a clear error."""

import pytest
from numba import cuda
from numba.core import types
from numba.core.errors import TypingError
from numba.cuda.typing.typeof import typeof  # what @cuda.jit types kernel arguments with

from nvmath_device import aot, random
from nvmath_device._build import toolchain
from nvmath_device._numba.random_numba import STATE_TYPES, CurandState
from nvmath_device._numba.vector import NUMBA_TYPES
from nvmath_device._random_states import FUNCTIONS, GENERATORS, INIT_PARAMS, STATE_DTYPES


def states_type(generator):
    return types.Array(STATE_TYPES[generator], 1, "C")


def _bare_states(cls):
    """A States object without device memory (this machine has no GPU): enough for typeof."""
    return object.__new__(cls)


# ------------------------------------------------------------------------------ the States types
@pytest.mark.parametrize("generator", GENERATORS)
def test_states_object_types_as_an_array_of_its_generator_state(generator):
    ty = typeof(_bare_states(random.STATES_CLASSES[generator]))
    assert ty == states_type(generator)
    assert isinstance(ty.dtype, CurandState) and ty.dtype.generator == generator
    assert ty.dtype.size == STATE_DTYPES[generator].itemsize
    assert ty.dtype.name == f"curandState{generator}"


def test_sobol_and_scrambled_sobol_states_are_different_types():
    assert STATE_TYPES["Sobol32"] != STATE_TYPES["ScrambledSobol32"]
    assert STATE_TYPES["Sobol64"] != STATE_TYPES["ScrambledSobol64"]
    assert STATE_TYPES["Sobol32"].fields == STATE_TYPES["ScrambledSobol32"].fields


# ------------------------------------------------------------------------------ every function links
def pseudo_kernel(states, out_u, out_f, out_d, out_f2, out_d2, seed):
    i = cuda.grid(1)
    random.init(seed, i, 0, states[i])
    s = states[i]
    out_u[i] = random.rand(s) + random.poisson(s, 3.5)
    out_f[i] = random.uniform(s) + random.normal(s) + random.log_normal(s, 0.5, 2.0)
    out_d[i] = random.uniform_double(s) + random.normal_double(s) + random.log_normal_double(s, 0.5, 2.0)
    out_f2[i] = random.normal2(s)
    out_f2[i] = random.log_normal2(s, 0.0, 1.0)
    out_d2[i] = random.normal2_double(s)
    out_d2[i] = random.log_normal2_double(s, 0.0, 1.0)
    random.skipahead(10, s)
    random.skipahead_sequence(2, s)


def mrg_kernel(states, n):
    i = cuda.grid(1)
    random.skipahead_subsequence(n, states[i])


def philox_kernel(states, out_u4, out_f4, out_d2):
    i = cuda.grid(1)
    s = states[i]
    out_u4[i] = random.rand4(s)
    out_u4[i] = random.poisson4(s, 100.0)
    out_f4[i] = random.uniform4(s)
    out_f4[i] = random.normal4(s)
    out_f4[i] = random.log_normal4(s, 1.0, 0.5)
    out_d2[i] = random.uniform2_double(s)


def sobol_kernel(dirs, states, out_r, out_u, out_f, out_d):
    i = cuda.grid(1)
    random.init(dirs[i], 7, states[i])
    s = states[i]
    out_r[i] = random.rand(s)
    out_u[i] = random.poisson(s, 3.5)
    out_f[i] = random.uniform(s) + random.normal(s) + random.log_normal(s, 0.5, 2.0)
    out_d[i] = random.uniform_double(s) + random.normal_double(s) + random.log_normal_double(s, 0.5, 2.0)
    random.skipahead(10, s)


def scrambled_kernel(dirs, consts, states, out_r, out_u, out_f, out_d):
    i = cuda.grid(1)
    random.init(dirs[i], consts[i], 7, states[i])
    s = states[i]
    out_r[i] = random.rand(s)
    out_u[i] = random.poisson(s, 3.5)
    out_f[i] = random.uniform(s) + random.normal(s) + random.log_normal(s, 0.5, 2.0)
    out_d[i] = random.uniform_double(s) + random.normal_double(s) + random.log_normal_double(s, 0.5, 2.0)
    random.skipahead(10, s)


def _arr(t, ndim=1):
    return types.Array(t, ndim, "C")


F2, D2, U4, F4 = (NUMBA_TYPES[n] for n in ("float32x2", "float64x2", "uint32x4", "float32x4"))


def _linked(kernel, argtypes, generator):
    k = aot.compile_kernel(kernel, argtypes, 90)
    assert k.sm == 90 and k.cubin[:4] == b"\x7fELF"
    assert f"nvmathdx_curand_{generator}.ltoir" in k.linked
    return k


@pytest.mark.parametrize("generator", ["XORWOW", "Philox4_32_10", "MRG32k3a"])
def test_pseudo_random_functions_link_to_an_sm90_cubin(generator):
    _linked(pseudo_kernel, (states_type(generator), _arr(types.uint32), _arr(types.float32), _arr(types.float64),
                            _arr(F2), _arr(D2), types.uint64), generator)


def test_mrg_skipahead_subsequence_links():
    _linked(mrg_kernel, (states_type("MRG32k3a"), types.int64), "MRG32k3a")


def test_philox_vector_functions_link():
    _linked(philox_kernel, (states_type("Philox4_32_10"), _arr(U4), _arr(F4), _arr(D2)), "Philox4_32_10")


@pytest.mark.parametrize("generator", ["Sobol32", "Sobol64"])
def test_sobol_functions_link(generator):
    word = types.uint32 if generator == "Sobol32" else types.uint64
    _linked(sobol_kernel, (_arr(word, 2), states_type(generator), _arr(word), _arr(types.uint32),
                           _arr(types.float32), _arr(types.float64)), generator)


@pytest.mark.parametrize("generator", ["ScrambledSobol32", "ScrambledSobol64"])
def test_scrambled_sobol_functions_link(generator):
    word = types.uint32 if generator.endswith("32") else types.uint64
    _linked(scrambled_kernel, (_arr(word, 2), _arr(word), states_type(generator), _arr(word),
                               _arr(types.uint32), _arr(types.float32), _arr(types.float64)), generator)


def two_generators(a, b, out):
    i = cuda.grid(1)
    out[i] = random.uniform(a[i]) + random.uniform(b[i])


def test_two_generators_in_one_kernel_link_both_units():
    k = aot.compile_kernel(two_generators, (states_type("XORWOW"), states_type("MRG32k3a"), _arr(types.float32)), 90)
    assert {"nvmathdx_curand_XORWOW.ltoir", "nvmathdx_curand_MRG32k3a.ltoir"} <= set(k.linked)


# ------------------------------------------------------------------------------ result types
def _result_of(fname, generator, *extra):
    """The numba type random.<fname>(state, *extra) returns for ``generator`` (typing only)."""
    f = getattr(random, fname)
    n = len(extra)

    if n == 0:
        def dev(states):
            return f(states[0])
    elif n == 1:
        def dev(states):
            return f(states[0], 1.5)
    else:
        def dev(states):
            return f(states[0], 1.5, 0.5)
    _, resty = cuda.compile(dev, (states_type(generator),), device=True, output="ptx", cc=(9, 0))
    return resty


EXPECTED = {
    "rand": types.uint32, "rand4": U4, "uniform": types.float32, "uniform_double": types.float64,
    "uniform2_double": D2, "uniform4": F4, "normal": types.float32, "normal_double": types.float64,
    "normal2": F2, "normal2_double": D2, "normal4": F4, "log_normal": types.float32,
    "log_normal_double": types.float64, "log_normal2": F2, "log_normal2_double": D2, "log_normal4": F4,
    "poisson": types.uint32, "poisson4": U4,
}


@pytest.mark.parametrize("fname", sorted(EXPECTED))
def test_result_types(fname):
    extra = tuple(n for n, _ in FUNCTIONS[fname].params)
    assert _result_of(fname, "Philox4_32_10", *extra) == EXPECTED[fname]


def test_sobol64_rand_is_uint64():
    assert _result_of("rand", "Sobol64") == types.uint64
    assert _result_of("rand", "ScrambledSobol64") == types.uint64
    assert _result_of("rand", "ScrambledSobol32") == types.uint32


# ------------------------------------------------------------------------------ typing errors
def _typing_error(kernel, argtypes, match):
    n = toolchain.stats["nvrtc_compiles"]
    with pytest.raises(TypingError, match=match):
        aot.compile_kernel(kernel, argtypes, 90)
    assert toolchain.stats["nvrtc_compiles"] == n  # raised before any compiler ran


def k_normal4(states, out):
    out[0] = random.normal4(states[0])


def k_init_float_seed(states):
    random.init(1.5, 0, 0, states[0])


def k_init_pseudo(states):
    random.init(1234, 0, 0, states[0])


def k_init_sobol_without_vectors(states):
    random.init(0, states[0])


def k_init_sobol(dirs, states):
    random.init(dirs[0], 0, states[0])


def k_rand_not_a_state(x, out):
    out[0] = random.rand(x[0])


def k_rand_array(states, out):
    out[0] = random.rand(states)


def k_log_normal_bad_mean(states, out):
    out[0] = random.log_normal(states[0], True, 1.0)


def k_poisson_no_lambda(states, out):
    out[0] = random.poisson(states[0])


def k_skip_float(states):
    random.skipahead(2.5, states[0])


def k_skip_subsequence(states):
    random.skipahead_subsequence(2, states[0])


def k_keyword(states, out):
    out[0] = random.log_normal(states[0], mean=0.0, stddev=1.0)


F32 = _arr(types.float32)


@pytest.mark.parametrize("kernel, argtypes, match", [
    # a state of the wrong generator
    (k_normal4, (states_type("XORWOW"), _arr(F4)),
     r"random.normal4: state \(1st argument\) is a XORWOW state; normal4 takes a state of StatesPhilox4_32_10"),
    (k_skip_subsequence, (states_type("Philox4_32_10"),),
     r"skipahead_subsequence: state \(2nd argument\) is a Philox4_32_10 state; .* StatesMRG32k3a"),
    # a float where a seed is expected
    (k_init_float_seed, (states_type("XORWOW"),), r"random.init: seed \(1st argument\) must be an integer \(uint64\), got float64"),
    (k_skip_float, (states_type("MRG32k3a"),), r"random.skipahead: n \(1st argument\) must be an integer \(uint64\)"),
    (k_skip_float, (states_type("Sobol32"),), r"random.skipahead: n \(1st argument\) must be an integer \(uint32\)"),
    # Sobol init without direction vectors
    (k_init_sobol_without_vectors, (states_type("Sobol32"),),
     r"random.init of a Sobol32 state takes \(direction_vectors, offset, state\), got 2"),
    (k_init_pseudo, (states_type("Sobol64"),),
     r"random.init of a Sobol64 state takes \(direction_vectors, offset, state\), got 4"),
    (k_init_sobol, (_arr(types.int64), states_type("Sobol64")),
     r"direction_vectors \(1st argument\) of a Sobol64 state must be this dimension's 64 direction vectors, an "
     r"array of uint64 .*got int64"),
    (k_init_sobol, (_arr(types.uint64, 2), states_type("Sobol32")),
     r"of a Sobol32 state must be this dimension's 32 direction vectors, an array of uint32"),
    (k_init_pseudo, (states_type("ScrambledSobol32"),),
     r"random.init: direction_vectors \(1st argument\) of a ScrambledSobol32 state must be"),
    # not a state
    (k_rand_not_a_state, (F32, _arr(types.uint32)),
     r"random.rand: state \(1st argument\) must be one state of a random.States\* array \(states\[i\] in the kernel\) "
     r"of StatesXORWOW, .*got float32"),
    (k_rand_array, (states_type("XORWOW"), _arr(types.uint32)), r"random.rand: state \(1st argument\) must be one state"),
    (k_normal4, (F32, _arr(F4)), r"random.normal4: state .* of StatesPhilox4_32_10, got float32"),
    # extra arguments
    (k_log_normal_bad_mean, (states_type("XORWOW"), F32), r"random.log_normal: mean \(2nd argument\) must be a real number \(float32\), got bool"),
    (k_poisson_no_lambda, (states_type("XORWOW"), _arr(types.uint32)), r"random.poisson takes \(state, lambda_\), got 1 argument"),
    (k_keyword, (states_type("XORWOW"), F32), r"random.log_normal takes positional arguments only"),
])
def test_bad_arguments_are_typing_errors_naming_them(kernel, argtypes, match):
    _typing_error(kernel, argtypes, match)


# ------------------------------------------------------------------------------ outside kernels
@pytest.mark.parametrize("fname, args", [("init", (1234, 0, 0, None)), ("rand", (None,)), ("normal4", (None,)),
                                         ("poisson", (None, 2.0)), ("skipahead", (5, None))])
def test_outside_kernels_without_the_simulator_is_a_clear_error(fname, args):
    with pytest.raises(RuntimeError, match=rf"nvmath_device.random.{fname} runs only inside @cuda.jit kernels "
                                           r"\(or under the CUDA simulator"):
        getattr(random, fname)(*args)


def test_states_arguments_are_checked_before_allocating():
    for bad, err in ((0, ValueError), (-3, ValueError), (2.0, TypeError), (True, TypeError), ("8", TypeError)):
        with pytest.raises(err, match="n must be a positive integer"):
            random.StatesXORWOW(bad)


def test_compile_is_a_no_op_for_nvmath_python_code():
    c = random.Compile(cc=None)
    assert c.files == [] and c.extension == []
    assert random.Compile(cc=(9, 0)).files == []


# ------------------------------------------------------------------------------ the GPU suite's kernels
def _gpu_suite_argtypes(kind, name, generator):
    st = states_type(generator)
    word = types.uint32 if generator in ("Sobol32", "ScrambledSobol32") else types.uint64
    if kind == "init":
        params = INIT_PARAMS[generator]
        if params[0][0] == "seed":
            return (st, types.int64, types.int64)
        if len(params) == 2:
            return (_arr(word, 2), st, types.int64)
        return (_arr(word, 2), _arr(word), st, types.int64)
    if kind == "skip":
        return (st, _arr(word))
    result = FUNCTIONS[name].result[generator]
    scalar = getattr(types, result.split("x")[0])
    return (st, _arr(scalar, 2 if "x" not in result else 3), types.float64, types.float64)


@pytest.mark.parametrize("generator", GENERATORS)
def test_the_gpu_suites_kernels_link(generator):
    """tests/gpu/test_random_gpu.py cannot run here; its kernels (with the argument types it
    launches them with) must at least type and link for sm_90."""
    from tests.gpu import test_random_gpu as g

    jobs = [("init", generator)]
    jobs += [("draw", f) for f, fn in FUNCTIONS.items() if generator in fn.generators and fn.state_first]
    jobs += [("skip", f) for f, fn in FUNCTIONS.items() if generator in fn.generators and not fn.state_first]
    for kind, name in jobs:
        k = g.kernel(kind, name)
        linked = aot.compile_kernel(k, _gpu_suite_argtypes(kind, name, generator), 90).linked
        assert f"nvmathdx_curand_{generator}.ltoir" in linked, (kind, name)


def test_states_of_one_generator_never_convert_to_another():
    # numba's records convert to records with the same leading members (width subtyping)
    s32, x32 = STATE_TYPES["Sobol32"], STATE_TYPES["ScrambledSobol32"]
    assert x32.can_convert_to(None, s32) is None and s32.can_convert_to(None, x32) is None
    assert STATE_TYPES["Sobol64"].can_convert_to(None, STATE_TYPES["ScrambledSobol64"]) is None
    plain = types.Record([(n, {"type": f.type, "offset": f.offset}) for n, f in s32.fields.items()], s32.size, True)
    assert s32.can_convert_to(None, plain) is None


def test_the_linked_unit_pickles_as_its_generator():
    # @cuda.jit(cache=True) kernels pickle their linking files: the unit goes as its generator
    import pickle

    from nvmath_device._build.random_codegen import RandomUnit
    from nvmath_device._numba.common import linkable_ltoir

    obj = linkable_ltoir(RandomUnit("MRG32k3a"))
    blob = pickle.dumps(obj)
    assert len(blob) < 500  # no LTO-IR inside
    assert pickle.loads(blob) is obj and obj.descriptor == RandomUnit("MRG32k3a")


def k_init_from_pointer(ptr, states):
    random.init(ptr, 5, 7, states[0])


def test_sobol_init_takes_a_pointer_to_the_direction_vectors():
    # nvmath-python's examples pass ffi.from_buffer(vectors[d:]) (a pointer to uint64)
    _linked(k_init_from_pointer, (types.CPointer(types.uint64), states_type("ScrambledSobol64")), "ScrambledSobol64")
    _typing_error(k_init_from_pointer, (types.CPointer(types.uint32), states_type("ScrambledSobol64")),
                  r"or a pointer to uint64, got uint32\*")


# ------------------------------------------------------------------------------ the C ABI
_PTX_KINDS = {types.uint32: {"u32", "b32", "s32"}, types.uint64: {"u64", "b64", "s64"},
              types.float32: {"f32"}, types.float64: {"f64"}, "ptr": {"u64", "b64"}}
_ARG_FOR = {"u32": types.uint32, "u64": types.uint64, "f32": types.float32, "f64": types.float64,
            "dv32": _arr(types.uint32), "dv64": _arr(types.uint64)}


def _lowered_params(generator, fname):
    """What the lowering passes (random_numba's typing of the call, then its C arguments):
    a PTX kind set per parameter, the result pointer last."""
    from nvmath_device._numba import random_numba as rn

    st = STATE_TYPES[generator]
    if fname == "init":
        args = tuple(_ARG_FOR[k] for _, k in INIT_PARAMS[generator]) + (st,)
        _, sig = rn._type_init(args)
    else:
        f = FUNCTIONS[fname]
        extra = tuple(_ARG_FOR[k] for _, k in f.params)
        _, sig = rn._type_function(fname, (st, *extra) if f.state_first else (*extra, st))
    kinds = [_PTX_KINDS["ptr"] if isinstance(t, (CurandState, types.Array, types.CPointer)) else _PTX_KINDS[t]
             for t in sig.args]
    if sig.return_type != types.none:
        kinds.append(_PTX_KINDS["ptr"])
    return kinds


@pytest.mark.parametrize("generator", GENERATORS)
def test_the_lowered_calls_match_the_compiled_wrappers(generator):
    """LTO links a call whatever its declared types; so the parameters our lowering declares are
    checked against how NVRTC's code of each wrapper reads them (``ld.param.<type>`` in its PTX)."""
    import re

    from nvmath_device._build import random_codegen as rc

    ptx = toolchain.compile_source(rc.render_unit_source(generator), rc.UNIT_SM, "ptx",
                                   extra_include_dirs=rc._extra_include_dirs()).decode()
    names = ["init"] + [f for f, fn in FUNCTIONS.items() if generator in fn.generators]
    for fname in names:
        sym = rc.symbol(generator, fname)
        decl = re.search(rf"\.visible \.func\s+{sym}\(([^)]*)\)", ptx)
        assert decl, sym
        count = len(re.findall(r"\.param \.\w+", decl.group(1)))
        want = _lowered_params(generator, fname)
        assert count == len(want), (sym, count, len(want))
        for kind, index in set(re.findall(rf"ld\.param\.(\w+)\s+%\w+, \[{sym}_param_(\d+)\]", ptx)):
            assert kind in want[int(index)], (sym, index, kind, want[int(index)])
