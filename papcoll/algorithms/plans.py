"""The plans an Exchange (onesided.py) leaves for the engine's calls: cached Plans
(native/plan.py) whose calls enter C once, for copy-based Alltoall and Alltoallv/w shapes,
and a persistent zero-copy request's own plan, on registrations of its buffers that it owns.
"""
from .. import signature
from ..native import Plan, xport
from ..native.lib import address
from ..progress import CHECK_EVERY


def copy_based(x, algorithm, block, slot, sig):
    """A plan of ``algorithm``'s for copy-based calls of ``block`` bytes per peer and
    signature ``sig``, to bind, or None (the transport would need a registration per
    call). A blocking call's engine runs CHECK_EVERY before it returns, a request's
    start one pass."""
    if block > x.transport.inline:
        return None
    calls = [x.prepare(xport.COPY, block, slot, bank) for bank in (0, 1)]
    for call in calls:
        call.s.code, call.s.lkey = signature.code_of(sig), 0   # its sig: the plan's
    return Plan.engine(algorithm, calls, x.counter, x.advert_counter, CHECK_EVERY)


def persistent(x, algorithm, scheme, sendbuf, recvbuf, send, recv, sig, kept):
    """The own plan of a persistent zero-copy request on these buffers (``kept``: its
    Persistent), or None where the transport registers nothing for its callers or the
    call is in place or empty. It holds registrations of both buffers (the send one only
    for blocks the transport does not copy at the post), its calls of each bank, whose
    records no other call writes, and starts the request in one entry into C: the
    notices alone while my peers hold its records (none to a peer whose advertisement is in:
    the data that follows stands for it), then a pass of the engine."""
    t, block = x.transport, recv.block
    if send is None or not block:
        return None
    exposed = t.register(recv.data, remote=True)
    if exposed is None:
        return None
    source = t.register(send.data) if block > t.inline else None
    calls = [x.call(scheme, block, 0, bank) for bank in (0, 1)]
    for call in calls:
        call.s.code = signature.code_of(sig)
    plan = Plan.engine(algorithm, calls, x.counter, x.advert_counter, CHECK_EVERY,
                       first=kept.first_counter, recv_at=exposed.address,
                       recv_bytes=exposed.nbytes, rkey=exposed.rkey, send_at=address(send.data),
                       lkey=source.lkey if source else 0)
    plan.held = [region for region in (exposed, source) if region is not None]
    if plan.bind(sendbuf, recvbuf, recv, sig):
        return plan
    for region in plan.held:
        region.close()
    return None


def variable(x, algorithm, send, recv, slot, sig, in_place=False):
    """A plan of ``algorithm``'s for Alltoallv/w calls of this shape whose blocks all
    go through the inbox (a staged side's packed by MPI in the plan's call; in place, the
    send side is a staged copy of the receive blocks), or None."""
    if (send.shape is None and not in_place or recv.shape is None
            or max(send.length.max(initial=0), recv.length.max(initial=0)) > slot
            or int(send.length.sum()) > x.transport.inline):
        return None
    calls = [x.prepare_var(send, recv, slot, bank) for bank in (0, 1)]
    for call in calls:
        call.s.code, call.s.lkey = signature.code_of(sig), 0
    return Plan.alltoallv(algorithm, (send, recv), calls=calls,
                          counter=x.counter, adverts=x.advert_counter,
                          slice=CHECK_EVERY)
