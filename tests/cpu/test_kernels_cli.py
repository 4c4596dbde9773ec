# SPDX-License-Identifier: Apache-2.0
"""``python -m kernels``: arguments checked before any work, --plot without matplotlib, and
GPU timing with CUDA events instead of triton (not a dependency)."""

import ast
import pathlib
import sys

import pytest

import kernels
from kernels import __main__ as cli


@pytest.fixture
def no_work(monkeypatch):
    """Any filtering (work) fails the test; the simulator is 'on' so no re-run happens."""
    monkeypatch.setenv("NUMBA_ENABLE_CUDASIM", "1")

    def boom(*a, **k):
        raise AssertionError("work started before the arguments were checked")

    monkeypatch.setattr(kernels, "fft_convolve", boom)


@pytest.mark.parametrize("argv, flag", [
    (["--batch", "3", "--n", "100"], "--n must be larger than 2 * --taps = 126"),  # printed NaN
    (["--n", "97"], "--n must be an FFT length"),  # ended in a traceback
    (["--n", "0"], "--n must be an FFT length"),
    (["--batch", "0"], "--batch must be >= 1"),
    (["--batch", "-2"], "--batch must be >= 1"),
    (["--taps", "0"], "--taps must be >= 1"),
    (["--taps", "200"], "--taps must be smaller than n / 2"),  # the default n
    (["--method", "dft"], "argument --method: invalid choice: 'dft'"),
    (["--method", "direct", "--taps", "129", "--n", "512"],
     "--method direct cannot run here (method='direct': h has 129 taps; at most 128"),
])
def test_bad_arguments_are_argparse_errors(argv, flag, no_work, capsys):
    with pytest.raises(SystemExit) as e:
        cli.main(argv)
    assert e.value.code == 2
    err = capsys.readouterr().err
    assert flag in err and "usage: python -m kernels" in err


def test_the_97_error_names_the_nearest_sizes(no_work, capsys):
    with pytest.raises(SystemExit):
        cli.main(["--n", "97"])
    assert "the nearest to 97 are 96 and 100" in capsys.readouterr().err


def test_plot_without_matplotlib_names_the_install_command(no_work, monkeypatch, capsys):
    monkeypatch.setitem(sys.modules, "matplotlib", None)  # import matplotlib -> ImportError
    with pytest.raises(SystemExit) as e:
        cli.main(["--plot", "out.png"])
    assert e.value.code == 2
    assert 'pip install "numba-mathdx[plot]"' in capsys.readouterr().err


def test_no_triton_anywhere_in_the_cli():
    """triton is no dependency: the CLI imports no triton module (the GPU path used do_bench)."""
    tree = ast.parse(pathlib.Path(cli.__file__).read_text())
    names = [a.name for n in ast.walk(tree) if isinstance(n, ast.Import) for a in n.names]
    names += [n.module or "" for n in ast.walk(tree) if isinstance(n, ast.ImportFrom)]
    assert not [m for m in names if m.split(".")[0] == "triton"]


def test_median_ms_times_inner_calls_behind_an_untimed_lead_call():
    """Each sample: one untimed call (the GPU is busy while the host prepares the next), an event,
    ``inner`` calls, an event; the sample is the time between the events over ``inner``."""
    log = []

    class Ev:
        t = 0.0

        def record(self):
            Ev.t += 1.0
            self.at = Ev.t
            log.append("record")

        def synchronize(self):
            log.append("sync")

    calls = []

    def fn():
        calls.append(1)
        log.append("call")

    ms = cli.median_ms(fn, warmup=2, repeat=5, inner=3, event=Ev,
                       elapsed_ms=lambda a, b: (b.at - a.at) * len(calls))
    assert len(calls) == 2 + 5 * (1 + 3)
    assert log[:2] == ["call"] * 2
    assert log[2:] == (["call", "record"] + ["call"] * 3 + ["record", "sync"]) * 5
    # sample k (1-based): events one apart, len(calls) = 2 + 4k at the reading, divided by inner=3
    assert ms == (2 + 4 * 3) / 3
