"""Read ahead: the next piece of work is loaded in a background thread while the current one is
computed. GDAL reads and numpy both release the GIL, so reading and compositing overlap even in one
process; memory holds the piece being computed and the one being read, never more."""

from collections import deque
from collections.abc import Callable, Iterable, Iterator
from concurrent.futures import ThreadPoolExecutor
from typing import TypeVar

K = TypeVar("K")
R = TypeVar("R")


def prefetched(load: Callable[[K], R], keys: Iterable[K], ahead: int = 1) -> Iterator[tuple[K, R]]:
    """``(key, load(key))`` for each key in order, with ``ahead`` further loads running meanwhile.

    An exception raised by ``load`` surfaces where its result is taken, in order; when the consumer
    stops early, loads not yet started are cancelled and the running one is waited for.
    """
    if ahead < 1:
        for key in keys:
            yield key, load(key)
        return
    todo = iter(keys)
    with ThreadPoolExecutor(1, thread_name_prefix="lcflow-read") as pool:
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
            for _, future in pending:
                future.cancel()
