# SPDX-License-Identifier: Apache-2.0
"""FFT and Matmul are immutable: nothing a descriptor holds can be changed after construction,
and equality / hash cover exactly what determines the generated code (its ``_key``)."""

from __future__ import annotations

import copy
import functools
import pickle

import numpy as np
import pytest

import nvmath_device.fft as fft_module
import nvmath_device.gemm as gemm_module
from nvmath_device import FFT, Matmul
from nvmath_device._build import toolchain
from nvmath_device._descriptor import FrozenDict, freeze


@pytest.fixture(autouse=True)
def _no_nvrtc():
    before = toolchain.stats["nvrtc_compiles"]
    yield
    assert toolchain.stats["nvrtc_compiles"] == before, "descriptors must not run NVRTC here"


def _r2c(**kw):
    return FFT(size=64, precision=np.float32, fft_type="r2c", elements_per_thread=8, ffts_per_block=2,
               sm=90, **kw)


def _mm(**kw):
    return Matmul(size=(16, 24, 8), precision=np.float32, block_dim=64, sm=90, **kw)


def _mutable_containers(obj, path="", seen=None):
    """Paths to every mutable container reachable from the attributes of ``obj``."""
    seen = set() if seen is None else seen
    if id(obj) in seen:
        return []
    seen.add(id(obj))
    found = []
    if isinstance(obj, (FFT, Matmul)):
        items = vars(obj).items()
    elif isinstance(obj, dict):
        if not isinstance(obj, FrozenDict):
            found.append(path)
        items = ((f"[{k!r}]", v) for k, v in obj.items())
    elif isinstance(obj, (list, set, bytearray)):
        return [path]
    elif isinstance(obj, np.ndarray):
        return [path] if obj.flags.writeable else []
    elif isinstance(obj, (tuple, frozenset)):
        items = ((f"[{i}]", v) for i, v in enumerate(obj))
    else:
        return []
    for name, value in items:
        found += _mutable_containers(value, f"{path}.{name}" if not name.startswith("[") else path + name,
                                     seen)
    return found


def test_the_real_fft_options_mutation_is_refused():
    """The reported bug: mutating real_fft_options changed input_type but not ==/hash."""
    f, g = _r2c(), _r2c()
    assert f.input_type == np.dtype(np.float32)
    with pytest.raises(TypeError, match="read-only"):
        f.real_fft_options["real_mode"] = "folded"
    for mutate in (lambda d: d.update(real_mode="folded"), lambda d: d.pop("real_mode"), lambda d: d.clear(),
                   lambda d: d.setdefault("x", 1), lambda d: d.popitem(), lambda d: d.__delitem__("real_mode"),
                   lambda d: d.__ior__({"real_mode": "folded"})):
        with pytest.raises(TypeError, match="read-only"):
            mutate(f.real_fft_options)
    assert f.real_fft_options == {"complex_layout": "natural", "real_mode": "normal"}
    assert f.input_type == np.dtype(np.float32) and f == g and hash(f) == hash(g)


@pytest.mark.parametrize("make", [_r2c, _mm], ids=["FFT", "Matmul"])
def test_attributes_cannot_be_set_or_deleted(make):
    d = make()
    for name in [*vars(d), "size", "precision", "sm", "execution", "anything_new"]:
        with pytest.raises(AttributeError, match=f"immutable: cannot set attribute '{name}'"):
            setattr(d, name, 1)
        with pytest.raises(AttributeError, match=f"immutable: cannot delete attribute '{name}'"):
            delattr(d, name)
    assert d == make() and hash(d) == hash(make())


@pytest.mark.parametrize("make", [_r2c, _mm], ids=["FFT", "Matmul"])
def test_no_attribute_is_a_mutable_container(make, monkeypatch):
    # the traits read from compiled code are kept on the instance too: frozen as well
    monkeypatch.setattr(fft_module, "_fft_traits", lambda f: {"storage_size": 4, "list": [1, 2]})
    monkeypatch.setattr(gemm_module, "_gemm_traits", lambda m: {"accumulator_size": 4, "list": [1, 2]})
    d = make()
    d._traits  # noqa: B018 - memoises the (fake) traits
    assert "_traits_memo" in vars(d)
    assert _mutable_containers(d) == []
    with pytest.raises(TypeError, match="read-only"):
        d._traits["storage_size"] = 1


