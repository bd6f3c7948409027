"""``direct``: RDMA-style Direct, the non-PAP baseline (Qian & Afsahi, section 3).

At step i process p writes to (p+i) mod N, straight into that peer's advertised receive buffer.
It must first see that peer's advertisement, so it waits for that specific peer even when others
are ready: one late process delays everyone that comes after it in the step order.
"""
from .onesided import OneSidedAlgorithm
from .registry import register


@register("direct", "Direct: step i writes to rank+i once that peer advertised (not PAP-aware)")
class Direct(OneSidedAlgorithm):
    def alltoall(self, send, recv):
        self.begin(recv.block)
        send = self.private_send(send, recv)
        self.advertise(recv)
        self.copy_own(send, recv, self.ctx.rank)
        for peer in self.peers:
            self.wait([peer], self.has_advertised, lambda p: self.write_direct(p, send),
                      "waiting for a peer's advertisement")
        self.wait_data(self.peers)
        self.end()
