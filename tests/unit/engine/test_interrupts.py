import os
import signal

import pytest

from stash_core.interrupts import held_interrupts


@pytest.fixture
def ctrl_c_raises():
    """Python's own SIGINT handler, whatever the test run inherited (a background job ignores SIGINT)."""
    before = signal.signal(signal.SIGINT, signal.default_int_handler)
    yield
    signal.signal(signal.SIGINT, before)


def test_an_interrupt_is_held_until_the_block_is_done(ctrl_c_raises):
    done = []
    with held_interrupts() as interrupted:
        os.kill(os.getpid(), signal.SIGINT)
        done.append("result file and database")  # still runs: the interrupt did not raise here
    assert done and interrupted == [signal.SIGINT]
    assert signal.getsignal(signal.SIGINT) is signal.default_int_handler
    with pytest.raises(KeyboardInterrupt):  # after the block Ctrl-C interrupts again
        os.kill(os.getpid(), signal.SIGINT)


def test_no_interrupt_leaves_the_list_empty(ctrl_c_raises):
    with held_interrupts() as interrupted:
        pass
    assert interrupted == []
