# SPDX-License-Identifier: Apache-2.0
"""Typing and lowering of ``nvmath_device.random`` in kernels: the ``States*`` arrays as kernel
arguments, ``states[i]`` as one generator state, and every function as a call of cuRAND's device
code (the generator's unit of ``_build/random_codegen.py``, attached to the kernel as LTO-IR).

A ``States*`` object is typed as a 1-D C-contiguous array whose dtype is :class:`CurandState`:
a numba Record of the state's C layout, named after its generator, so that Sobol32 and
ScrambledSobol32 (same members, different ``curand_init``) are different types. numba passes it
to the kernel through its ``__cuda_array_interface__``; ``states[i]`` is a record, which numba
represents as a pointer into the array, so the C functions update the state in place.
"""

from __future__ import annotations

from llvmlite import ir
from numba import cuda
from numba.core import types
from numba.core.errors import TypingError
from numba.cuda.extending import core_models, lower_builtin, register_model, typeof_impl

from .. import _dispatch, random
from .._build.random_codegen import RandomUnit, symbol
from .._random_states import FUNCTIONS, GENERATORS, INIT_PARAMS, STATE_DTYPES, skipahead_type
from ._compat import AbstractTemplate, cgutils, register_global_template, signature
from .common import linkable_ltoir, numba_dtype
from .vector import NUMBA_TYPES


class CurandState(types.Record):
    """The numba type of one cuRAND generator state (a record of ``STATE_DTYPES[generator]``)."""

    def __init__(self, generator: str):
        self.generator = generator
        base = numba_dtype(STATE_DTYPES[generator])
        fields = [(name, {"type": f.type, "offset": f.offset, "alignment": f.alignment, "title": f.title})
                  for name, f in base.fields.items()]
        super().__init__(fields, base.size, base.aligned)
        self.name = f"curandState{generator}"

    @property
    def key(self):
        """The generator: one type per generator."""
        return ("curandState", self.generator)

    def can_convert_to(self, typingctx, other):
        """No conversion between generators: numba would treat a ScrambledSobol32 state as a
        Sobol32 one (same members) and reuse a device function compiled for the other."""
        if isinstance(other, types.Record) and other != self:
            return None
        return super().can_convert_to(typingctx, other)


register_model(CurandState)(core_models.RecordModel)

STATE_TYPES = {g: CurandState(g) for g in GENERATORS}


def _states_array_type(generator):
    return types.Array(STATE_TYPES[generator], 1, "C")


for _gen, _cls in random.STATES_CLASSES.items():
    typeof_impl.register(_cls)(lambda val, c, _g=_gen: _states_array_type(_g))

# States*(n) allocates through the numba layer (random.py imports no numba)
_dispatch.register({"random.device_array": lambda n, dtype: cuda.device_array(n, dtype)},
                   links_device_code=True)


# ------------------------------------------------------------------------------ typing
_STATE_HINT = "one state of a random.States* array (states[i] in the kernel)"
_INT_TYPES = {"u32": types.uint32, "u64": types.uint64}
_FLOAT_TYPES = {"f32": types.float32, "f64": types.float64}
_RESULTS = {"uint32": types.uint32, "uint64": types.uint64, "float32": types.float32, "float64": types.float64}


def _result_type(name):
    return _RESULTS.get(name) or NUMBA_TYPES[name]


def _generators_text(generators) -> str:
    return ", ".join(f"States{g}" for g in generators)


def _state_generator(fname: str, what: str, ty, generators) -> str:
    """The generator of state argument ``ty``, or a TypingError naming it and the allowed states."""
    if isinstance(ty, CurandState):
        if ty.generator in generators:
            return ty.generator
        raise TypingError(f"random.{fname}: {what} is a {ty.generator} state; {fname} takes a state of "
                          f"{_generators_text(generators)}")
    raise TypingError(f"random.{fname}: {what} must be {_STATE_HINT} of {_generators_text(generators)}, got {ty}")


def _check_scalar(fname: str, what: str, ty, kind: str):
    """TypingError unless ``ty`` fits the C parameter kind (u32/u64: an integer; f32/f64: a real number)."""
    if kind in _INT_TYPES:
        if isinstance(ty, types.Integer) and not isinstance(ty, types.Boolean):
            return _INT_TYPES[kind]
        raise TypingError(f"random.{fname}: {what} must be an integer ({_INT_TYPES[kind]}), got {ty}")
    if isinstance(ty, (types.Integer, types.Float)) and not isinstance(ty, types.Boolean):
        return _FLOAT_TYPES[kind]
    raise TypingError(f"random.{fname}: {what} must be a real number ({_FLOAT_TYPES[kind]}), got {ty}")


def _check_direction_vectors(generator, ty):
    want = types.uint32 if generator.endswith("32") else types.uint64
    width = 32 if want == types.uint32 else 64
    ok = (isinstance(ty, types.Array) and ty.dtype == want and ty.layout in ("C", "A") and ty.ndim >= 1) \
        or (isinstance(ty, types.CPointer) and ty.dtype == want)
    if not ok:
        raise TypingError(
            f"random.init: direction_vectors (1st argument) of a {generator} state must be this "
            f"dimension's {width} direction vectors, an array of {want} (e.g. vectors[d] of "
            f"random.get_direction_vectors{width}(...) copied to the device) or a pointer to {want}, got {ty}")
    return ty


