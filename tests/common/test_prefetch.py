import threading
import time

import pytest

from lcflow.common.prefetch import prefetched, written_behind


def test_results_come_in_order_and_the_next_load_overlaps_the_consumer():
    started: list[int] = []

    def load(k: int) -> int:
        started.append(k)
        time.sleep(0.01 * (3 - k % 3))  # later keys finish first if run in parallel
        return k * k

    seen = []
    for key, value in prefetched(load, range(6)):
        if key == 2:
            time.sleep(0.2)  # the consumer is busy: key 3 is being read meanwhile
            assert 3 in started and 4 not in started  # one ahead, never more
        seen.append((key, value))
    assert seen == [(k, k * k) for k in range(6)]


def test_loads_run_outside_the_consumers_thread():
    threads = set()
    list(prefetched(lambda k: threads.add(threading.current_thread().name), range(3)))
    assert threads and threading.current_thread().name not in threads
    threads.clear()
    list(prefetched(lambda k: threads.add(threading.current_thread().name), range(3), ahead=0))
    assert threads == {threading.current_thread().name}


def test_a_failing_load_raises_where_its_result_is_taken():
    def load(k: int) -> int:
        if k == 2:
            raise ValueError("window 2 unreadable")
        return k

    seen = []
    with pytest.raises(ValueError, match="window 2"):
        for key, _ in prefetched(load, range(5)):
            seen.append(key)
    assert seen == [0, 1]


def test_stopping_early_leaves_no_load_running():
    loaded = []

    def load(k: int) -> int:
        time.sleep(0.05)
        loaded.append(k)
        return k

    gen = prefetched(load, range(100))
    assert next(gen) == (0, 0)
    gen.close()  # what a consumer's exception or break does
    count = len(loaded)
    time.sleep(0.2)
    assert len(loaded) == count <= 2


def test_stopping_early_tells_the_running_load_so_it_can_end_early():
    """A cancelled job unwinds within its grace period only if the load in flight can end early: it is
    told through ``stop``, which a load to the end is never given."""
    stop = threading.Event()
    started = threading.Event()
    steps: list[int] = []

    def load(k: int) -> int:
        if k == 1:
            started.set()
            for step in range(200):  # 10 s unless told to stop
                if stop.is_set():
                    break
                steps.append(step)
                time.sleep(0.05)
        return k

    gen = prefetched(load, range(3), stop=stop)
    assert next(gen) == (0, 0)
    assert started.wait(timeout=10)
    gen.close()
    assert stop.is_set() and len(steps) < 200

    finished = threading.Event()
    assert [k for k, _ in prefetched(lambda k: k, range(3), stop=finished)] == [0, 1, 2]
    assert not finished.is_set()


def test_writes_run_in_order_behind_the_caller_one_pending_at_most():
    done: list[int] = []
    events: list[str] = []
    released = [threading.Event() for _ in range(4)]

    def write(k: int) -> None:
        assert threading.current_thread().name.startswith("lcflow-write")
        # a write finishes only once the caller has recorded its submission, so the order below does
        # not hang on the machine's speed; a submit that waited for its own write would wait 10 s here
        # and record it as done
        released[k].wait(timeout=10)
        done.append(k)

    with written_behind() as submit:
        for k in range(4):
            submit(write, k)
            events.append(f"submitted {k} after {len(done)} done")
            released[k].set()
    assert done == [0, 1, 2, 3]  # all finished on leaving, in order
    # each call waited for the previous write, not for its own: one write pending at most
    assert events == [f"submitted {k} after {k} done" for k in range(4)]


def test_a_failing_write_raises_at_the_next_call_or_on_leaving():
    def write(k: int) -> None:
        if k == 1:
            raise OSError("disk full writing window 1")

    with pytest.raises(OSError, match="window 1"):
        with written_behind() as submit:
            submit(write, 0)
            submit(write, 1)
            submit(write, 2)  # waits for write 1: its error surfaces here
            pytest.fail("write 1's error was not raised")
    with pytest.raises(OSError, match="window 1"):
        with written_behind() as submit:
            submit(write, 1)  # the last write: its error surfaces on leaving
