from __future__ import annotations

import os
import signal

import pytest

from indexer.builder.stages import interrupts_held


def test_an_interrupt_inside_a_held_block_acts_after_it() -> None:
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
