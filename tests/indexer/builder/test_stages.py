from __future__ import annotations

import os
import signal

import pytest

from indexer.builder.stages import interrupts_held


@pytest.fixture()
def ctrl_c_raises():
    """Ctrl-C as in a terminal (a background run, as CI's, inherits SIGINT ignored)."""
    before = signal.signal(signal.SIGINT, signal.default_int_handler)
    yield
    signal.signal(signal.SIGINT, before)


def test_an_interrupt_inside_a_held_block_acts_after_it(ctrl_c_raises: None) -> None:
    steps = []
    with pytest.raises(KeyboardInterrupt):
        with interrupts_held():
            os.kill(os.getpid(), signal.SIGINT)
            steps.append("after the signal")  # the block goes on to its end
        steps.append("never")
    assert steps == ["after the signal"]
    assert signal.getsignal(signal.SIGINT) is signal.default_int_handler  # restored


def test_a_held_block_without_signals_changes_nothing() -> None:
    before = signal.getsignal(signal.SIGTERM)
    with interrupts_held():
        pass
    assert signal.getsignal(signal.SIGTERM) == before


def test_an_ignored_interrupt_stays_ignored() -> None:
    before = signal.signal(signal.SIGINT, signal.SIG_IGN)
    try:
        with interrupts_held():
            os.kill(os.getpid(), signal.SIGINT)
        assert signal.getsignal(signal.SIGINT) == signal.SIG_IGN
    finally:
        signal.signal(signal.SIGINT, before)
