"""The node segment: shared memory that the processes of one node poll and copy through.

Layout (Graham & Shipman): for each of the n local processes a page-aligned **control page**,
then for each a page-aligned **data region**, then (optionally) one page-aligned **shared
area**. Process i writes only its own control page and data region; others only read them, so
there are no locks and no two writers on a cache line. The shared area is laid out by its user
into places each written by one process (or one remote master, through the transport).
Flags inside a control page sit on separate cache lines (``LINE`` bytes apart), and the same
flag of every process is one strided array: ``words(offset)`` -- the form the native waits take.

Why a POSIX shared memory object and not ``MPI.Win.Allocate_shared``: its lifetime is ours.
Freeing an MPI window is collective, and papcoll must be able to close after a peer died
(the timeout path), where a collective would hang; unmapping our own mapping never waits.
The object is created 0600 with O_EXCL under a random name, and its name is unlinked as soon
as every local process has mapped it, so from then on no crash can leave it in /dev/shm: the
memory goes away with the last mapping. Set-up meets in two bounded rendezvous (the name, then
"all mapped"), and every process that learnt the name unlinks it however they end (the first
one does), so a process that is missing or dies during set-up leaves nothing behind either --
unless the creator itself dies in the microseconds between creating the object and sending
its name.
"""
import errno
import mmap
import os

import numpy as np

from .. import rendezvous
from ..errors import TransportError

SHM_DIR = "/dev/shm"     # where Linux keeps POSIX shared memory objects (glibc shm_open)
PREFIX = "papcoll-"      # every name papcoll creates starts with it, then the creator's pid
LINE = 64                # bytes between flags: one cache line each
PAGE = mmap.PAGESIZE


def round_up(nbytes, unit):
    return -(-nbytes // unit) * unit


class Segment:
    """Collective over ``members`` (ranks of ``comm``, ascending, all of it by default), bounded
    by ``deadline``: map one shared segment with a control page of ``control_bytes`` and a data
    region of ``data_bytes`` per process, and a shared area of ``shared_bytes`` (all rounded up
    to whole pages), zero-filled. Process i is ``members[i]``; the first creates the segment.
    ``close()`` is local and safe twice. ``ranks`` maps ranks of ``comm`` to the user's, for
    errors."""

    def __init__(self, comm, control_bytes, data_bytes, deadline, members=None, ranks=None,
                 shared_bytes=0):
        members = list(range(comm.Get_size()) if members is None else members)
        self.n, self.me = len(members), members.index(comm.Get_rank())
        self.control_stride = round_up(max(control_bytes, 1), PAGE)
        self.region_stride = round_up(data_bytes, PAGE)
        self.data_offset = self.n * self.control_stride
        self.shared_offset = self.data_offset + self.n * self.region_stride
        self.nbytes = self.shared_offset + round_up(shared_bytes, PAGE)
        self._map = None
        meet = lambda what, value: rendezvous.exchange(comm, what, value, deadline, members, ranks)
        name = _create(self.nbytes) if self.me == 0 else None
        try:
            name = meet("node segment", name)[members[0]]
            error = None if isinstance(name, TransportError) else self._attach(name)
            errors = meet("node segment mapped", error)     # every process has mapped it, or failed
        except BaseException:
            self.close()
            raise
        finally:          # whoever knows the name removes it (the first one does): nobody waits
            if isinstance(name, str):                    # for the creator, alive or not
                _unlink(name)
        failed = name if isinstance(name, TransportError) else next(
            (errors[q] for q in members if errors[q] is not None), None)
        if failed is not None:
            self.close()
            raise failed
        self.array = np.frombuffer(self._map, np.uint8)
        # First touch from the owner places its control page near it on NUMA machines.
        self.control(self.me)[:] = 0

    def _attach(self, name):
        try:
            fd = os.open(os.path.join(SHM_DIR, name), os.O_RDWR | os.O_NOFOLLOW)
            try:
                self._map = mmap.mmap(fd, self.nbytes)
            finally:
                os.close(fd)
        except OSError as err:
            return TransportError(err.errno, f"cannot map the node segment {name}: {err}")
        return None

    def control(self, i):
        """Process i's control page (uint8)."""
        start = i * self.control_stride
        return self.array[start:start + self.control_stride]

    def region(self, i):
        """Process i's data region (uint8)."""
        start = self.data_offset + i * self.region_stride
        return self.array[start:start + self.region_stride]

    @property
    def shared(self):
        """The shared area (uint8)."""
        return self.array[self.shared_offset:]

    @property
    def regions(self):
        """All data regions, region i at ``i * region_stride`` (uint8)."""
        return self.array[self.data_offset:]

    def words(self, offset):
        """The uint64 at ``offset`` of every control page: entry i is process i's."""
        if offset % 8 or not 0 <= offset <= self.control_stride - 8:
            raise ValueError(f"word offset {offset} is not inside an aligned control page")
        return np.ndarray((self.n,), np.uint64, self._map, offset, (self.control_stride,))

    def page_words(self, i, offset, count, stride=LINE):
        """``count`` uint64 of process i's control page from ``offset``, ``stride`` bytes
        apart."""
        if offset % 8 or stride % 8 or offset + (count - 1) * stride + 8 > self.control_stride:
            raise ValueError(f"{count} words from {offset} by {stride} do not fit a control page")
        return np.ndarray((count,), np.uint64, self._map, i * self.control_stride + offset,
                          (stride,))

    def my_words(self, offset, count, stride=LINE):
        """``count`` uint64 of my own control page from ``offset``, ``stride`` bytes apart."""
        return self.page_words(self.me, offset, count, stride)

    def close(self):
        """Drop my mapping. Views handed out keep it alive until they go too."""
        mapping, self._map = self._map, None
        self.array = None
        if mapping is not None:
            try:
                mapping.close()
            except BufferError:     # views still alive: the mapping goes with the last one
                pass

    @property
    def closed(self):
        return self._map is None


def _create(nbytes):
    """A new 0600 shared memory object of nbytes: its name, or the TransportError."""
    for _ in range(8):
        name = f"{PREFIX}{os.getpid()}-{os.urandom(6).hex()}"
        path = os.path.join(SHM_DIR, name)
        try:
            fd = os.open(path, os.O_RDWR | os.O_CREAT | os.O_EXCL | os.O_NOFOLLOW, 0o600)
        except FileExistsError:
            continue
        except OSError as err:
            return TransportError(err.errno, f"cannot create a node segment in {SHM_DIR}: {err}")
        try:
            os.fchmod(fd, 0o600)        # exactly owner-only, whatever the umask
            os.ftruncate(fd, nbytes)
        except OSError as err:
            _unlink(name)
            return TransportError(err.errno, f"cannot size the node segment {path} to "
                                             f"{nbytes} bytes: {err}")
        finally:
            os.close(fd)
        return name
    return TransportError(errno.EEXIST, f"no free segment name in {SHM_DIR}")


def _unlink(name):
    try:
        os.unlink(os.path.join(SHM_DIR, name))
    except FileNotFoundError:
        pass
