"""Read ahead and write behind: the next piece of work is loaded in a background thread while the
current one is computed, and the previous result is written (compressed) in another. GDAL reads and
writes and numpy all release the GIL, so reading, computing and writing overlap even in one process;
memory holds the piece being read, the one being computed and the one being written, never more."""

from collections import deque
from collections.abc import Callable, Iterable, Iterator
from concurrent.futures import ThreadPoolExecutor
from contextlib import contextmanager
from threading import Event
from typing import TypeVar

K = TypeVar("K")
R = TypeVar("R")


def prefetched(
    load: Callable[[K], R], keys: Iterable[K], ahead: int = 1, stop: Event | None = None
) -> Iterator[tuple[K, R]]:
    """``(key, load(key))`` for each key in order, with ``ahead`` further loads running meanwhile, each in
    a thread of its own (``load`` must then be safe to run in several threads at once).

    An exception raised by ``load`` surfaces where its result is taken, in order; when the consumer
    stops early, loads not yet started are cancelled, ``stop`` is set (a long load that checks it can end
    early: a cancelled job must unwind within its grace period) and the running one is waited for.
    """
    if ahead < 1:
        for key in keys:
            yield key, load(key)
        return
    todo = iter(keys)
    with ThreadPoolExecutor(ahead, thread_name_prefix="lcflow-read") as pool:
        pending = deque((key, pool.submit(load, key)) for _, key in zip(range(ahead), todo))
        try:
            while pending:
                key, future = pending.popleft()
                result = future.result()
                del future
                for following in todo:  # the next load starts before this result is handed over
                    pending.append((following, pool.submit(load, following)))
                    break
                yield key, result
                del result  # the consumer's reference is the only one left
        finally:
            if pending and stop is not None:
                stop.set()
            for _, future in pending:
                future.cancel()


@contextmanager
def written_behind() -> Iterator[Callable[..., None]]:
    """A function ``submit(write, *args)`` that runs ``write(*args)`` in a background thread while the
    caller goes on: writes run one at a time, in order, and a call first waits for the previous write
    (one pending at most). A write's error surfaces at the next call or on leaving; leaving on an error
    of the caller's waits for the running write and drops its result.
    """
    with ThreadPoolExecutor(1, thread_name_prefix="lcflow-write") as pool:
        pending = None

        def submit(write: Callable[..., object], *args: object) -> None:
            nonlocal pending
            if pending is not None:
                pending.result()
            pending = pool.submit(write, *args)

        yield submit
        if pending is not None:
            pending.result()
