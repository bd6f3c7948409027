"""The native one-sided transports and engine (native/papcoll_xport.h): a transport's native
half is :class:`XPort` (papcoll._native.XPort, which owns its resources:
native/papcoll_pyxport.c), the engine's call an :class:`XCall` (struct pc_xcall, whose
``run``, ``start``, ``advert`` and ``arrived`` are the engine's entries:
native/papcoll_pytypes.c). The algorithms (algorithms/exchange.py) run a call as an XCall.
What the fields mean is said once, in the header."""
import numpy as np

from .. import _native

XPort, XCall = _native.XPort, _native.XCall
ADVERT_BYTES = _native.ADVERT_BYTES
advert_record, advert_fields = _native.advert_record, _native.advert_fields
notice_current = _native.notice_current          # (word, seq): the notice word's one format

PC_VERBS, PC_MPI, PC_LOOP = 1, 2, 3
ADVERT, DATA = 0, 1
TO_ADVERTS, TO_INBOX, TO_EXPOSED = 0, 1, 2
COPY, ZCOPY, STEP, ORDER, VAR = 1, 2, 3, 4, 5
SEEN, SENT, RECEIVED = 0, 1, 2
IN_NOTICE, IN_ADVERT, IN_HEADER = 1, 2, 3


def inbox_slot(bank, n, q, slot):
    """Where in an inbox of ``n`` slots of ``slot`` bytes per bank the block from process ``q``
    lands in ``bank`` (native pc_inbox_slot, the inbox's one layout); ``q`` an int or an
    array of them."""
    if np.ndim(q):
        return np.array([_native.inbox_slot(bank, n, int(p), slot) for p in q], np.uint64)
    return _native.inbox_slot(bank, n, q, slot)
