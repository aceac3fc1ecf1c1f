"""The time limit on a user's model code leaves the caller's own alarm as it found it, less the time spent."""

from __future__ import annotations

import signal
import time

import pytest

from stash_core.zoo.user_limits import UserModelError, limited_user_code


@pytest.fixture
def callers_alarm():
    """A SIGALRM handler of the caller's that counts its alarms; the timer disarmed afterwards."""
    fired: list[float] = []
    previous = signal.signal(signal.SIGALRM, lambda signum, frame: fired.append(time.monotonic()))
    yield fired
    signal.setitimer(signal.ITIMER_REAL, 0)
    signal.signal(signal.SIGALRM, previous)


def test_the_callers_timer_keeps_running_less_the_time_the_code_took(callers_alarm):
    signal.setitimer(signal.ITIMER_REAL, 30.0)
    with limited_user_code("model factory f.py:make"):
        time.sleep(0.2)
    left, interval = signal.getitimer(signal.ITIMER_REAL)
    assert 29.0 < left < 29.85 and interval == 0
    assert callers_alarm == []


def test_a_callers_alarm_due_during_the_code_fires_right_after_it(callers_alarm):
    signal.setitimer(signal.ITIMER_REAL, 0.05)
    with limited_user_code("model factory f.py:make"):
        time.sleep(0.2)  # the caller's alarm came due here: the limit's handler held the timer
    assert callers_alarm == []
    deadline = time.monotonic() + 2
    while not callers_alarm and time.monotonic() < deadline:
        time.sleep(0.01)
    assert len(callers_alarm) == 1


def test_without_a_callers_timer_none_is_left_and_the_limit_still_holds(callers_alarm, monkeypatch):
    monkeypatch.setenv("STASH_USER_CODE_LIMIT_S", "0.1")
    with pytest.raises(UserModelError, match="did not finish within 0.1 s"):
        with limited_user_code("model factory f.py:make"):
            time.sleep(5)
    assert signal.getitimer(signal.ITIMER_REAL) == (0.0, 0.0) and callers_alarm == []


@pytest.mark.parametrize("where", ["factory", "import"])
def test_a_base_exception_of_the_models_own_is_its_error_in_this_process_too(tmp_path, where):
    """`stash_core.predict(model="f.py:make")` let a BaseException the factory raised through, where the
    command (whose child process catches everything) said it as the model's error."""
    from stash_core.zoo.user import call_user_factory

    raising = "raise BaseException('base')\n"
    body = f"def make():\n    {raising}" if where == "factory" else f"{raising}def make():\n    pass\n"
    (tmp_path / "m.py").write_text(body)
    with pytest.raises(UserModelError, match="BaseException: base"):
        call_user_factory(f"{tmp_path}/m.py:make", None, 10)
    (tmp_path / "k.py").write_text("def make():\n    raise KeyboardInterrupt\n")
    with pytest.raises(KeyboardInterrupt):  # Ctrl-C is not the model's error: it stops the caller
        call_user_factory(f"{tmp_path}/k.py:make", None, 10)


def test_a_factory_past_its_limit_is_not_built_a_second_time(tmp_path, monkeypatch):
    """A factory past its time limit on the meta device was built again for real (as one that needs real
    tensors is), so a hanging one held the page or command for twice the limit its message stated."""
    from stash_core.zoo.build import describe_model

    calls = tmp_path / "calls.txt"
    (tmp_path / "m.py").write_text(
        "import time\n"
        "def make():\n"
        f"    with open({str(calls)!r}, 'a') as f:\n"
        "        f.write('call\\n')\n"
        "    time.sleep(30)\n"
    )
    monkeypatch.setenv("STASH_USER_CODE_LIMIT_S", "0.3")
    with pytest.raises(UserModelError, match="did not finish within 0.3 s"):
        describe_model(f"{tmp_path / 'm.py'}:make")
    assert calls.read_text().splitlines() == ["call"]
