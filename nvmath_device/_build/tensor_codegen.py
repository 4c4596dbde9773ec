# SPDX-License-Identifier: Apache-2.0
"""cuBLASDx tensor operations (copy, copy_fragment, tensor execute, partitioner queries) -> C++ shim
text -> NVRTC -> LTO-IR, one small unit per operation and operand types.

A kernel that uses ``nvmath_device.common`` (``make_tensor``, ``copy``, ``copy_fragment``,
``MM.execute(smem_a, smem_b, rmem_c)``, ``accumulator.map_fragment_index(i)`` ...) links one unit
for each distinct operation it performs: which operation, which of the descriptor's layouts each
tensor has (with the leading dimension of a global one) and each tensor's element type. The unit's
``extern "C"`` function takes ``void*`` pointers (data pointers of the tensors, and of scalars) and
builds the cuBLASDx tensors itself with the same layout functions as the descriptor's
:class:`nvmath_device._layouts.Layout` names, so the C++ sees exactly the static layouts
(shapes, strides, swizzles) that cuBLASDx's own examples would. Units are cached on disk like the
GEMM shims; a unit compiles in ~6-15 s on a CPU (most of it parsing cublasdx.hpp), once.

Register fragments (layouts ``get_layout_rmem_c`` / ``suggest_layout_rmem_c``) are the
partitioners' accumulator fragments. cuBLASDx's register GEMM chooses its tiled MMA by the
fragment's layout *type*: the suggested (swizzled) MMA when it equals the suggested partitioner's
fragment layout, else the default one; ``nmdx_part<L>()`` below makes the same choice, so
``copy_fragment`` and the partitioner queries of a fragment always describe the MMA that
``execute`` runs for it (as ``<sym>_coords`` of :mod:`gemm_codegen` does).
"""

from __future__ import annotations

import hashlib
import logging

from . import cache
from .gemm_codegen import _compile, _description, _include_id, pinned_block_dim
from .toolchain import toolchain_id

log = logging.getLogger("nvmath_device")

__all__ = ["tensor_symbol", "render_tensor_source", "tensor_ltoir", "tensor_key", "KINDS", "preamble", "cpp_type"]

# the operations, and how many tensors each takes
KINDS = {"copy": 2, "copy_fragment": 2, "execute_rmem": 3, "execute_smem": 3, "partitioner": 1}

_CPP_REAL = {
    "float16": "__half", "bfloat16": "__nv_bfloat16", "float32": "float", "float64": "double",
    "int8": "int8_t", "uint8": "uint8_t", "int16": "int16_t", "uint16": "uint16_t",
    "int32": "int32_t", "uint32": "uint32_t", "int64": "int64_t", "uint64": "uint64_t",
}
_CPP_COMPLEX = {"complex32": "cublasdx::complex<__half>", "complex64": "cublasdx::complex<float>",
                "complex128": "cublasdx::complex<double>"}


def cpp_type(dtype_name: str) -> str:
    """The C++ element type of a tensor whose elements are ``dtype_name`` (``"float16"``, ``"complex64"`` ...)."""
    t = _CPP_REAL.get(dtype_name) or _CPP_COMPLEX.get(dtype_name)
    if t is None:
        raise ValueError(f"no cuBLASDx element type for {dtype_name!r}; allowed: "
                         f"{sorted(_CPP_REAL) + sorted(_CPP_COMPLEX)}")
    return t


def _layout_expr(name: str, ld) -> str:
    """The C++ layout of one of the descriptor's layouts (names as nvmath_device._layouts.LAYOUT_NAMES)."""
    if name.startswith("get_layout_gmem_"):
        return f"MM::{name}(cute::Int<{int(ld)}>{{}})"
    if name in ("get_layout_rmem_c", "suggest_layout_rmem_c"):
        return "LG{}" if name.startswith("get") else "LS{}"
    return f"MM::{name}()"


def _tensor_expr(desc, ptr: str, const: bool = False) -> str:
    """C++ expression of a cuBLASDx tensor over ``ptr`` (a ``void*``) for ``desc`` =
    (layout name, leading dimension or None, element dtype name)."""
    name, ld, dtype = desc
    t = cpp_type(dtype)
    cast = f"reinterpret_cast<{'const ' if const else ''}{t}*>({ptr})"
    if name.endswith("rmem_c"):
        return f"cute::make_tensor(cute::make_rmem_ptr({cast}), {_layout_expr(name, ld)})"
    return f"cublasdx::make_tensor({cast}, {_layout_expr(name, ld)})"


def _memory(desc) -> str:
    return desc[0].split("_")[2]  # get_layout_gmem_a -> gmem, suggest_layout_rmem_c -> rmem


def _rmem_layout_type(desc) -> str:
    return "LG" if desc[0].startswith("get") else "LS"


def tensor_symbol(mm, kind: str, tensors, alignment) -> str:
    """Name of the ``extern "C"`` function of one operation (a hash of everything it depends on)."""
    text = repr((mm._key, kind, tuple(tensors), alignment))
    return f"nvmathdx_tensor_{hashlib.sha256(text.encode()).hexdigest()[:20]}"


