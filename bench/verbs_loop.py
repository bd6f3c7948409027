"""The floor under a verbs alltoall: the bare verbs operations one call needs, in a minimal loop.

A papcoll call over verbs with blocks of B bytes makes, per peer, one RDMA WRITE_WITH_IMM of B
bytes into the peer's inbox, and takes one receive completion (the peer's write) and one send
completion (its own). ``BareLoop`` does exactly that and nothing else -- no protocol, no
arrival order, no copy out of the inbox -- on resources of its own, made with pyverbs as
papcoll's native core makes its own (native/papcoll_ibv.c: one RC QP per peer, the same
attributes): work requests built once and reused, inline up to 64 bytes, every write
signalled, receives re-posted as they are consumed. ``papcoll.bench cost`` reports its CPU time
per call next to papcoll's, over verbs; with ``posted`` a call only posts its writes and
``finish()`` reaps them, so that ``cost --posted`` times the same part of both.
"""
import mmap
import os

import numpy as np

from papcoll.errors import TransportError
from papcoll.transport.verbs import _INLINE, _RECVS_PER_PEER, _SENDS_PER_PEER, find_device


class BareLoop:
    """Collective: a minimal verbs exchange of ``nbytes`` per peer over ``comm``."""

    def __init__(self, comm, nbytes, posted=False):
        import pyverbs.enums as e
        from pyverbs import addr, cq, device, mr, pd, qp, wr
        n, me = comm.Get_size(), comm.Get_rank()
        self.peers = [p for p in range(n) if p != me]
        self._opened = []
        name, port, gid_index = find_device()
        ctx = self._keep(device.Context(name=name))
        attr = ctx.query_port(port)
        gid = ctx.query_gid(port, gid_index).gid
        self.pd = self._keep(pd.PD(ctx))
        depth = max(1, n - 1)
        self.send_cq = self._keep(cq.CQ(ctx, _SENDS_PER_PEER * depth))
        self.recv_cq = self._keep(cq.CQ(ctx, _RECVS_PER_PEER * depth))
        self.inbox = np.frombuffer(mmap.mmap(-1, max(n * nbytes, 8) + 8), np.uint8)
        remote = e.IBV_ACCESS_LOCAL_WRITE | e.IBV_ACCESS_REMOTE_WRITE
        inbox_mr = self._keep(mr.MR(self.pd, self.inbox.nbytes, remote,
                                    address=self.inbox.ctypes.data))
        cap = qp.QPCap(max_send_wr=_SENDS_PER_PEER, max_recv_wr=_RECVS_PER_PEER,
                       max_send_sge=1, max_recv_sge=1, max_inline_data=_INLINE)
        init = qp.QPInitAttr(qp_type=e.IBV_QPT_RC, scq=self.send_cq, rcq=self.recv_cq, cap=cap,
                             sq_sig_all=0)
        self.qps = {peer: self._keep(qp.QP(self.pd, init)) for peer in self.peers}
        psn = int.from_bytes(os.urandom(3), "little")
        mine = (gid, attr.lid, self.inbox.ctypes.data, inbox_mr.rkey, psn,
                {peer: q.qp_num for peer, q in self.qps.items()})
        theirs = comm.allgather(mine)
        for peer, q in self.qps.items():
            their_gid, lid, _, _, their_psn, qpns = theirs[peer]
            a = qp.QPAttr(port_num=port)
            a.qp_access_flags = remote
            a.path_mtu = attr.active_mtu
            a.dest_qp_num, a.rq_psn, a.sq_psn = qpns[me], their_psn, psn
            a.max_dest_rd_atomic = a.max_rd_atomic = 1
            a.min_rnr_timer, a.timeout, a.retry_cnt, a.rnr_retry = 12, 18, 7, 7
            route = addr.GlobalRoute(dgid=addr.GID(their_gid), sgid_index=gid_index)
            a.ah_attr = addr.AHAttr(gr=route, is_global=1, dlid=lid, port_num=port)
            q.to_init(a)
            q.to_rtr(a)
            q.to_rts(a)
        self.source = np.ones(max(nbytes, 1), np.uint8)
        flags = e.IBV_SEND_SIGNALED
        lkey = 0
        if nbytes <= _INLINE:
            flags |= e.IBV_SEND_INLINE
        else:
            lkey = self._keep(mr.MR(self.pd, self.source.nbytes, e.IBV_ACCESS_LOCAL_WRITE,
                                    address=self.source.ctypes.data)).lkey
        self.requests = {}
        for peer in self.peers:
            _, _, base, rkey, _, _ = theirs[peer]
            sge = wr.SGE(self.source.ctypes.data, nbytes, lkey)
            request = wr.SendWR(opcode=e.IBV_WR_RDMA_WRITE_WITH_IMM, num_sge=1, sg=[sge],
                                send_flags=flags, imm_data=0)
            request.set_wr_rdma(rkey, base + me * nbytes)
            self.requests[peer] = request
        self.peer_of_qpn = {self.qps[peer].qp_num: peer for peer in self.peers}
        scratch = wr.SGE(self.inbox.ctypes.data + self.inbox.nbytes - 8, 8, inbox_mr.lkey)
        self.receives = {peer: wr.RecvWR(wr_id=peer, num_sge=1, sg=[scratch])
                         for peer in self.peers}
        for peer in self.peers:
            for _ in range(_RECVS_PER_PEER):
                self.qps[peer].post_recv(self.receives[peer])
        self.success = e.IBV_WC_SUCCESS
        self.posted = posted
        comm.Barrier()                         # every QP ready before the first write

    def _keep(self, resource):
        self._opened.append(resource)
        return resource

    def __call__(self, send=None, recv=None):
        for peer in self.peers:
            self.qps[peer].post_send(self.requests[peer])
        if not self.posted:
            self._reap()

    def finish(self):
        if self.posted:
            self._reap()

    def _reap(self):
        n = len(self.peers)
        received = sent = 0
        while received < n or sent < n:
            count, completions = self.recv_cq.poll(num_entries=64)
            for wc in completions[:count]:
                self._check(wc)
                peer = self.peer_of_qpn[wc.qp_num]
                self.qps[peer].post_recv(self.receives[peer])
            received += count
            count, completions = self.send_cq.poll(num_entries=64)
            for wc in completions[:count]:
                self._check(wc)
            sent += count

    def _check(self, wc):
        if wc.status != self.success:
            raise TransportError(f"bare verbs loop: completion status {wc.status}")

    def close(self):
        while self._opened:                   # QPs, MRs, CQs, PD, context: children first
            self._opened.pop().close()
