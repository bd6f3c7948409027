"""``verbs``: the one-sided interface on RDMA verbs (InfiniBand, RoCE, SoftRoCE).

One reliable-connected QP per peer. Every put is an RDMA WRITE; a put with a notice is a single
RDMA WRITE_WITH_IMM whose immediate carries the notice's kind, signature code and sequence
number, while the receive completion's byte count is the length written: the completion is
generated only after the data is placed, so the notice can never overtake its data. The notice
boards are therefore plain local memory, updated from the receive CQ, and never remotely
writable. What peers may write (remote write access) is exactly the adverts + inbox region and
the exposed receive buffers; nothing is remotely readable. Send sources are registered for
local access through a second registration cache, except short ones: up to 64 bytes a write
goes inline, and up to ``bcopy_max`` (8 KiB, less with many peers) the native core copies it
into a registered staging ring per peer first. Either way its source is free at the post, so
the call never waits for the peer's acknowledgement (one more round trip) to return.

The native core makes and owns every resource with libibverbs (papcoll._native.XPort,
native/papcoll_ibv.c), and runs the hot path (native/papcoll_verbs.c): it posts work requests
and polls the CQs, one C call per put or poll, and the engine's calls without Python. pyverbs
only finds the device (:func:`find_device`). Writes are signalled selectively (an unsignalled
one is retired by the next signalled completion on its QP). Set-up meets every rank
(rendezvous.py) before it connects and once connected; every resource is local, so closing
never waits for anyone.

Device choice: ``PAPCOLL_IB_DEVICE`` (else the first device with an ACTIVE port),
``PAPCOLL_IB_PORT`` (else its first ACTIVE port), ``PAPCOLL_IB_GID_INDEX`` (else the RoCE v2
GID of an IPv4 address, else index 0).
"""
import mmap

import numpy as np

from .. import _native, config
from ..errors import PapcollTimeoutError, TransportError
from ..native import ETIMEDOUT, xport
from ..native.lib import address
from ..native.xport import ADVERT_BYTES
from .base import KINDS, Descriptor, Transport
from .regcache import RegistrationCache, owner

_RECVS_PER_PEER = 16        # a peer has at most a few notices in flight to me (one epoch ahead)
_SENDS_PER_PEER = 64
_INLINE = 64                # bytes written inline (native PC_IBV_INLINE; the bare verbs loop's)


def _pyverbs():
    """Import pyverbs (rdma-core's Python binding), or raise TransportError saying why not."""
    try:
        import pyverbs.enums as enums
        from pyverbs import device
    except ImportError as err:
        raise TransportError(f"pyverbs is not importable ({err}); install rdma-core's python3-pyverbs "
                             f"and run scripts/softroce-vm --setup-only to link it into .venv") from None
    return enums, device


def find_device():
    """(device name, port, GID index) to use here, or raise TransportError naming what is missing."""
    e, device = _pyverbs()
    try:
        names = [d.name.decode() for d in device.get_device_list()]
    except device.PyverbsError as err:      # no kernel RDMA support at all
        raise TransportError(f"no RDMA device found ({err})") from None
    wanted = config.ib_device()
    if wanted and wanted not in names:
        raise TransportError(f"PAPCOLL_IB_DEVICE={wanted!r} not found; RDMA devices: {names or 'none'}")
    if not names:
        raise TransportError("no RDMA device found (ibv_get_device_list is empty)")
    port_set, gid_set = config.ib_port(), config.ib_gid_index()
    for name in [wanted] if wanted else names:
        with device.Context(name=name) as ctx:
            nports = ctx.query_device().phys_port_cnt
            if port_set is not None and port_set > nports:
                raise TransportError(f"PAPCOLL_IB_PORT={port_set}: device {name} has {nports} "
                                     f"port(s)")
            for port in [port_set] if port_set else range(1, nports + 1):
                attr = ctx.query_port(port)
                if attr.state != e.IBV_PORT_ACTIVE:
                    continue
                if gid_set is not None and gid_set >= attr.gid_tbl_len:
                    raise TransportError(f"PAPCOLL_IB_GID_INDEX={gid_set}: port {port} of {name}"
                                         f" has {attr.gid_tbl_len} GIDs")
                gid = gid_set if gid_set is not None else _roce_v2_ipv4_gid(
                    ctx, port, attr.gid_tbl_len, e)
                return name, port, gid
    raise TransportError(f"no ACTIVE port on RDMA device(s) {[wanted] if wanted else names}")


