# SPDX-License-Identifier: Apache-2.0
"""Every public name has a numpydoc docstring.

Public: the names in ``__all__`` of nvmath_device, nvmath_device.aot, nvmath_host, kernels and
mathdx_operands, and the public methods and properties of the descriptors (nvmath_device.FFT,
nvmath_device.Matmul), of nvmath_host.Matmul and of mathdx_operands' classes. A docstring must not be empty; a function or method that takes
parameters (a class: whose own ``__init__`` does) must document them in a ``Parameters`` section
(classes may use ``Attributes`` for dataclass fields).
"""

from __future__ import annotations

import enum
import importlib
import inspect
import re

import pytest

MODULES = ("nvmath_device", "nvmath_device.aot", "nvmath_host", "kernels", "mathdx_operands")
CLASSES = (
    ("nvmath_device", "FFT"),
    ("nvmath_device", "Matmul"),
    ("nvmath_host", "Matmul"),
    ("mathdx_operands", "Operand"),
    ("mathdx_operands", "DType"),
    ("mathdx_operands", "Package"),
    ("mathdx_operands", "Stream"),
)


def _public_names():
    out = []
    for modname in MODULES:
        mod = importlib.import_module(modname)
        out += [(f"{modname}.{name}", getattr(mod, name)) for name in mod.__all__]
    for modname, clsname in CLASSES:
        cls = getattr(importlib.import_module(modname), clsname)
        for name, attr in vars(cls).items():
            if name.startswith("_"):
                continue
            if isinstance(attr, (staticmethod, classmethod)):
                attr = attr.__func__
            if isinstance(attr, property) or inspect.isfunction(attr):
                out.append((f"{modname}.{clsname}.{name}", attr))
    return out


PUBLIC = _public_names()

# Public names whose numpydoc sections are still missing (strict xfail: this set must shrink).
PENDING: set = set()


def _own_init(cls):
    """The class's ``__init__`` when it (or a dataclass) defines its parameters, else None."""
    if issubclass(cls, (BaseException, enum.Enum)):
        return None
    for klass in cls.__mro__:
        if "__init__" in vars(klass):
            init = vars(klass)["__init__"]
            if klass is object or not inspect.isfunction(init):
                return None
            return init
    return None


def _takes_parameters(obj) -> bool:
    if isinstance(obj, property):
        return False
    func = _own_init(obj) if inspect.isclass(obj) else obj
    if func is None or not callable(func):
        return False
    try:
        params = list(inspect.signature(func).parameters.values())
    except (TypeError, ValueError):
        return False
    if params and params[0].name in ("self", "cls"):
        params = params[1:]
    return bool(params)


def _section(doc: str, *names: str) -> bool:
    return any(re.search(rf"^\s*{name}\n\s*-{{3,}}\s*$", doc, re.MULTILINE) for name in names)


def test_there_is_something_to_check():
    names = {n for n, _ in PUBLIC}
    assert {"nvmath_device.FFT", "nvmath_host.matmul", "kernels.fft_convolve"} <= names
    assert "nvmath_device.FFT.execute" in names and "nvmath_host.Matmul.plan" in names
    assert {"mathdx_operands.wrap", "mathdx_operands.resolve_stream"} <= names


@pytest.mark.parametrize(
    "name,obj",
    [
        pytest.param(n, o, marks=pytest.mark.xfail(strict=True, reason="pending in gemm.py"))
        if n in PENDING
        else (n, o)
        for n, o in PUBLIC
    ],
    ids=[n for n, _ in PUBLIC],
)
def test_numpydoc_docstring(name, obj):
    doc = obj.__doc__ if isinstance(obj, property) else inspect.getdoc(obj)
    assert doc and doc.strip(), f"{name} has no docstring"
    if _takes_parameters(obj):
        sections = ("Parameters", "Attributes") if inspect.isclass(obj) else ("Parameters",)
        assert _section(inspect.cleandoc(doc), *sections), (
            f"{name} takes parameters but its docstring has no numpydoc 'Parameters' section"
        )
