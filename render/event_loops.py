"""The asyncio event loops a run under Pulumi mocks needs, owned for the run and closed when it ends.

Pulumi's SDK sends every registration through the loop's default thread pool, and its mock monitor creates one event
loop per pool thread on first use (pulumi/runtime/sync_await.py, _ensure_event_loop). Nobody closes those loops: the
interpreter collects them at exit, in no particular order, and when a loop's self-pipe socket goes first the loop's
__del__ prints `Exception ignored in: BaseEventLoop.__del__ ... ValueError: Invalid file descriptor: -1` after a
successful render. Here every loop is created by us and closed by us, while its sockets are still open.
"""

import asyncio
import contextlib
from collections.abc import Iterator
from concurrent.futures import ThreadPoolExecutor


@contextlib.contextmanager
def owned_event_loops() -> Iterator[None]:
    """Runs the block on a fresh event loop whose pool threads get their own loops; closes them all afterwards."""
    thread_loops: list[asyncio.AbstractEventLoop] = []

    def give_the_thread_a_loop() -> None:
        loop = asyncio.new_event_loop()
        asyncio.set_event_loop(loop)
        thread_loops.append(loop)

    loop = asyncio.new_event_loop()
    executor = ThreadPoolExecutor(initializer=give_the_thread_a_loop)
    loop.set_default_executor(executor)
    asyncio.set_event_loop(loop)
    try:
        yield
    except BaseException:
        # A program that fails stops at its first failed registration: the rest of its outputs never finish, and
        # asyncio would report each of them when collected ("Task was destroyed but it is pending!", "exception was
        # never retrieved"), long after the run's own error said what went wrong.
        loop.set_exception_handler(lambda _loop, _context: None)
        # Tasks that never started would warn, once collected, that their coroutine was never awaited: cancelled and
        # run to their end here, as asyncio.run does with what a program leaves behind.
        pending = asyncio.all_tasks(loop)
        for task in pending:
            task.cancel()
        loop.run_until_complete(asyncio.gather(*pending, return_exceptions=True))
        raise
    finally:
        executor.shutdown(wait=True)
        for thread_loop in thread_loops:
            thread_loop.close()
        loop.close()
        # The next run, or the next test, starts from no loop rather than a closed one.
        asyncio.set_event_loop(None)