def _roce_v2_ipv4_gid(ctx, port, table_len, e):
    for index in range(table_len):
        try:
            digits = ctx.query_gid(port, index).gid.replace(":", "")
            kind = ctx.query_gid_type(port, index)      # the sysfs flavour of the GID type
        except Exception:      # unused GID slots answer EINVAL
            continue
        if kind == e.IBV_GID_TYPE_SYSFS_ROCE_V2 and digits.startswith("0" * 20 + "ffff"):
            return index
    return 0


class VerbsTransport(Transport):
    name = "verbs"
    # Copy-based (one write into the pre-registered inbox, no advertisement round) beat
    # zero-copy at every size up to 64 KiB on SoftRoCE (papcoll.bench arrival, N = 4, MIF
    # 1-128). A hardware HCA moves bytes for free and may favour zero-copy sooner: re-measure.
    copy_threshold = 64 << 10

    @classmethod
    def availability(cls):
        try:
            name, port, gid = find_device()
        except TransportError as err:
            return f"unavailable: {err}"
        return f"available: device {name} port {port} GID index {gid}"

    def __init__(self, comm, inbox, deadline, names=None, owner=""):
        super().__init__(comm, inbox, deadline, names, owner)
        self.timeout = deadline.timeout
        self._closed = True
        local = _Local(comm, inbox)         # every rank tries, and all agree before connecting
        L = local
        try:
            mine = None if local.error else (
                L.info["gid"], L.info["lid"], (L.fixed_addr, L.info["fixed"][1]),
                (address(L.inbox), L.info["inbox_rkey"], L.inbox.nbytes), L.info["qps"])
            info = self.meet("verbs set-up", (local.error, mine), deadline)
            failures = [f"rank {r}: {info[r][0]}" for r in sorted(info) if info[r][0]]
            if failures:
                raise TransportError("verbs transport unavailable: " + "; ".join(failures))
            self._local = local
            self._connect({r: info[r][1] for r in info})
            self.meet("verbs connected", None, deadline)  # every QP ready before writes
        except BaseException:
            local.close()
            raise
        self._closed = False

    # -- set-up ---------------------------------------------------------------------------------

    def _connect(self, info):
        """Each QP to its peer's (INIT, RTR, RTS: native/papcoll_ibv.c says how), then its
        receive requests for notices."""
        x = self._local.x
        self.remote = {}        # peer: its adverts area (addr, rkey), inbox (addr, rkey, bytes)
        for peer in self._local.info["qps"]:
            gid, lid, adverts, inbox, theirs = info[peer]
            qp_num, psn = theirs[self.rank]
            x.connect(peer, qp_num, psn, gid, lid)
            self.remote[peer] = adverts, inbox
            x.set_peer(peer, adverts, inbox[:2], inbox[2])
        for peer in self._local.info["qps"]:
            self._check(x.post_receives(peer, _RECVS_PER_PEER), "posting receives")
        self._boards = self._local.boards
        self.native = x

    # -- the interface --------------------------------------------------------------------------

    @property
    def inbox(self):
        return self._local.inbox

    @property
    def advert_area(self):
        return self._local.fixed

    @property
    def inline(self):
        """Sources up to this many bytes need no registration (copied at the post)."""
        return self._local.x.bcopy_max

    def expose(self, array):
        L = self._local
        if not array.nbytes:       # no MR can be empty: empty writes land in valid scratch
            return Descriptor(L.fixed_addr + L.scratch_at, 0, L.info["fixed"][1])
        return L.exposed.get(array)[0]

    def source_key(self, data):
        """The lkey a write from ``data`` needs: 0 when it is copied at the post."""
        if data.nbytes <= self.inline:
            return 0
        return self._local.sources.get(_whole(data)).lkey

    def register(self, array, remote=False):
        return self._local.x.register(array, remote)

    def end_call(self):
        self._local.exposed.end_call()
        self._local.sources.end_call()

    def _check(self, rc, what):
        if rc < 0:
            self.failed(rc, what)

    def failed(self, rc, what):
        s = self.native
        rank = self.names[s.failed_peer] if s.failed_peer < self.size else "?"
        if rc == ETIMEDOUT:
            raise PapcollTimeoutError(f"verbs: {what}", [rank], self.timeout)
        status = s.failed_status
        text = _native.wc_status_str(status) if status > 0 else "post failed"
        raise TransportError(f"{what} with rank {rank} failed on {self._local.device}: {text} "
                             f"(status {status}, vendor error {s.failed_vendor}, {rc})",
                             ranks=[rank] if rank != "?" else ())

    def close(self, collective=True):
        if self._closed:
            return
        self._closed = True
        native = getattr(self, "native", None)
        if native is not None:
            native.close()                 # before the QPs and memory it points to go
        self._local.close()

