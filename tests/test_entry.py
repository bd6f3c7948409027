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


def test_timed_declines_untouched_what_python_must_serve_or_time():
    """Entry.timed (the adaptive auto's calls, papcoll/adaptive.py): None, and the site's
    window as it was, for a length no site has, a buffer spec, a site's first call, a call no
    plan takes, and a stale Entry; a window that is not a Window, or is full and not ended,
    is an error, not a write."""
    import numpy as np

    from papcoll.adaptive import Site
    entry, site = fresh(), Site(8, "mpi", ((0.0, "mpi"),))
    sites = {4: site}
    site.window = _native.Window(8)
    assert entry.timed(sites, b"x", bytearray(3)) is None              # no site of 3 bytes
    assert entry.timed(sites, b"x", [bytearray(4), "spec"]) is None    # a buffer spec
    assert entry.timed(sites, b"x", bytearray(4)) is None and site.window.count == -1  # first
    assert site.window.note(1.0) is False and site.window.count == 0  # Python's, opening it
    assert entry.timed(sites, b"x", bytearray(4)) is None              # no plan takes it
    assert site.window.count == 0 and site.window.times == (0.0,) * 8
    assert entry.misses == 1 and entry.calls == 0
    entry.stale = True
    assert entry.timed(sites, b"x", bytearray(4)) is None and entry.misses == 1
    entry.stale = False
    assert entry.timed({4: ("a", "mpi")}, b"x", bytearray(4)) is None    # a key: no plan yet
    assert entry.misses == 2 and entry.calls == 0
    full = _native.Window(1)
    full.note(0.0)
    assert full.note(2.0) is True and full.count == 1
    for window, error in ((np.zeros(8), TypeError), (full, RuntimeError)):
        site.window = window
        with pytest.raises(error):
            entry.timed(sites, b"x", bytearray(4))
        assert not entry.locked()
    with pytest.raises(RuntimeError, match="full, and not ended"):
        full.note(3.0)
    assert full.times == (2.0,)
