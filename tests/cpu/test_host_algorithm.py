# SPDX-License-Identifier: Apache-2.0
"""An Algorithm's capabilities and configuration without a GPU (nvmath-python's
``Algorithm.capabilities``, ``tile``, ``stages``, ... as its example15 uses them).

cuBLASLt sets and reads an algorithm's configuration without a device (real calls here); its
capabilities need an algorithm cuBLASLt initialised on a GPU, so these tests give the checks
a stand-in :class:`AlgorithmCapabilities`, and tests/gpu/test_host_matmul.py reads real ones.
"""

import ctypes
import dataclasses
import pathlib
import pickle
import re

import pytest

from nvmath_host import Algorithm, AlgorithmCapabilities, CublasLtError, MatmulReductionScheme
from nvmath_host import _algo_names as names
from nvmath_host._algorithm import shape_value
from nvmath_host._execute import LaunchArgs

CAPS = AlgorithmCapabilities(
    splitk_support=1, reduction_scheme_mask=0b011, cta_swizzling_support=1, strided_batch_support=1,
    out_of_place_result_support=1, uplo_support=0, tile_ids=((64, 128), (128, 128), (64, 64)),
    custom_option_max=3, custom_memory_order=0, pointer_mode_mask=1, epilogue_mask=0xFF,
    stages_ids=((64, 3), (32, "AUTO")), ld_negative=0, numerical_impl_flags=0, min_alignment_a_bytes=16,
    min_alignment_b_bytes=16, min_alignment_c_bytes=16, min_alignment_d_bytes=16,
    pointer_array_batch_support=0, floating_point_emulation_support=0, pointer_array_grouped_support=0,
)


@pytest.fixture
def algo(monkeypatch):
    monkeypatch.setattr(Algorithm, "capabilities", property(lambda self: self._caps))
    a = Algorithm(bytes(64), 1024)
    a._caps = CAPS
    return a


def test_the_enumerator_tables_match_cublasLt_h():
    import nvidia

    heads = [pathlib.Path(p) / "cu13" / "include" / "cublasLt.h" for p in nvidia.__path__]
    head = next((h for h in heads if h.is_file()), None)
    if head is None:
        pytest.skip(f"no cublasLt.h under {heads}")
    text = head.read_text()

    def enum(prefix):
        return {int(v): n for n, v in re.findall(rf"^\s*{prefix}(\w+) = (\d+)", text, re.M)}

    assert dict(enumerate(names.TILES)) == enum("CUBLASLT_MATMUL_TILE_")
    assert names.STAGES == enum("CUBLASLT_MATMUL_STAGES_")
    assert names.CLUSTER_SHAPES == enum("CUBLASLT_CLUSTER_SHAPE_")


def test_names_become_nvmath_python_s_tuples():
    assert shape_value("64x128") == (64, 128)
    assert shape_value("16xAUTO") == (16, "AUTO")
    assert shape_value("2x1x1") == (2, 1, 1)
    assert shape_value("UNDEFINED") == "UNDEFINED"


def test_configuration_is_set_in_the_algorithm_s_bytes_and_survives_pickling(algo):
    before = algo.data
    algo.tile = (128, 128)
    algo.stages = (32, "AUTO")
    algo.split_k = 4
    algo.reduction_scheme = MatmulReductionScheme.COMPUTE_TYPE
    algo.cta_swizzling = True
    algo.custom_option = 3
    algo.inner_shape = 4
    algo.cluster_shape = (2, 1, 1)
    assert algo.data != before
    got = (algo.tile, algo.stages, algo.split_k, algo.reduction_scheme, algo.cta_swizzling,
           algo.custom_option, algo.inner_shape, algo.cluster_shape)
    assert got == ((128, 128), (32, "AUTO"), 4, MatmulReductionScheme.COMPUTE_TYPE, True, 3, 4, (2, 1, 1))
    algo.tile = "64x64"  # the enumerator's name works too
    assert algo.tile == (64, 64)
    copy = pickle.loads(pickle.dumps(algo))
    assert copy.data == algo.data and (copy.tile, copy.split_k) == ((64, 64), 4)


def test_a_launch_sees_a_change_made_after_planning(algo):
    """The plan launches with the address of the algorithm's struct: a change made through
    the properties (example15 sets ``mm.algorithms[0].tile`` after plan) reaches the next
    launch without a new plan."""
    args = LaunchArgs.__new__(LaunchArgs)
    args.use_algorithm(algo)
    algo.tile = (64, 128)
    assert ctypes.string_at(args.algo, 64) == algo.data


@pytest.mark.parametrize(
    "field, value, msg",
    [
        ("tile", (8, 8), r"^Algorithm.tile: \(8, 8\) is not one of this algorithm's tiles"),
        ("tile", (3, 5), r"^Algorithm.tile: \(3, 5\) is not a cuBLASLt tile .*see capabilities.tile_ids"),
        ("tile", "big", r"^Algorithm.tile: 'big' is not a cuBLASLt tile"),
        ("stages", (16, 1), r"^Algorithm.stages: \(16, 1\) is not one of this algorithm's stages"),
        ("split_k", 0, r"^Algorithm.split_k: 0; expected an int >= 1"),
        ("split_k", 2.0, r"^Algorithm.split_k: 2.0; expected an int >= 1"),
        ("reduction_scheme", MatmulReductionScheme.OUTPUT_TYPE, r"^Algorithm.reduction_scheme: OUTPUT_TYPE is not "
         r"supported by this algorithm \(reduction_scheme_mask 0x3\)"),
        ("reduction_scheme", MatmulReductionScheme.MASK, r"^Algorithm.reduction_scheme: .*expected one"),
        ("reduction_scheme", 9, r"^Algorithm.reduction_scheme: 9; expected one"),
        ("cta_swizzling", 2, r"^Algorithm.cta_swizzling: 2; expected True or False"),
        ("custom_option", 4, r"^Algorithm.custom_option: 4; expected an int from 0 to 3"),
        ("inner_shape", 5, r"^Algorithm.inner_shape: 5; expected an int from 0 to 4"),
        ("cluster_shape", (3, 3, 3), r"^Algorithm.cluster_shape: \(3, 3, 3\) is not a cuBLASLt cluster shape"),
    ],
)
def test_bad_configuration_is_refused_by_name_and_changes_nothing(algo, field, value, msg):
    before = algo.data
    with pytest.raises(ValueError, match=msg):
        setattr(algo, field, value)
    assert algo.data == before


def test_what_the_capabilities_do_not_allow_is_refused(algo):
    algo._caps = dataclasses.replace(CAPS, splitk_support=0, cta_swizzling_support=0)
    with pytest.raises(ValueError, match=r"^Algorithm.split_k: 2; this algorithm does not split K"):
        algo.split_k = 2
    algo.split_k = 1  # no split is always allowed
    with pytest.raises(ValueError, match=r"^Algorithm.cta_swizzling: this algorithm does not swizzle"):
        algo.cta_swizzling = True
    algo.cta_swizzling = False


def test_capabilities_of_bytes_cuBLASLt_never_made_are_its_error():
    with pytest.raises(CublasLtError, match=r"^cublasLtMatmulAlgoCapGetAttribute returned CUBLAS_STATUS_"):
        _ = Algorithm(bytes(64), 0).capabilities
    assert "splitk_support" in str(CAPS) and "tile_ids" in str(CAPS)