def _body(kind: str, sym: str, tensors, alignment) -> str:
    if kind == "copy":
        src, dst = tensors
        op = src[0][-1]  # the operand of the source layout
        align = alignment if alignment is not None else f"cublasdx::alignment_of<MM>::{op}"
        return (f'extern "C" __device__ void {sym}(void* s, void* d) {{\n'
                f"  const auto ts = {_tensor_expr(src, 's', const=True)};\n"
                f"  auto td = {_tensor_expr(dst, 'd')};\n"
                f"  cublasdx::copy<MM, {align}>(ts, td);\n}}\n")
    if kind == "copy_fragment":
        src, dst = tensors
        frag = src if _memory(src) == "rmem" else dst
        lt = _rmem_layout_type(frag)
        align = alignment if alignment is not None else f"decltype(nmdx_part<{lt}>().get_alignment())::value"
        return (f'extern "C" __device__ void {sym}(void* s, void* d) {{\n'
                f"  const auto ts = {_tensor_expr(src, 's', const=True)};\n"
                f"  auto td = {_tensor_expr(dst, 'd')};\n"
                f"  cublasdx::copy_fragment<{align}>(ts, td, nmdx_part<{lt}>());\n}}\n")
    if kind == "execute_rmem":
        a, b, c = tensors
        return (f'extern "C" __device__ void {sym}(void* a, void* b, void* c) {{\n'
                f"  const auto ta = {_tensor_expr(a, 'a', const=True)};\n"
                f"  const auto tb = {_tensor_expr(b, 'b', const=True)};\n"
                f"  auto tc = {_tensor_expr(c, 'c')};\n"
                f"  MM().execute(ta, tb, tc);\n}}\n")
    if kind == "execute_smem":
        a, b, c = tensors
        return (f'extern "C" __device__ void {sym}(void* alpha, void* a, void* b, void* beta, void* c) {{\n'
                f"  const auto ta = {_tensor_expr(a, 'a', const=True)};\n"
                f"  const auto tb = {_tensor_expr(b, 'b', const=True)};\n"
                f"  auto tc = {_tensor_expr(c, 'c')};\n"
                f"  MM().execute(*reinterpret_cast<const CT*>(alpha), ta, tb, *reinterpret_cast<const CT*>(beta), tc);\n}}\n")
    if kind == "partitioner":
        (frag,) = tensors
        lt = _rmem_layout_type(frag)
        return (f'extern "C" __device__ void {sym}_active(void* out) {{\n'
                f"  *reinterpret_cast<int*>(out) = nmdx_part<{lt}>().is_thread_active() ? 1 : 0;\n}}\n"
                f'extern "C" __device__ void {sym}_predicated(void* out) {{\n'
                f"  *reinterpret_cast<int*>(out) = decltype(nmdx_part<{lt}>().is_predicated())::value ? 1 : 0;\n}}\n"
                f'extern "C" __device__ void {sym}_map(void* i, void* r, void* c) {{\n'
                f"  const auto crd = nmdx_part<{lt}>().map_fragment_index(*reinterpret_cast<const int*>(i));\n"
                f"  *reinterpret_cast<int*>(r) = static_cast<int>(cute::get<0>(crd));\n"
                f"  *reinterpret_cast<int*>(c) = static_cast<int>(cute::get<1>(crd));\n}}\n"
                f'extern "C" __device__ void {sym}_in_bounds(void* i, void* out) {{\n'
                f"  *reinterpret_cast<int*>(out) = nmdx_part<{lt}>().is_index_in_bounds(*reinterpret_cast<const int*>(i)) ? 1 : 0;\n}}\n")
    raise ValueError(f"kind must be one of {tuple(KINDS)}, got {kind!r}")


def render_tensor_source(mm, kind: str, tensors, alignment=None) -> str:
    """C++ source of one tensor operation of ``mm`` (``tensors``: (layout name, ld or None, dtype
    name) per tensor, in the operation's argument order; ``alignment``: bytes, or None for
    cuBLASDx's default of the operation)."""
    if kind not in KINDS:
        raise ValueError(f"kind must be one of {tuple(KINDS)}, got {kind!r}")
    if len(tensors) != KINDS[kind]:
        raise ValueError(f"{kind} takes {KINDS[kind]} tensor(s), got {len(tensors)}")
    sym = tensor_symbol(mm, kind, tensors, alignment)
    return preamble(mm) + _body(kind, sym, tensors, alignment)


def preamble(mm) -> str:
    """The head of every tensor-operation unit of ``mm``: MM, CT, the two fragment layouts LG/LS
    and ``nmdx_part<L>()``."""
    return (
        "#include <cublasdx.hpp>\n"
        f"using MM = decltype({_description(mm, pinned_block_dim(mm))});\n"
        "using CT = typename MM::c_value_type;\n"
        "using LG = decltype(MM::get_partitioner().make_accumulator_fragment().layout());\n"
        "using LS = decltype(MM::suggest_partitioner().make_accumulator_fragment().layout());\n"
        "// the partitioner of the MMA that MM().execute runs for a register fragment of layout L\n"
        "template <class L> __device__ __forceinline__ auto nmdx_part() {\n"
        "  if constexpr (cute::is_same_v<L, LS>) { return MM::suggest_partitioner(); }\n"
        "  else { return MM::get_partitioner(); }\n"
        "}\n"
    )


def tensor_key(mm, kind: str, tensors, alignment=None) -> str:
    """The disk-cache key of one tensor operation's LTO-IR."""
    src = render_tensor_source(mm, kind, tensors, alignment)
    return cache.make_key("gemm-tensor-op", src, toolchain_id(), _include_id(), mm.sm)


def tensor_ltoir(mm, kind: str, tensors, alignment=None) -> bytes:
    """LTO-IR of one tensor operation for ``mm.sm`` (disk-cached; NVRTC on a miss)."""
    src = render_tensor_source(mm, kind, tensors, alignment)
    key = tensor_key(mm, kind, tensors, alignment)

    def build():
        sym = tensor_symbol(mm, kind, tensors, alignment)
        log.info("numba-mathdx: compiling %s (cuBLASDx %s of GEMM %s) with NVRTC (~10 s; cached afterwards)",
                 sym, kind, mm.size)
        return _compile(src, mm.sm, "ltoir", f"{sym}.cu")

    return cache.get_or_build(key, build)
