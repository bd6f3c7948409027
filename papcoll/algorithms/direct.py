"""``direct``: RDMA-style Direct, the non-PAP baseline (Qian & Afsahi, section 3).

At step i process p writes to (p+i) mod N, straight into that peer's advertised receive buffer.
It must first see that peer's advertisement, so it waits for that specific peer even when others
are ready: one late process delays everyone that comes after it in the step order.
"""
from .onesided import OneSidedAlgorithm
from .registry import register


@register("direct", "Direct: step i writes to rank+i once that peer advertised (not PAP-aware)")
class Direct(OneSidedAlgorithm):
    pap = False

    def start(self, send, recv, persistent=None):
        return self.zero_copy(send, recv, persistent=persistent)