class _Local:
    """This process's verbs resources: a native XPort that owns them, its fixed memory (the
    adverts, the inbox unless the caller gives one, 8 bytes of scratch) and the registration
    caches of exposed receive buffers and of send sources."""

    def __init__(self, comm, inbox):
        self.error = None
        try:
            self._open(comm, inbox)
        except Exception as err:          # reported to every rank by VerbsTransport.__init__
            self.error = str(err)

    def _open(self, comm, inbox):
        self.device, self.port, self.gid_index = find_device()
        n, me = comm.Get_size(), comm.Get_rank()
        self.boards = np.zeros((KINDS, 2, n), np.uint64)
        # Adverts then an allocated inbox, page-aligned: the only fixed remotely writable
        # memory, with the inbox the caller supplies (an MR of its own) if there is one.
        given = not isinstance(inbox, int)
        inbox_at = n * ADVERT_BYTES
        self.scratch_at = inbox_at + (0 if given else inbox)
        self.fixed = np.frombuffer(mmap.mmap(-1, self.scratch_at + 8), np.uint8)
        self.fixed_addr = address(self.fixed)
        self.inbox = inbox if given else self.fixed[inbox_at:self.scratch_at]
        self.x = _native.XPort(xport.PC_VERBS, n, me, self.boards)
        self.x.open_verbs(self.device, self.port, self.gid_index, self.fixed,
                          inbox if given else None, _SENDS_PER_PEER, _RECVS_PER_PEER)
        self.info = self.x.verbs_info()
        # Receive buffers peers write into; send sources need the device's reads only.
        self.exposed = RegistrationCache(self._expose, lambda reg: reg[1].close())
        self.sources = RegistrationCache(self.x.register, lambda m: m.close())

    def _expose(self, array):
        region = self.x.register(array, True)
        return Descriptor(region.address, region.nbytes, region.rkey), region

    def close(self):
        for cache in (getattr(self, "exposed", None), getattr(self, "sources", None)):
            if cache is not None:
                cache.clear()
        if getattr(self, "x", None) is not None:
            self.x.close()               # QPs, MRs, CQs, PD, context: children first
        # The fixed region's MR is gone, so nothing writes there any more; its memory goes
        # with the last view of it (a caller's board or inbox view may outlive this call).
        self.fixed = self.inbox = None


def _whole(data):
    """The whole buffer ``data`` is a slice of, so one registration serves all its blocks."""
    base = owner(data)
    if isinstance(base, np.ndarray):
        return base.reshape(-1, order="A").view(np.uint8)
    return np.frombuffer(base, np.uint8)
