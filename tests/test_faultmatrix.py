"""The fault matrix's judge (tests/faultmatrix.py) on outputs recorded from real cells: it
must pass what the product may say and fail what it may not."""
import faultmatrix

# stop-pap_shm_direct-ns3-master, CI on 2026-11-29 (nodes 0-2 and 3-4; ranks 1, 2 wait for
# node 3-4's blocks through their master 0, rank 4 for node 0-2's through its master 3).
# Master 0 finished call 42 just after its processes' deadline, then gave up in call 43.
STOPPED = """CELL victim 3 pids [26791, 26790, 26794, 26792, 26793]
CELL rank 3: VICTIM gets SIGSTOP inside a call (41 done)
CELL rank 1: PapcollTimeoutError missing=[0, 3] gave_up=[] after 2.30 s in call 42 (41 ok before): pap_shm_direct waiting for remote nodes' blocks: no sign of rank(s) [0, 3] after 2 s
CELL rank 1: closed in 0.00 s: ok
CELL rank 4: PapcollTimeoutError missing=[0, 3] gave_up=[] after 2.30 s in call 42 (41 ok before): pap_shm_direct waiting for remote nodes' blocks: no sign of rank(s) [0, 3] after 2 s
CELL rank 4: closed in 0.00 s: ok
CELL rank 2: PapcollTimeoutError missing=[0, 3] gave_up=[] after 2.30 s in call 42 (41 ok before): pap_shm_direct waiting for remote nodes' blocks: no sign of rank(s) [0, 3] after 2 s
CELL rank 2: SIGCONT to rank 3 after 4 s stopped
CELL rank 2: closed in 0.00 s: ok
CELL rank 0: PapcollTimeoutError missing=[3] gave_up=[1, 2] after 0.20 s in call 43 (42 ok before): pap_shm_direct (gathering the node's blocks): cannot complete
CELL rank 3: PapcollTimeoutError missing=[0] gave_up=[4] after 0.20 s in call 43 (42 ok before): pap_shm_direct (gathering the node's blocks): cannot complete
CELL rank 3: closed in 0.00 s: ok
CELL rank 0: closed in 0.00 s: ok
""" + "".join(f"CELL rank {r}: finalized\n" for r in range(5))


def problems(text):
    return faultmatrix.check("stop", 5, text, 0, [])


def test_a_master_that_finished_the_call_late_may_be_named_beside_the_victim():
    assert problems(STOPPED) == []


def test_a_live_rank_still_in_the_call_may_not_be_named():
    stuck = STOPPED.replace("after 0.20 s in call 43 (42 ok before): pap_shm_direct (gathering",
                            "after 2.20 s in call 42 (41 ok before): pap_shm_direct (gathering",
                            1)                                  # rank 0 failed call 42 too
    assert problems(stuck) == [f"rank {r}: PapcollTimeoutError blames live rank(s) [0]"
                               for r in (1, 2, 4)]


def test_the_victim_must_be_named():
    alone = STOPPED.replace("missing=[0, 3]", "missing=[0]")
    assert all("does not name rank 3" in p for p in problems(alone)) and len(problems(alone)) == 3
