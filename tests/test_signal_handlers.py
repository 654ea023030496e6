"""Horovod's Gloo launcher replaces SIGINT/SIGTERM for good; every Horovod run must give the old handlers back.

Real ``horovod.spark.run`` calls on the shared local[2] Spark session, of a trivial function rather than a model:
afterwards the handlers are the ones from before, a forked child still dies of SIGTERM, speech synthesis still
finishes (even under Horovod's handlers), and a driver process still stops on SIGTERM.
"""

from __future__ import annotations

import multiprocessing
import os
import signal
import subprocess
import sys
import textwrap
import threading
import time
from pathlib import Path

import pytest

from training import REPO_ROOT
from training.config import RunSpec
from training.speech.synthesis.corpus import synthesize_corpus
from training.strategies import horovod as horovod_strategy
from training.strategies.signal_handlers import STOP_SIGNALS, restored_signal_handlers

pytestmark = pytest.mark.spark


def stop_handlers() -> dict[signal.Signals, object]:
    return {signum: signal.getsignal(signum) for signum in STOP_SIGNALS}


@pytest.fixture(scope="module")
def horovod_run(spark) -> dict[str, dict]:
    """Handlers before, inside (once Horovod returned) and after one real Horovod run, wrapped as the strategy does."""
    import horovod.spark

    before = stop_handlers()
    with restored_signal_handlers():
        horovod.spark.run(os.getpid, num_proc=2, use_gloo=True, verbose=0)
        inside = stop_handlers()
    return {"before": before, "inside": inside, "after": stop_handlers()}


# --- The context manager on its own --------------------------------------------------------------------------


def test_handlers_set_inside_the_block_are_undone_also_when_it_raises():
    before = stop_handlers()
    with pytest.raises(ZeroDivisionError), restored_signal_handlers():
        signal.signal(signal.SIGTERM, lambda signum, frame: None)
        signal.signal(signal.SIGINT, signal.SIG_IGN)
        1 / 0  # noqa: B018 (the block fails after replacing the handlers)
    assert stop_handlers() == before


def test_outside_the_main_thread_it_is_a_no_op():
    errors: list[BaseException] = []

    def use_it() -> None:
        try:
            with restored_signal_handlers():
                pass
        except BaseException as error:  # signal.signal would raise ValueError here
            errors.append(error)

    thread = threading.Thread(target=use_it)
    thread.start()
    thread.join()
    assert errors == []


# --- After real Horovod runs ---------------------------------------------------------------------------------


def test_horovod_replaces_the_handlers_and_the_context_manager_puts_them_back(horovod_run):
    assert horovod_run["inside"] != horovod_run["before"]  # the leak this guards against is still there
    assert all(handler.__qualname__.startswith("register_shutdown_event")
               for handler in horovod_run["inside"].values())
    assert horovod_run["after"] == horovod_run["before"]


def test_a_child_forked_after_a_horovod_run_dies_of_sigterm(horovod_run):
    # What multiprocessing.Pool.terminate() relies on: with Horovod's handler inherited, the child lived on and
    # the pool's join() waited forever.
    child = multiprocessing.get_context("fork").Process(target=time.sleep, args=(120,))
    child.start()
    try:
        child.terminate()
        child.join(30)
        assert child.exitcode == -signal.SIGTERM
    finally:
        if child.is_alive():
            child.kill()
            child.join()


def test_speech_synthesis_finishes_after_a_horovod_run_even_under_horovods_handlers(horovod_run, tmp_path):
    from horovod.runner.gloo_run import register_shutdown_event

    recipe = {"speakers": 3, "words": ("yes", "go"), "repetitions": 1, "processes": 2}
    with restored_signal_handlers():
        register_shutdown_event()  # exactly what horovod.spark.run leaves behind without the fix
        first = synthesize_corpus(tmp_path / "first", **recipe)
        second = synthesize_corpus(tmp_path / "second", **recipe)
    assert first["utterances"] == second["utterances"] == 3 * 2
    assert first["data_version"] == second["data_version"]


@pytest.mark.filterwarnings("ignore::pytest.PytestUnhandledThreadExceptionWarning")  # Horovod cancels its Spark job
def test_the_horovod_strategy_gives_the_handlers_back_when_a_rank_fails(spark, monkeypatch):
    def failing_rank(*args):
        raise SystemExit(3)

    monkeypatch.setattr(horovod_strategy, "train_rank", failing_rank)
    before = stop_handlers()
    with pytest.raises(RuntimeError, match=r"a rank exited .rank \d, exit code 3."):
        horovod_strategy.HorovodStrategy().train(RunSpec(workers_per_node=2), "unused-shards", None, "unused-run",
                                                 spark)
    assert stop_handlers() == before


DRIVER = textwrap.dedent("""
    import os, time
    from training.jobs.spark_session import spark_session
    from training.strategies.signal_handlers import restored_signal_handlers
    import horovod.spark

    spark_session("signal-handlers-test", master="local[2]")
    with restored_signal_handlers():
        horovod.spark.run(os.getpid, num_proc=2, use_gloo=True, verbose=0)
    print("horovod run finished", flush=True)
    time.sleep(600)
""")


def test_a_driver_process_stops_on_sigterm_after_a_horovod_run(tmp_path):
    log = tmp_path / "driver.log"
    environment = {**os.environ, "CLOUDBURST_SPARK_UI": "false", "CLOUDBURST_SPARK_PROGRESS": "false"}
    with log.open("wb") as output:
        driver = subprocess.Popen([sys.executable, "-c", DRIVER], cwd=REPO_ROOT, env=environment, stdout=output,
                                  stderr=subprocess.STDOUT, start_new_session=True)
    try:
        wait_for_line(log, "horovod run finished", driver, seconds=300)
        driver.send_signal(signal.SIGTERM)
        assert driver.wait(timeout=30) == -signal.SIGTERM
    finally:
        if driver.poll() is None:
            os.killpg(driver.pid, signal.SIGKILL)
            driver.wait()


def wait_for_line(log: Path, line: str, process: subprocess.Popen, seconds: float) -> None:
    deadline = time.monotonic() + seconds
    while line not in log.read_text(errors="replace"):
        if process.poll() is not None:
            pytest.fail(f"the driver exited with {process.returncode} first:\n{log.read_text()[-3000:]}")
        if time.monotonic() > deadline:
            pytest.fail(f"no {line!r} after {seconds} s:\n{log.read_text()[-3000:]}")
        time.sleep(0.5)