def test_matmul_sequences_are_tuples():
    mm = Matmul(size=[16, 24, 8], precision=[np.float32] * 3, arrangement=["row_major", "col_major", "col_major"],
                leading_dimension=[8, 8, 16], block_dim=[64], alignment=[16, 16, 16], sm=90)
    for name in ("size", "precision", "arrangement", "leading_dimension", "alignment", "block_dim"):
        assert isinstance(getattr(mm, name), tuple), name  # plain or named (Dim3, Arrangement...)
    with pytest.raises(TypeError, match="read-only"):
        mm._layout["smem"] = 0


def test_equal_spellings_are_equal_and_hash_equal():
    spellings = [
        _r2c(),
        FFT(size=np.int64(64), precision="float32", fft_type="r2c", direction="forward",
            elements_per_thread=np.int32(8), ffts_per_block=2, sm="sm_90",
            real_fft_options={"complex_layout": "natural"}),
        FFT(size=64, precision=np.dtype(np.float32), fft_type="r2c", elements_per_thread=8,
            ffts_per_block=2, sm=(9, 0), real_fft_options=FrozenDict(real_mode="normal")),
        FFT(size=64, fft_type="r2c", elements_per_thread=8, ffts_per_block=2, sm=90,
            real_fft_options=_r2c().real_fft_options),  # a descriptor's own (read-only) options
    ]
    for s in spellings:
        assert s == spellings[0] and hash(s) == hash(spellings[0]) and s._key == spellings[0]._key
    mms = [_mm(), Matmul(size=[16, 24, 8], precision=("float32",) * 3, block_dim=(64, 1, 1),
                         arrangement="col_major", sm="sm_90"),
           Matmul(size=(16, 24, 8), precision=np.dtype("float32"), block_size=64, sm=(9, 0))]
    for m in mms:
        assert m == mms[0] and hash(m) == hash(mms[0])
    # what changes the generated code changes the key
    assert _r2c() != _r2c(real_fft_options={"complex_layout": "full"})
    assert _r2c() != _r2c(real_fft_options={"real_mode": "folded"})
    assert _mm() != _mm(leading_dimension="suggested") and _mm() != _mm(alignment=(16, 16, 16))
    assert _r2c() != _mm() and _mm() != _r2c() and _r2c() != _r2c()._key


@pytest.mark.parametrize("make", [_r2c, _mm], ids=["FFT", "Matmul"])
def test_pickle_copy_and_caches_keep_working(make):
    d = make()
    for other in (pickle.loads(pickle.dumps(d)), copy.copy(d), copy.deepcopy(d)):
        assert other == d and hash(other) == hash(d) and repr(other) == repr(d)
    calls = []

    @functools.cache
    def keyed(desc):
        calls.append(desc)
        return len(calls)

    assert keyed(d) == keyed(make()) == keyed(pickle.loads(pickle.dumps(d))) == 1
    assert isinstance(d.real_fft_options if isinstance(d, FFT) else d._layout, dict)


def test_freeze():
    a = np.arange(4)
    fa = freeze(a)
    assert not fa.flags.writeable and a.flags.writeable and fa is not a
    with pytest.raises(ValueError):
        fa[0] = 1
    fd = freeze({"x": [1, {"y": [2]}], "s": {3}})
    assert fd == {"x": (1, {"y": (2,)}), "s": frozenset({3})} and isinstance(fd["x"][1], FrozenDict)
    assert hash(fd) == hash(freeze(dict(fd))) and pickle.loads(pickle.dumps(fd)) == fd
    assert repr(FrozenDict(a=1)) == "{'a': 1}"
