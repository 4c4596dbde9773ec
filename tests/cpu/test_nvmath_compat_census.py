# SPDX-License-Identifier: Apache-2.0
"""tests/nvmath_examples_census.py on examples of our own writing (nothing of nvmath-python is
stored here): only import lines change, each example runs under the simulator with its kernels
recorded and linked for sm_90, and the table reports results and causes."""

import textwrap

from tests import nvmath_examples_census as census


def test_only_import_lines_change():
    text = textwrap.dedent("""\
        from nvmath.device import FFT, float32x2
        import nvmath.device as nd
            from nvmath.device.common_cuda import Dim3
        from nvmath.devices import other
        name = "nvmath.device"  # from nvmath.device import FFT
        """)
    new, changed = census.rewrite_imports(text)
    assert changed == 3
    assert new.splitlines() == [
        "from nvmath_device import FFT, float32x2", "import nvmath_device as nd",
        "    from nvmath_device.common_cuda import Dim3", "from nvmath.devices import other",
        'name = "nvmath.device"  # from nvmath.device import FFT']


def test_causes():
    assert census.classify("a.py", "ok") == ""
    assert "random" in census.classify("curand_x.py", "AttributeError: x")
    assert "a missing name" in census.classify("g.py", "ModuleNotFoundError: No module named 'nvmath_device.common'")
    assert "pipelines" in census.classify("g.py", "ImportError: cannot import name 'DevicePipeline' from 'x'")
    assert "cuda.coop" in census.classify("g.py", "ImportError: cannot import name 'coop' from 'cuda'")
    assert "nvmath-python itself" in census.classify("g.py", "ModuleNotFoundError: No module named 'nvmath'")
    assert "GPU/driver" in census.classify("g.py", "AttributeError: 'FakeCUDAKernel' object has no attribute 'compile'")
    assert census.classify("cufftdx_x.py", "TypeError: y").startswith("compat")


def test_census_of_two_examples(tmp_path, capsys):
    ex = tmp_path / "device"
    ex.mkdir()
    (ex / "common.py").write_text("from nvmath.device import float32x2\n")
    (ex / "vector_scale.py").write_text(textwrap.dedent("""\
        import numpy as np
        from numba import cuda
        from common import float32x2

        @cuda.jit
        def scale(x, y):
            t = cuda.threadIdx.x
            y[t] = float32x2(x[t].real, x[t].imag) * 2

        x = np.arange(4).astype(np.complex64) * (1 + 1j)
        y = np.zeros_like(x)
        scale[1, 4](x, y)
        assert np.array_equal(y, 2 * x), y
        """))
    (ex / "missing_module.py").write_text("from nvmath.device.common import no_such_name\n")
    out = tmp_path / "table.md"
    assert census.main([str(ex), "--out", str(out), "--timeout", "240"]) == 0
    table = out.read_text()
    assert "| vector_scale.py | ok | 1/1 linked |  |" in table
    assert ("| missing_module.py | ImportError: cannot import name 'no_such_name' from 'nvmath_device.common'"
            in table and "| cuBLASDx tensor API: a missing name |" in table), table
    assert "2 examples: 1 ran ok under the simulator, 1 failed; 1 with every recorded kernel linked" in table
