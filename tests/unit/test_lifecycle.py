import os
import signal
import time

import pytest

from refarch import lifecycle
from refarch.lifecycle import guarded, in_phase


def test_teardown_runs_on_success_and_failure():
    calls = []
    with guarded(lambda: calls.append("down"), keep=lambda: False):
        pass
    with pytest.raises(RuntimeError):
        with guarded(lambda: calls.append("down"), keep=lambda: False):
            raise RuntimeError("apply failed")
    assert calls == ["down", "down"]


def test_sigterm_becomes_interrupt_and_still_tears_down():
    calls = []
    with pytest.raises(KeyboardInterrupt, match="SIGTERM"):
        with guarded(lambda: calls.append("down"), keep=lambda: False):
            os.kill(os.getpid(), signal.SIGTERM)
            time.sleep(5)
    assert calls == ["down"]
    assert signal.getsignal(signal.SIGTERM) in (signal.SIG_DFL, signal.default_int_handler) or callable(
        signal.getsignal(signal.SIGTERM))


def test_signals_during_teardown_are_ignored():
    calls = []

    def teardown():
        os.kill(os.getpid(), signal.SIGINT)  # an impatient second Ctrl-C
        calls.append("finished")

    with guarded(teardown, keep=lambda: False):
        pass
    assert calls == ["finished"]


def test_kept_cluster_is_not_torn_down():
    calls = []
    with pytest.raises(ValueError):
        with guarded(lambda: calls.append("down"), keep=lambda: True):
            raise ValueError
    assert calls == []


def test_teardown_error_does_not_hide_the_original_error(capsys):
    def teardown():
        raise RuntimeError("destroy failed")

    with pytest.raises(KeyError):
        with guarded(teardown, keep=lambda: False):
            raise KeyError("configure failed")
    assert "destroy failed" in capsys.readouterr().err


def test_the_first_interrupt_is_recorded_with_its_phase_and_later_ones_ignored():
    calls = []
    with pytest.raises(KeyboardInterrupt, match="SIGTERM"):
        with guarded(lambda: calls.append("down"), keep=lambda: False):
            with in_phase("smoke"):
                try:
                    os.kill(os.getpid(), signal.SIGTERM)
                    time.sleep(5)
                finally:
                    os.kill(os.getpid(), signal.SIGINT)  # tox's SIGINT after the runner's SIGTERM
                    time.sleep(0.2)
    assert lifecycle.INTERRUPTED == {"signal": "SIGTERM", "phase": "smoke"}
    assert calls == ["down"]


def test_a_new_lifecycle_starts_uninterrupted():
    with guarded(lambda: None, keep=lambda: False):
        assert lifecycle.INTERRUPTED == {}
        with in_phase("deploy"):
            assert lifecycle.current_phase() == "deploy"


def test_an_output_pipe_without_reader_is_noticed():
    """Plain tox killed by SIGTERM closes the read end of pytest's output:
    the suite notices before its teardown writes (and would raise)."""
    import os

    from refarch import lifecycle

    read, write = os.pipe()
    try:
        assert not lifecycle.outputs_lost((write,))
        os.close(read)
        assert lifecycle.outputs_lost((write,))
    finally:
        os.close(write)
