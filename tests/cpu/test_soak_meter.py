# SPDX-License-Identifier: Apache-2.0
"""The soak tests' meter (tests.harness.soak_rounds) on scripted readings: a leak that grows in
every round fails, another process's one-off allocation does not, host growth is judged on the
first round."""

import pytest

from tests import harness

MIB = 1 << 20


def _scripted(monkeypatch, rss, dev):
    """Readings in order: before and after each round."""
    rss, dev = iter(rss), iter(dev)
    monkeypatch.setattr(harness, "rss_bytes", lambda: next(rss))
    monkeypatch.setattr(harness, "device_used_bytes", lambda: next(dev))


def test_a_step_from_another_process_passes_in_the_next_round(monkeypatch):
    _scripted(monkeypatch, [0, 0, 0, 0], [100 * MIB, 400 * MIB, 400 * MIB, 402 * MIB])
    calls = []
    growths = harness.soak_rounds("x", lambda: calls.append(1), 8 * MIB, 8 * MIB)
    assert growths == [300 * MIB, 2 * MIB] and len(calls) == 2


def test_growth_in_every_round_fails_naming_each(monkeypatch):
    _scripted(monkeypatch, [0] * 6, [0, 10 * MIB, 10 * MIB, 20 * MIB, 20 * MIB, 30 * MIB])
    with pytest.raises(AssertionError, match=r"leaky: device memory grew in each of 3 rounds: "
                                             r"10\.00, 10\.00, 10\.00 MiB"):
        harness.soak_rounds("leaky", lambda: None, 8 * MIB, 8 * MIB)


def test_host_growth_over_the_first_round_fails(monkeypatch):
    _scripted(monkeypatch, [0, 30 * MIB], [0, 0])
    with pytest.raises(AssertionError, match=r"fat: host RSS grew 30\.00 MiB"):
        harness.soak_rounds("fat", lambda: None, 20 * MIB, 8 * MIB)
