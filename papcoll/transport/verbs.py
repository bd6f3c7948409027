"""``verbs``: the one-sided interface on RDMA verbs through pyverbs (InfiniBand, RoCE, SoftRoCE).

One reliable-connected QP per peer. Every put is an RDMA WRITE; a put with a notice is a single
RDMA WRITE_WITH_IMM whose immediate carries the notice's kind, signature code and sequence
number, while the receive completion's byte count is the length written: the completion is
generated only after the data is placed, so the notice can never overtake its data. The notice
boards are therefore plain local memory, updated from the receive CQ, and never remotely
writable. What peers may write (remote write access) is exactly the adverts + inbox region and
the exposed receive buffers; nothing is remotely readable. Send sources are registered for
local access through a second registration cache; up to 64 bytes they go inline.

pyverbs makes every resource; the hot path is C (native/papcoll_xport.c): it posts work
requests and polls the CQs through libibverbs' provider entry points, on the ``ibv_qp`` and
``ibv_cq`` objects of the QPs pyverbs made: :func:`papcoll.native.xport.ibv_qp` takes the
``QP.qp`` accessor where pyverbs has one (rdma-core 61 on), else finds the pointer inside each
QP object (checked by QP number and type; a word that is no pointer is read without harm). Writes are signalled selectively
(an unsignalled one is retired by the next signalled completion on its QP), and no pyverbs
object is built per write. Set-up meets every rank (rendezvous.py) before it connects and once
connected; every resource is local, so closing never waits for anyone.

Device choice: ``PAPCOLL_IB_DEVICE`` (else the first device with an ACTIVE port),
``PAPCOLL_IB_PORT`` (else its first ACTIVE port), ``PAPCOLL_IB_GID_INDEX`` (else the RoCE v2
GID of an IPv4 address, else index 0).
"""
import mmap
import os

import numpy as np

from .. import config
from ..errors import PapcollTimeoutError, TransportError
from ..native import ETIMEDOUT, xport
from ..native.xport import ADVERT_BYTES
from .base import KINDS, Descriptor, Transport
from .regcache import RegistrationCache, owner

_RECVS_PER_PEER = 16        # a peer has at most a few notices in flight to me (one epoch ahead)
_SENDS_PER_PEER = 64
_INLINE = 64                # bytes written inline (no registration of the source needed)


def _pyverbs():
    """Import pyverbs (rdma-core's Python binding), or raise TransportError saying why not."""
    try:
        import pyverbs.enums as enums
        from pyverbs import addr, cq, device, mr, pd, qp, wr
    except ImportError as err:
        raise TransportError(f"pyverbs is not importable ({err}); install rdma-core's python3-pyverbs "
                             f"and run scripts/softroce-vm --setup-only to link it into .venv") from None
    return enums, addr, cq, device, mr, pd, qp, wr


