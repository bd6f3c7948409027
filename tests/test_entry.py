"""A Communicator's Entry (native/papcoll_entry.c) on its own: the lock every call takes, and
what serve() declines untouched. The calls it serves are checked by the MPI tests (shapes,
datatypes, requests, threads)."""
import threading
import time

import pytest

from papcoll import _native


def fresh():
    entry = _native.Entry(None, None)
    entry.stale = False
    return entry


def test_the_lock_is_a_lock():
    entry = fresh()
    assert entry.acquire(blocking=False) and entry.locked()
    assert not entry.acquire(blocking=False)
    entry.release()
    assert not entry.locked()
    with pytest.raises(RuntimeError):
        entry.release()
    with entry:
        assert entry.locked()
    assert not entry.locked()


def test_a_blocked_acquire_waits_for_the_release():
    entry, order = fresh(), []
    entry.acquire()

    def other():
        with entry:
            order.append("other")
    thread = threading.Thread(target=other)
    thread.start()
    time.sleep(0.1)
    order.append("first")
    entry.release()
    thread.join(5)
    assert order == ["first", "other"]


def test_serve_declines_what_it_cannot_take_and_counts_nothing_but_misses():
    entry = fresh()
    assert entry.serve(("a", None), b"x", bytearray(1)) is False     # no plan for this site
    assert (entry.calls, entry.hits, entry.misses) == (0, 0, 1) and not entry.locked()
    entry.stale = True
    assert entry.serve(("a", None), b"x", bytearray(1)) is None      # Python's path first
    entry.stale = False
    with entry:
        assert entry.serve(("a", None), b"x", bytearray(1)) is None  # another call holds it
        assert entry.run(("a", None), b"x", bytearray(1)) is False   # the holder's own try
    assert entry.misses == 2 and entry.calls == 0
    with pytest.raises(RuntimeError, match="not held"):
        entry.run(("a", None), b"x", bytearray(1))
    with pytest.raises(TypeError):
        entry.serve(("a", None), b"x")


def test_a_new_entry_is_stale_and_serves_nothing():
    entry = _native.Entry(None, None)
    assert entry.stale and entry.serve(("a", None), b"", bytearray()) is None
    assert entry.chosen is None and entry.sites == {}