_ORD = ("1st", "2nd", "3rd", "4th", "5th")


def _type_init(args):
    if not args:
        raise TypingError(f"random.init takes (..., state): the last argument must be {_STATE_HINT}")
    state = args[-1]
    generator = _state_generator("init", f"state ({_ORD[len(args) - 1] if len(args) <= 5 else 'last'} argument)",
                                 state, GENERATORS)
    params = INIT_PARAMS[generator]
    if len(args) != len(params) + 1:
        forms = ", ".join(n for n, _ in params)
        raise TypingError(f"random.init of a {generator} state takes ({forms}, state), got {len(args)} argument(s)")
    out = []
    for i, ((name, kind), ty) in enumerate(zip(params, args)):
        what = f"{name} ({_ORD[i]} argument)"
        out.append(_check_direction_vectors(generator, ty) if kind.startswith("dv")
                   else _check_scalar("init", what, ty, kind))
    return generator, types.none(*out, state)


def _type_function(fname, args):
    f = FUNCTIONS[fname]
    n = len(f.params) + 1
    names = [p for p, _ in f.params]
    form = ", ".join(["state", *names]) if f.state_first else ", ".join([*names, "state"])
    if len(args) != n:
        raise TypingError(f"random.{fname} takes ({form}), got {len(args)} argument(s)")
    si = 0 if f.state_first else n - 1
    generator = _state_generator(fname, f"state ({_ORD[si]} argument)", args[si], f.generators)
    out = []
    for i, ty in enumerate(args):
        if i == si:
            out.append(ty)
            continue
        name, kind = f.params[i - 1 if f.state_first else i]
        if fname == "skipahead":
            kind = skipahead_type(generator)
        out.append(_check_scalar(fname, f"{name} ({_ORD[i]} argument)", ty, kind))
    ret = types.none if f.result[generator] is None else _result_type(f.result[generator])
    return generator, ret(*out)


def _register_typing(fname, pyfunc):
    class _Template(AbstractTemplate):
        key = pyfunc

        def generic(self, args, kws):
            if kws:
                raise TypingError(f"random.{fname} takes positional arguments only, got keywords {sorted(kws)}")
            _, sig = _type_init(args) if fname == "init" else _type_function(fname, args)
            return signature(sig.return_type, *args)

    _Template.__name__ = f"random_{fname}_Template"
    register_global_template(pyfunc, _Template)


# ------------------------------------------------------------------------------ lowering
_LLVM_SCALARS = {types.uint32: ir.IntType(32), types.uint64: ir.IntType(64),
                 types.float32: ir.FloatType(), types.float64: ir.DoubleType()}
_I8P = ir.IntType(8).as_pointer()


def _declare(builder, name, argtys):
    fn = builder.module.globals.get(name)
    if fn is None:
        fn = ir.Function(builder.module, ir.FunctionType(ir.VoidType(), argtys), name)
    return fn


def _pointer_of(context, builder, ty, val):
    """An ``i8*`` to a state (record), a direction-vector array's data, or a pointer value."""
    if isinstance(ty, types.Array):
        return builder.bitcast(context.make_array(ty)(context, builder, val).data, _I8P)
    return builder.bitcast(val, _I8P)


def _lower_args(context, builder, sig, args):
    """The C arguments: scalars cast to their C type (by value), states and arrays as ``i8*``."""
    values, lltys = [], []
    for ty, val in zip(sig.args, args):
        if isinstance(ty, (CurandState, types.Array, types.CPointer)):
            values.append(_pointer_of(context, builder, ty, val))
            lltys.append(_I8P)
        else:
            values.append(val)
            lltys.append(_LLVM_SCALARS[ty])
    return values, lltys


def _attach(context, generator):
    context.active_code_library.add_linking_file(linkable_ltoir(RandomUnit(generator)))


def _cast_args(context, builder, sig, args, target):
    return [context.cast(builder, v, f, t) for v, f, t in zip(args, sig.args, target.args)]


def _register_lowering(fname, pyfunc):
    @lower_builtin(pyfunc, types.VarArg(types.Any))
    def _lower(context, builder, sig, args):
        if fname == "init":
            generator, target = _type_init(sig.args)
        else:
            generator, target = _type_function(fname, sig.args)
        args = _cast_args(context, builder, sig, args, target)
        _attach(context, generator)
        values, lltys = _lower_args(context, builder, target, args)
        name = symbol(generator, fname)
        if target.return_type == types.none:
            builder.call(_declare(builder, name, lltys), values)
            return context.get_dummy_value()
        out = cgutils.alloca_once(builder, context.get_value_type(target.return_type))  # cuRAND writes here
        builder.call(_declare(builder, name, [*lltys, _I8P]), [*values, builder.bitcast(out, _I8P)])
        return builder.load(out)


for _fname in ("init", *FUNCTIONS):
    _register_typing(_fname, getattr(random, _fname))
    _register_lowering(_fname, getattr(random, _fname))
