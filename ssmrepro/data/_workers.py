"""Library (data): an ordered, lazy map over chunk indices 0, 1, 2, ... (optionally in processes).

Generators split their work into fixed chunks whose RNG depends only on ``(seed, chunk index)``, so
the output is the same for any number of workers: results are always consumed in chunk order.
"""

from __future__ import annotations

import multiprocessing as mp
import os
from collections import deque
from collections.abc import Callable, Iterator
from concurrent.futures import ProcessPoolExecutor, wait
from concurrent.futures.process import BrokenProcessPool
from typing import TypeVar

T = TypeVar("T")


class WorkerDied(RuntimeError):
    """A worker process of ``iter_chunks`` ended without returning its chunk (``kill -9``, the
    OOM killer): concurrent.futures' BrokenProcessPool reached the user as an 80-line
    traceback."""


def iter_chunks(fn: Callable[[int], T], workers: int = 1, ahead: int | None = None) -> Iterator[T]:
    """Yield ``fn(0), fn(1), ...`` forever, in order; stop by closing / abandoning the iterator.

    With ``workers > 1`` the calls run in ``spawn``-ed processes (safe when torch or threads are
    loaded in the parent), at most ``ahead`` (default ``2 * workers``) chunks ahead of the
    consumer, so at most that many chunks are computed in vain at the end. ``fn`` must be
    picklable (a module-level function or a ``functools.partial`` of one).
    """
    if workers <= 1:
        c = 0
        while True:
            yield fn(c)
            c += 1
    from ..signals import STOP_SIGNALS
    from ..util import hangups_ignored, tracker_revived, worker_start

    ctx = mp.get_context("spawn")  # a worker dies with its parent: killed with -9, the parent
    # left them blocked for ever on the full result pipe (orphans holding a chunk in memory)
    with hangups_ignored(STOP_SIGNALS):  # its queues start the resource tracker: one ignoring
        pool = ProcessPoolExecutor(max_workers=workers, mp_context=ctx,  # hang-ups
                                   initializer=worker_start, initargs=(os.getpid(), STOP_SIGNALS))
    with pool as ex:
        pending: deque = deque()
        c = 0
        try:
            while True:
                while len(pending) < max(ahead or 2 * workers, workers):
                    pending.append(ex.submit(fn, c))
                    c += 1
                try:
                    chunk = pending.popleft().result()
                except BrokenProcessPool:
                    raise WorkerDied(f"a worker process died (killed, or out of memory) before "
                                     f"returning chunk {c - len(pending) - 1}") from None
                yield chunk
        finally:
            for f in pending:
                f.cancel()
            continued(ex)
            wait(pending)  # the chunks running still (the pool's shutdown waits for them too)
            tracker_revived()  # a tracker killed meanwhile: started again, quietly, before the
            # pool shuts down and its queues' semaphores are forgotten (after it, the pool's
            # shutdown had Python start one, which printed a KeyError traceback per semaphore)


def continued(pool: ProcessPoolExecutor) -> None:
    """Send SIGCONT to the worker processes of ``pool``: one stopped (`kill -STOP` of it, a
    debugger) never returned the chunk it held, which the generator, closed (Ctrl-C, SIGTERM),
    waits for, and its pool's shutdown too: the command never ended."""
    import signal

    for pid in list(getattr(pool, "_processes", None) or ()):  # (the pool's own table)
        try:
            os.kill(pid, signal.SIGCONT)
        except OSError:  # (gone meanwhile)
            pass
