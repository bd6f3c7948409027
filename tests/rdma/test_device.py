"""The RDMA device as papcoll's verbs transport finds it (inside scripts/softroce-vm: rxe0).

The device, port and GID index come from papcoll's own automatic choice (transport/verbs.py:
find_device, through the autouse fixture of conftest.py), so these tests check that choice too.
"""
import pytest

pytestmark = pytest.mark.rdma


@pytest.fixture
def ctx(verbs_device):
    import pyverbs.device as d

    with d.Context(name=verbs_device[0]) as context:
        yield context


def test_port_is_active(ctx, verbs_device):
    import pyverbs.enums as e

    port = ctx.query_port(verbs_device[1])
    assert port.state == e.IBV_PORT_ACTIVE, f"{verbs_device} port state {port.state}"
    assert port.active_mtu >= e.IBV_MTU_1024


def test_chosen_gid_is_roce_v2_ipv4(ctx, verbs_device):
    import pyverbs.enums as e

    _, port, index = verbs_device
    if ctx.query_port(port).link_layer != e.IBV_LINK_LAYER_ETHERNET:
        pytest.skip("InfiniBand link layer: GIDs are not RoCE")
    entry = ctx.query_gid_ex(port, index)
    assert entry.gid_type == e.IBV_GID_TYPE_ROCE_V2, f"GID {index} has type {entry.gid_type}"
    # An IPv4-mapped GID: the address of the netdev the rxe device sits on.
    assert ctx.query_gid(port, index).gid.startswith("0000:0000:0000:0000:0000:ffff:")


def test_rc_qp_reaches_init(ctx, verbs_device):
    import pyverbs.enums as e
    from pyverbs.cq import CQ
    from pyverbs.pd import PD
    from pyverbs.qp import QP, QPAttr, QPCap, QPInitAttr

    with PD(ctx) as pd, CQ(ctx, 8, None, None, 0) as cq:
        init = QPInitAttr(qp_type=e.IBV_QPT_RC, scq=cq, rcq=cq,
                          cap=QPCap(max_send_wr=4, max_recv_wr=4, max_send_sge=1, max_recv_sge=1))
        attr = QPAttr(port_num=verbs_device[1])
        attr.qp_access_flags = e.IBV_ACCESS_LOCAL_WRITE | e.IBV_ACCESS_REMOTE_WRITE
        with QP(pd, init, attr) as qp:  # an RC QP given a QPAttr comes back in INIT
            assert qp.qp_state == e.IBV_QPS_INIT
