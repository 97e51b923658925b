"""A run under mocks leaves no event loop for the interpreter to collect at exit, where it may print a traceback."""

import asyncio
import gc

from tests.conftest import BASE, run_values


def open_event_loops() -> list[asyncio.AbstractEventLoop]:
    gc.collect()
    return [o for o in gc.get_objects() if isinstance(o, asyncio.BaseEventLoop) and not o.is_closed()]


def test_a_run_closes_every_event_loop_it_made():
    run_values(BASE)
    assert open_event_loops() == []


def test_a_second_run_in_one_process_gets_a_working_event_loop():
    assert run_values(BASE).outputs["clusterName"] == run_values(BASE).outputs["clusterName"] == "lab-test"
