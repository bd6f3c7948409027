"""The floor under a verbs alltoall: the bare verbs operations one call needs, in a minimal loop.

A papcoll call over verbs with blocks of B bytes makes, per peer, one RDMA WRITE_WITH_IMM of B
bytes into the peer's inbox, and takes one receive completion (the peer's write) and one send
completion (its own). ``BareLoop`` does exactly that and nothing else -- no protocol, no
arrival order, no copy out of the inbox -- on queue pairs, CQs and MRs made the way papcoll
makes them (it opens a ``VerbsTransport`` of its own and posts on its resources): work
requests built once and reused, inline up to 64 bytes, every write signalled, receives
re-posted as they are consumed. ``papcoll.bench cost`` reports its CPU time per call next to
papcoll's, over verbs.
"""
import numpy as np

from papcoll.errors import TransportError
from papcoll.progress import Deadline
from papcoll.transport.verbs import _INLINE, VerbsTransport


class BareLoop:
    """Collective: a minimal verbs exchange of ``nbytes`` per peer over ``comm``."""

    def __init__(self, comm, nbytes, timeout=60.0):
        self.transport = VerbsTransport(comm, max(comm.Get_size() * nbytes, 8), Deadline(timeout))
        t, L = self.transport, self.transport._local     # its resources; not its methods
        e = L.e
        self.local, self.peers = L, [p for p in range(t.size) if p != t.rank]
        self.source = np.ones(max(nbytes, 1), np.uint8)
        flags = e.IBV_SEND_SIGNALED
        if nbytes <= _INLINE:
            flags |= e.IBV_SEND_INLINE
            lkey, self.region = 0, None
        else:
            self.region = L.mr.MR(L.pd, self.source.nbytes, e.IBV_ACCESS_LOCAL_WRITE,
                                  address=self.source.ctypes.data)
            lkey = self.region.lkey
        self.requests = {}
        for peer in self.peers:
            base, rkey = t.peers[peer].inbox_addr, t.peers[peer].inbox_rkey
            sge = L.wr.SGE(self.source.ctypes.data, nbytes, lkey)
            request = L.wr.SendWR(opcode=e.IBV_WR_RDMA_WRITE_WITH_IMM, num_sge=1, sg=[sge],
                                  send_flags=flags, imm_data=0)
            request.set_wr_rdma(rkey, base + t.rank * nbytes)
            self.requests[peer] = request
        self.peer_of_qpn = {L.qps[peer].qp_num: peer for peer in self.peers}
        scratch = L.wr.SGE(L.fixed_addr + L.scratch_at, 8, L.fixed_mr.lkey)
        self.receives = {peer: L.wr.RecvWR(wr_id=peer, num_sge=1, sg=[scratch])
                         for peer in self.peers}
        self.success = e.IBV_WC_SUCCESS

    def __call__(self, send=None, recv=None):
        L, n = self.local, len(self.peers)
        for peer in self.peers:
            L.qps[peer].post_send(self.requests[peer])
        received = sent = 0
        while received < n or sent < n:
            count, completions = L.recv_cq.poll(num_entries=64)
            for wc in completions[:count]:
                self._check(wc)
                peer = self.peer_of_qpn[wc.qp_num]
                L.qps[peer].post_recv(self.receives[peer])
            received += count
            count, completions = L.send_cq.poll(num_entries=64)
            for wc in completions[:count]:
                self._check(wc)
            sent += count

    def _check(self, wc):
        if wc.status != self.success:
            raise TransportError(f"bare verbs loop: completion status {wc.status}")

    def close(self):
        if self.region is not None:
            self.region.close()
            self.region = None
        self.transport.close()
