# SPDX-License-Identifier: Apache-2.0
"""One cuBLASLt algorithm: its 64 bytes, what it can do (capabilities) and its configuration."""

from __future__ import annotations

import ctypes
import dataclasses
import re

from . import _cublaslt as lt
from ._algo_names import CLUSTER_SHAPES, STAGES, TILES
from ._options import MatmulReductionScheme, is_int

__all__ = ["Algorithm", "AlgorithmCapabilities"]


@dataclasses.dataclass(frozen=True)
class AlgorithmCapabilities:
    """What a cuBLASLt algorithm supports (``cublasLtMatmulAlgoCapAttributes_t``), as
    nvmath-python's ``AlgorithmCapabilities``: one field per attribute, lower-cased.

    ``tile_ids`` and ``stages_ids`` are the tiles and stages :attr:`Algorithm.tile` and
    :attr:`Algorithm.stages` may be set to, as tuples (``(64, 128)``, ``(32, "AUTO")``) or
    ``"UNDEFINED"``; the masks are bit masks of ``cublasLtReductionScheme_t``,
    ``cublasLtPointerModeMask_t``, ``cublasLtEpilogue_t`` and ``cublasLtNumericalImplFlags_t``.
    An attribute the installed cuBLASLt does not answer (newer than it, e.g.
    ``pointer_array_grouped_support`` on cuBLASLt 13.0) is None.

    Attributes
    ----------
    splitk_support, cta_swizzling_support, strided_batch_support : int
        Non-zero: :attr:`Algorithm.split_k` above 1, :attr:`Algorithm.cta_swizzling`, strided
        batches are supported.
    reduction_scheme_mask : int
        The :attr:`Algorithm.reduction_scheme` values allowed.
    tile_ids, stages_ids : tuple
        The values :attr:`Algorithm.tile` and :attr:`Algorithm.stages` may take.
    custom_option_max : int
        The largest :attr:`Algorithm.custom_option`.
    min_alignment_a_bytes, min_alignment_b_bytes, min_alignment_c_bytes, min_alignment_d_bytes : int
        The alignment each matrix needs.
    out_of_place_result_support, uplo_support, custom_memory_order, pointer_mode_mask, epilogue_mask, ld_negative, numerical_impl_flags, pointer_array_batch_support, floating_point_emulation_support, pointer_array_grouped_support : int
        As ``cublasLt.h`` describes the attribute of that name.
    """

    splitk_support: int
    reduction_scheme_mask: int
    cta_swizzling_support: int
    strided_batch_support: int
    out_of_place_result_support: int
    uplo_support: int
    tile_ids: tuple
    custom_option_max: int
    custom_memory_order: int
    pointer_mode_mask: int
    epilogue_mask: int
    stages_ids: tuple
    ld_negative: int
    numerical_impl_flags: int
    min_alignment_a_bytes: int
    min_alignment_b_bytes: int
    min_alignment_c_bytes: int
    min_alignment_d_bytes: int
    pointer_array_batch_support: int
    floating_point_emulation_support: int
    pointer_array_grouped_support: int

    def __str__(self):
        names = [f.name for f in dataclasses.fields(self)]
        width = max(map(len, names))
        rows = "\n".join(f"    {n:{width}} = {getattr(self, n)}" for n in names)
        return f"Algorithm capabilities (cublasLtMatmulAlgoCapAttributes_t):\n{rows}"


def shape_value(name: str):
    """An enumerator's name as nvmath-python's value: ``"64x128"`` -> ``(64, 128)``,
    ``"16xAUTO"`` -> ``(16, "AUTO")``, ``"UNDEFINED"``/``"AUTO"`` unchanged."""
    if "x" not in name:
        return name
    return tuple(int(p) if p.isdigit() else p for p in name.split("x"))


def _table(names_by_value: dict[int, str]) -> tuple[dict, dict]:
    """(value -> nvmath-style shape, shape -> value) of an enumerator table."""
    to_shape = {v: shape_value(n) for v, n in names_by_value.items()}
    return to_shape, {s: v for v, s in to_shape.items()}


_TILE, _TILE_ID = _table(dict(enumerate(TILES)))
_STAGE, _STAGE_ID = _table(STAGES)
_CLUSTER, _CLUSTER_ID = _table(CLUSTER_SHAPES)
_CAP = lt.AlgoCapAttribute
_CFG = lt.AlgoConfigAttribute


