# SPDX-License-Identifier: Apache-2.0
"""tests/nvmath_host_examples_census.py on examples of our own writing (nothing of nvmath-python
is stored here): each runs unchanged with ``nvmath.linalg.advanced`` aliased to nvmath_host, and
the table reports results and causes."""

import textwrap

from tests import nvmath_host_examples_census as census


def test_causes():
    assert census.classify("example01_numpy.py", "ok") == ""
    assert "Blackwell" in census.classify("example25_mxfp8.py", "AttributeError: x")
    assert "helpers" in census.classify("e.py", "AttributeError: module 'nvmath_host' has no attribute 'helpers'")
    assert "not installed" in census.classify("e.py", "ModuleNotFoundError: No module named 'torch'")
    assert "GPU" in census.classify("e.py", "CUDARuntimeError: cudaErrorInsufficientDriver: CUDA driver version")
    assert census.classify("e.py", "TypeError: plan() got an unexpected keyword argument 'x'") == "nvmath_host compat"
    # an error that names CUDA tensors is not a missing GPU
    msg = "TypeError: epilog_inputs['x']: unsupported operand of type builtins.float; supported: torch.Tensor (CUDA)"
    assert census.classify("e.py", msg) == "nvmath_host compat"


def test_census_of_three_examples(tmp_path, capsys):
    ex = tmp_path / "matmul"
    ex.mkdir()
    (ex / "example01_numpy.py").write_text(textwrap.dedent("""\
        import numpy as np
        import nvmath
        a, b = np.arange(6.0).reshape(2, 3), np.ones((3, 2))
        with nvmath.linalg.advanced.Matmul(a, b) as mm:
            mm.plan()
            assert np.array_equal(mm.execute(), a @ b)
        from nvmath.linalg.advanced import matmul
        assert np.array_equal(matmul(a, b, alpha=2.0), 2 * (a @ b))
        """))
    (ex / "example02_types.py").write_text(textwrap.dedent("""\
        import numpy as np
        import nvmath
        t = nvmath.CudaDataType.CUDA_R_64F
        d = nvmath.linalg.advanced.matmul(np.ones((2, 3)), np.ones((3, 2)), options={"result_type": t})
        assert d.dtype == np.float64 and (d == 3).all()
        """))
    (ex / "example03_wrong.py").write_text("import nvmath\nnvmath.linalg.advanced.matmul(1, 2)\n")
    (ex / "example_utils.py").write_text("raise SystemExit('a helper, not an example')\n")
    out = tmp_path / "table.md"
    assert census.main([str(ex), "--out", str(out), "--jobs", "2"]) == 0
    table = out.read_text()
    assert "| example01_numpy.py | ok |  |" in table
    assert "| example02_types.py | ok |  |" in table
    assert "| example03_wrong.py | TypeError: a: unsupported operand of type builtins.int" in table
    assert "example_utils" not in table
    assert "3 examples: 2 ran to their end, 1 failed" in table
