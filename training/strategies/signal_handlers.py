"""Put back the process's SIGINT/SIGTERM handlers after code that replaces them for good.

Horovod's Gloo launcher (``horovod.runner.gloo_run.register_shutdown_event``, reached through
``horovod.spark.run``) installs handlers that only set an event telling its ranks to stop, and never reinstalls
the old ones. Left in place, the driver ignores Ctrl-C and SIGTERM (how Airflow stops a task) from then on, and
so does every process forked from it: multiprocessing pool workers then survive ``Pool.terminate()`` and the
pool's ``join()`` waits forever.
"""

from __future__ import annotations

import signal
import threading
from collections.abc import Iterator, Sequence
from contextlib import contextmanager

STOP_SIGNALS = (signal.SIGINT, signal.SIGTERM)


@contextmanager
def restored_signal_handlers(signals: Sequence[signal.Signals] = STOP_SIGNALS) -> Iterator[None]:
    """Run the block, then reinstall the handlers ``signals`` had before it, however the block ends."""
    if threading.current_thread() is not threading.main_thread():
        yield  # only the main thread may set handlers, so nothing in the block can have replaced them
        return
    previous = {signum: signal.getsignal(signum) for signum in signals}
    try:
        yield
    finally:
        for signum, handler in previous.items():
            if handler is not None:  # None: installed from C, which Python cannot reinstall
                signal.signal(signum, handler)
