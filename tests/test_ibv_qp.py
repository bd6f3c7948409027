"""xport.ibv_qp, which finds the struct ibv_qp inside a pyverbs QP, on this host (no RDMA device
needed): fake ibv_qp heads in this process's memory, and objects that point at them as a
pyverbs QP does -- through its ``qp`` accessor, or from inside its own memory (the scan Debian's
pyverbs 44 needs). Only the head of the right QP number, of type RC, with both CQs is taken,
whatever sits beside it; words that are no pointers are skipped without harm."""
import ctypes

import numpy as np
import pytest

from papcoll.native import xport

QP_NUM = 0x1234_5678        # no byte of it repeats: a swapped or shifted read cannot match


def head(qp_num=QP_NUM, qp_type=xport.IBV_QPT_RC, cqs=True):
    return xport.IbvQpHead(context=0x1000, pd=0x1800, send_cq=0x2000 if cqs else 0,
                           recv_cq=0x3000 if cqs else 0, qp_num=qp_num, qp_type=qp_type)


RIGHT = head()
DECOYS = [head(qp_num=QP_NUM + 1), head(qp_type=3), head(cqs=False),      # 3: IBV_QPT_UC
          head(qp_num=int.from_bytes(QP_NUM.to_bytes(4, "little"), "big"))]
GARBAGE = [0, 8, 4095, 0xDEAD_BEEF_0000, (1 << 64) - 8, ctypes.addressof(RIGHT) + 1]


def scanned(*pointers):
    """An object whose own memory holds these words (a bytes object keeps its data inline)."""
    return np.array(pointers, np.uintp).tobytes()


def test_the_scan_takes_the_right_head_among_decoys_and_garbage():
    words = [*GARBAGE, *map(ctypes.addressof, DECOYS), ctypes.addressof(RIGHT)]
    assert xport.ibv_qp(scanned(*words), QP_NUM) == (ctypes.addressof(RIGHT), 0x2000, 0x3000)


def test_the_scan_refuses_an_object_with_decoys_only():
    words = [*GARBAGE, *map(ctypes.addressof, DECOYS)]
    with pytest.raises(OSError, match=f"QP number {QP_NUM}"):
        xport.ibv_qp(scanned(*words), QP_NUM)


def test_the_accessor_is_taken_where_pyverbs_has_one_and_checked_alike():
    class QP:                                      # rdma-core 61 and later: QP.qp
        qp = ctypes.addressof(RIGHT)
    assert xport.ibv_qp(QP(), QP_NUM) == (ctypes.addressof(RIGHT), 0x2000, 0x3000)
    QP.qp = ctypes.addressof(DECOYS[1])
    with pytest.raises(OSError, match=f"QP number {QP_NUM}"):
        xport.ibv_qp(QP(), QP_NUM)
