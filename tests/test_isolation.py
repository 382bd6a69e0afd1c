"""The suite's guards (tests/conftest.py) fail a test that leaves process state behind for the
tests after it, and undo the change, so that only that test fails."""

import signal
from pathlib import Path

pytest_plugins = ["pytester"]

CONFTEST = Path(__file__).with_name("conftest.py").read_text()


def test_a_test_that_leaves_a_signal_handler_or_env_var_fails_alone(pytester):
    pytester.makeconftest(CONFTEST)
    pytester.makepyfile(
        """
        import os, signal

        def test_ignores_sigterm():
            signal.signal(signal.SIGTERM, signal.SIG_IGN)

        def test_sets_a_variable():
            os.environ["AIAYN_LEFT_BEHIND"] = "1"

        def test_after_them():
            assert signal.getsignal(signal.SIGTERM) is signal.SIG_DFL
            assert "AIAYN_LEFT_BEHIND" not in os.environ
        """
    )
    result = pytester.runpytest_inprocess("-p", "no:randomly", "-p", "no:cacheprovider")
    result.assert_outcomes(passed=3, errors=2)
    result.stdout.fnmatch_lines(["*left process state changed: SIGTERM*"])
    result.stdout.fnmatch_lines(["*left process state changed: environment*"])
    assert signal.getsignal(signal.SIGTERM) is signal.SIG_DFL


def test_a_thread_left_running_fails_its_module(pytester):
    pytester.makeconftest(CONFTEST)
    pytester.makepyfile(
        """
        import threading

        stop = threading.Event()

        def test_starts_a_thread():
            threading.Thread(target=stop.wait, name="left-behind").start()

        def test_then_stops_it():
            pass

        def teardown_module():
            stop.set()
        """
    )
    result = pytester.runpytest_inprocess("-p", "no:randomly", "-p", "no:cacheprovider")
    result.stdout.fnmatch_lines(["*threads still running after the module: *left-behind*"])