def _shape_id(value, ids: dict, what: str) -> int:
    """The enumerator value of a shape given as a tuple, an ``"AxB"`` string or its name."""
    key = value
    if isinstance(value, str) and re.fullmatch(r"\d+x\w+(x\d+)?", value):
        key = shape_value(value)
    elif isinstance(value, list):
        key = tuple(value)
    try:
        return ids[key]
    except (KeyError, TypeError):
        raise ValueError(
            f"Algorithm.{what}: {value!r} is not a cuBLASLt {what} (e.g. "
            f"{next(k for k in ids if isinstance(k, tuple))!r}); see capabilities.{what}_ids"
            if what != "cluster_shape"
            else f"Algorithm.cluster_shape: {value!r} is not a cuBLASLt cluster shape; allowed: "
            f"{list(ids)}"
        ) from None


class Algorithm:
    """One cuBLASLt algorithm (``cublasLtMatmulAlgo_t``) for a planned matmul; picklable.

    Pass a list of them to :meth:`Matmul.plan` (``algorithms=``) to skip the heuristic; they
    are only valid for the same problem and the same cuBLASLt version. As in nvmath-python,
    :attr:`capabilities` says what the algorithm supports and its configuration can be read
    and set: :attr:`tile`, :attr:`stages`, :attr:`split_k`, :attr:`reduction_scheme`,
    :attr:`cta_swizzling`, :attr:`custom_option`, :attr:`inner_shape`, :attr:`cluster_shape`
    (each checked against the capabilities; a change reaches the next launch of the plans
    that hold this object). The workspace planned for it is kept: a configuration that needs
    more is refused by cuBLASLt at execution, named by :class:`CublasLtError`.

    Attributes
    ----------
    workspace_size : int
        Workspace bytes the algorithm needs.
    waves_count : float
        cuBLASLt's device-utilisation estimate.
    time_ms : float or None
        The median time :meth:`Matmul.autotune` took for it.
    """

    def __init__(self, data: bytes, workspace_size: int, waves_count: float = 0.0, version=None):
        if len(data) != ctypes.sizeof(lt.MatmulAlgo):
            raise ValueError("data: a cublasLtMatmulAlgo_t is 64 bytes")
        self.workspace_size = int(workspace_size)
        self.waves_count = float(waves_count)
        self.version = version
        self.time_ms: float | None = None
        self._algo = lt.MatmulAlgo.from_buffer_copy(bytes(data))

    @property
    def data(self) -> bytes:
        """The ``cublasLtMatmulAlgo_t``'s 64 bytes (with any configuration change)."""
        return bytes(self._algo)

    @classmethod
    def _from_result(cls, r: lt.HeuristicResult, version: int) -> Algorithm:
        return cls(bytes(r.algo), r.workspaceSize, r.wavesCount, version)

    def __reduce__(self):
        return (Algorithm, (self.data, self.workspace_size, self.waves_count, self.version))

    def __repr__(self):
        t = f", time_ms={self.time_ms:.4f}" if self.time_ms is not None else ""
        return f"Algorithm(workspace_size={self.workspace_size}, waves_count={self.waves_count:.2f}{t})"

    # ------------------------------------------------------------------ capabilities
    @property
    def capabilities(self) -> AlgorithmCapabilities:
        """What this algorithm supports (``cublasLtMatmulAlgoCapGetAttribute``)."""
        values, errors = {}, []
        for a in _CAP:
            try:
                v = lt.algo_cap(self._algo, a)
            except lt.CublasLtError as e:  # an attribute this cuBLASLt does not answer: None
                errors.append(e)
                values[a.name.lower()] = None
                continue
            if a == _CAP.TILE_IDS:
                v = tuple(_TILE.get(x, x) for x in v)
            elif a == _CAP.STAGES_IDS:
                v = tuple(_STAGE.get(x, x) for x in v)
            values[a.name.lower()] = v
        if len(errors) == len(_CAP):  # not an algorithm cuBLASLt made
            raise errors[0]
        return AlgorithmCapabilities(**values)

    # ------------------------------------------------------------------ configuration
    def _get(self, attr):
        return lt.algo_config(self._algo, attr)

    def _set(self, attr, value: int) -> None:
        lt.set_algo_config(self._algo, attr, value)

    @property
    def algorithm_id(self) -> int:
        """cuBLASLt's id of the algorithm (read only)."""
        return self._get(_CFG.ID)

    @property
    def tile(self):
        """The tile, e.g. ``(64, 128)`` or ``"UNDEFINED"``: one of ``capabilities.tile_ids``."""
        return _TILE.get(self._get(_CFG.TILE_ID), "UNDEFINED")

    @tile.setter
    def tile(self, value) -> None:
        self._set_listed(value, _TILE_ID, _TILE, self.capabilities.tile_ids, "tile", "tiles", _CFG.TILE_ID)

    def _set_listed(self, value, ids, shapes, allowed, what, plural, attr) -> None:
        """Set a shape-valued field (tile, stages) to ``value``: a cuBLASLt enumerator that is
        in ``allowed`` (this algorithm's capability list; an empty list allows any)."""
        v = _shape_id(value, ids, what)
        if allowed and shapes[v] not in allowed:
            raise ValueError(f"Algorithm.{what}: {value!r} is not one of this algorithm's {plural} {allowed}")
        self._set(attr, v)

    @property
    def stages(self):
        """The stages, e.g. ``(32, 4)`` or ``(64, "AUTO")``: one of ``capabilities.stages_ids``."""
        return _STAGE.get(self._get(_CFG.STAGES_ID), "UNDEFINED")

    @stages.setter
    def stages(self, value) -> None:
        self._set_listed(value, _STAGE_ID, _STAGE, self.capabilities.stages_ids, "stages", "stages",
                         _CFG.STAGES_ID)

    @property
    def split_k(self) -> int:
        """The number of K splits (1: none); more than 1 needs ``capabilities.splitk_support``."""
        return self._get(_CFG.SPLITK_NUM)

    @split_k.setter
    def split_k(self, value: int) -> None:
        if not is_int(value) or value < 1:
            raise ValueError(f"Algorithm.split_k: {value!r}; expected an int >= 1")
        if value > 1 and not self.capabilities.splitk_support:
            raise ValueError(f"Algorithm.split_k: {value}; this algorithm does not split K (splitk_support 0)")
        self._set(_CFG.SPLITK_NUM, int(value))

    @property
    def reduction_scheme(self) -> MatmulReductionScheme:
        """How split-K partial results are reduced: one scheme of
        ``capabilities.reduction_scheme_mask`` (or NONE)."""
        return MatmulReductionScheme(self._get(_CFG.REDUCTION_SCHEME))

    @reduction_scheme.setter
    def reduction_scheme(self, value) -> None:
        try:
            v = MatmulReductionScheme(value)
        except (ValueError, TypeError):
            v = None
        if v is None or v == MatmulReductionScheme.MASK or v & (v - 1):
            raise ValueError(
                f"Algorithm.reduction_scheme: {value!r}; expected one MatmulReductionScheme "
                "(NONE, INPLACE, COMPUTE_TYPE or OUTPUT_TYPE)"
            )
        mask = self.capabilities.reduction_scheme_mask
        if v and not v & mask:
            raise ValueError(
                f"Algorithm.reduction_scheme: {v.name} is not supported by this algorithm "
                f"(reduction_scheme_mask {mask:#x})"
            )
        self._set(_CFG.REDUCTION_SCHEME, int(v))

    @property
    def cta_swizzling(self) -> bool:
        """Whether thread blocks are swizzled (needs ``capabilities.cta_swizzling_support``)."""
        return bool(self._get(_CFG.CTA_SWIZZLING))

    @cta_swizzling.setter
    def cta_swizzling(self, value: bool) -> None:
        if value not in (True, False, 0, 1) or not isinstance(value, (bool, int)):
            raise ValueError(f"Algorithm.cta_swizzling: {value!r}; expected True or False")
        if value and not self.capabilities.cta_swizzling_support:
            raise ValueError("Algorithm.cta_swizzling: this algorithm does not swizzle (cta_swizzling_support 0)")
        self._set(_CFG.CTA_SWIZZLING, int(bool(value)))

    @property
    def custom_option(self) -> int:
        """An algorithm-specific option, 0 to ``capabilities.custom_option_max``."""
        return self._get(_CFG.CUSTOM_OPTION)

    @custom_option.setter
    def custom_option(self, value: int) -> None:
        top = self.capabilities.custom_option_max
        if not is_int(value) or not 0 <= value <= top:
            raise ValueError(f"Algorithm.custom_option: {value!r}; expected an int from 0 to {top}")
        self._set(_CFG.CUSTOM_OPTION, int(value))

    @property
    def inner_shape(self) -> int:
        """The inner shape id (``cublasLtMatmulInnerShape_t``: 0 undefined, 1 MMA884, 2 MMA1684,
        3 MMA1688, 4 MMA16816)."""
        return self._get(_CFG.INNER_SHAPE_ID)

    @inner_shape.setter
    def inner_shape(self, value: int) -> None:
        if not is_int(value) or not 0 <= value <= 4:
            raise ValueError(f"Algorithm.inner_shape: {value!r}; expected an int from 0 to 4")
        self._set(_CFG.INNER_SHAPE_ID, int(value))

    @property
    def cluster_shape(self):
        """The thread-block cluster shape, e.g. ``(2, 1, 1)`` or ``"AUTO"``."""
        return _CLUSTER.get(self._get(_CFG.CLUSTER_SHAPE_ID), "AUTO")

    @cluster_shape.setter
    def cluster_shape(self, value) -> None:
        self._set(_CFG.CLUSTER_SHAPE_ID, _shape_id(value, _CLUSTER_ID, "cluster_shape"))