def find_device():
    """(device name, port, GID index) to use here, or raise TransportError naming what is missing."""
    e, _, _, device, *_ = _pyverbs()
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
                L.gid_bytes, L.lid, (L.fixed_addr, L.fixed_mr.rkey),
                (L.inbox.ctypes.data, L.inbox_mr.rkey, L.inbox.nbytes),
                {peer: (qp.qp_num, L.psns[peer]) for peer, qp in L.qps.items()})
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
        L, e, n = self._local, self._local.e, self.size
        for peer, qp in L.qps.items():
            gid_bytes, lid, _, _, theirs = info[peer]
            qpn, psn = theirs[self.rank]
            attr = L.qp_mod.QPAttr(port_num=L.port)
            attr.qp_access_flags = e.IBV_ACCESS_REMOTE_WRITE | e.IBV_ACCESS_LOCAL_WRITE
            attr.path_mtu = L.mtu
            attr.dest_qp_num, attr.rq_psn, attr.sq_psn = qpn, psn, L.psns[peer]
            attr.max_dest_rd_atomic = attr.max_rd_atomic = 1
            # ACK timeout 4.096 us x 2^18 (~1 s), 7 retries: a stalled emulated host (SoftRoCE
            # between two VMs on a busy machine) is not taken for a dead one; a dead peer still
            # fails the write in ~8 s, within any sensible PAPCOLL_TIMEOUT.
            attr.min_rnr_timer, attr.timeout, attr.retry_cnt, attr.rnr_retry = 12, 18, 7, 7
            route = L.addr.GlobalRoute(dgid=L.addr.GID(_gid_str(gid_bytes)), sgid_index=L.gid_index)
            attr.ah_attr = L.addr.AHAttr(gr=route, is_global=1, dlid=lid, port_num=L.port)
            qp.to_init(attr)
            qp.to_rtr(attr)
            qp.to_rts(attr)
        self._boards = np.zeros((KINDS, 2, n), np.uint64)
        self.native = self._native(info)

    def _native(self, info):
        """The C half (native/papcoll_xport.c) posts writes and polls the CQs of the QPs pyverbs
        made, through libibverbs' provider entry points: one C call per put or poll, and the
        engine's calls without Python. Its receive requests are posted there too."""
        L, n = self._local, self.size
        x = xport.XPort(xport.PC_VERBS, n, self.rank, self._boards,
                        [info[q][3][2] for q in range(n)])
        peers = (xport.VPeer * n)()
        for peer, qp in L.qps.items():
            p = peers[peer]
            p.qp, send_cq, recv_cq = xport.ibv_qp(qp, qp.qp_num)
            p.qp_num = qp.qp_num
            (p.adverts_addr, p.adverts_rkey), (p.inbox_addr, p.inbox_rkey, _) = info[peer][2:4]
        order = np.array(sorted(L.qps, key=lambda q: L.qps[q].qp_num), np.uint32)
        s = x.s
        s.peers, s.qp_order = xport.c.addressof(peers), xport.address(order)
        s.send_cq, s.recv_cq, s.depth = send_cq, recv_cq, _SENDS_PER_PEER
        s.scratch, s.scratch_lkey = L.fixed_addr + L.scratch_at, L.fixed_mr.lkey
        x.hold(order)
        self.peers = peers                  # what C knows of each peer (VPeer)
        for peer in L.qps:
            self._check(x.post_receives(peer, _RECVS_PER_PEER), "posting receives")
        return x

    # -- the interface --------------------------------------------------------------------------

    @property
    def inbox(self):
        return self._local.inbox

    @property
    def advert_area(self):
        return self._local.fixed_addr

    inline = _INLINE           # sources up to this many bytes need no registration

    def expose(self, array):
        L = self._local
        if not array.nbytes:       # no MR can be empty: empty writes land in valid scratch
            return Descriptor(L.fixed_addr + L.scratch_at, 0, L.fixed_mr.rkey)
        return L.exposed.get(array)[0]

    def source_key(self, data):
        """The lkey a write from ``data`` needs: 0 when it goes inline."""
        if data.nbytes <= _INLINE:
            return 0
        return self._local.sources.get(_whole(data)).lkey

    def end_call(self):
        self._local.exposed.end_call()
        self._local.sources.end_call()

    def _check(self, rc, what):
        if rc < 0:
            self.failed(rc, what)

    def failed(self, rc, what):
        s = self.native.s
        rank = self.names[s.failed_peer] if s.failed_peer < self.size else "?"
        if rc == ETIMEDOUT:
            raise PapcollTimeoutError(f"verbs: {what}", [rank], self.timeout)
        status = s.failed_status
        text = self._local.cq_mod.cqe_status_to_str(status) if status > 0 else "post failed"
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
    """This process's verbs resources, opened in order and closed in reverse order."""

    def __init__(self, comm, inbox):
        self.error = None
        self._opened = []
        try:
            self._open(comm, inbox)
        except Exception as err:          # reported to every rank by VerbsTransport.__init__
            self.error = str(err)

    def _open(self, comm, inbox):
        (self.e, self.addr, self.cq_mod, device, mr, pd, self.qp_mod, self.wr) = _pyverbs()
        e = self.e
        self.device, self.port, self.gid_index = find_device()
        self.ctx = self._keep(device.Context(name=self.device))
        port = self.ctx.query_port(self.port)
        self.mtu, self.lid = port.active_mtu, port.lid
        self.gid_bytes = self.ctx.query_gid(self.port, self.gid_index).gid
        self.pd = self._keep(pd.PD(self.ctx))
        n = comm.Get_size()
        depth = max(1, n - 1)
        self.send_cq = self._keep(self.cq_mod.CQ(self.ctx, _SENDS_PER_PEER * depth))
        self.recv_cq = self._keep(self.cq_mod.CQ(self.ctx, _RECVS_PER_PEER * depth))
        # Adverts then an allocated inbox, page-aligned: the only fixed remotely writable
        # memory, with the inbox the caller supplies (an MR of its own) if there is one.
        given = not isinstance(inbox, int)
        self.inbox_at = n * ADVERT_BYTES
        self.scratch_at = self.inbox_at + (0 if given else inbox)
        self.mapping = mmap.mmap(-1, self.scratch_at + 8)
        self.fixed = np.frombuffer(self.mapping, np.uint8)
        self.fixed_addr = self.fixed.ctypes.data
        remote = e.IBV_ACCESS_LOCAL_WRITE | e.IBV_ACCESS_REMOTE_WRITE
        self.fixed_mr = self._keep(mr.MR(self.pd, len(self.mapping), remote,
                                         address=self.fixed_addr))
        if given:
            self.inbox = inbox
            self.inbox_mr = self._keep(mr.MR(self.pd, inbox.nbytes, remote,
                                             address=inbox.ctypes.data))
        else:
            self.inbox = self.fixed[self.inbox_at:self.scratch_at]
            self.inbox_mr = self.fixed_mr
        self.mr = mr
        # Receive buffers peers write into; send sources need local access only (access 0).
        self.exposed = RegistrationCache(self._expose, lambda reg: reg[1].close())
        self.sources = RegistrationCache(
            lambda a: mr.MR(self.pd, a.nbytes, 0, address=a.ctypes.data), lambda m: m.close())
        cap = self.qp_mod.QPCap(max_send_wr=_SENDS_PER_PEER, max_recv_wr=_RECVS_PER_PEER,
                                max_send_sge=1, max_recv_sge=1, max_inline_data=_INLINE)
        init = self.qp_mod.QPInitAttr(qp_type=e.IBV_QPT_RC, scq=self.send_cq, rcq=self.recv_cq,
                                      cap=cap, sq_sig_all=0)
        self.qps = {peer: self._keep(self.qp_mod.QP(self.pd, init))
                    for peer in range(n) if peer != comm.Get_rank()}
        self.psns = {peer: int.from_bytes(os.urandom(3), 'little') for peer in self.qps}

    def _keep(self, resource):
        self._opened.append(resource)
        return resource

    def _expose(self, array):
        access = self.e.IBV_ACCESS_LOCAL_WRITE | self.e.IBV_ACCESS_REMOTE_WRITE
        region = self.mr.MR(self.pd, array.nbytes, access, address=array.ctypes.data)
        return Descriptor(array.ctypes.data, array.nbytes, region.rkey), region

    def close(self):
        for cache in (getattr(self, "exposed", None), getattr(self, "sources", None)):
            if cache is not None:
                cache.clear()
        while self._opened:                   # QPs, MR, CQs, PD, context: children first
            self._opened.pop().close()
        # The fixed region's MR is gone, so nothing writes there any more; its memory goes
        # with the last view of it (a caller's board or inbox view may outlive this call).
        self.fixed = self.mapping = self.inbox = None


def _whole(data):
    """The whole buffer ``data`` is a slice of, so one registration serves all its blocks."""
    base = owner(data)
    if isinstance(base, np.ndarray):
        return base.reshape(-1, order="A").view(np.uint8)
    return np.frombuffer(base, np.uint8)


def _gid_str(raw):
    return raw if isinstance(raw, str) else ":".join(raw[i:i + 4] for i in range(0, 32, 4))
