"""MPI worker for tests/test_faults.py: one cell of the fault matrix, one rank (the victim)
misbehaving while the others make Alltoall calls.

    faults.py FAULT ALGORITHM VICTIM BLOCK

VICTIM is a rank number or a role: first, last, master (local rank 0 of the last emulated
node, PAPCOLL_NODE_SIZE), nonmaster (rank 1). BLOCK: bytes per peer. FAULT:

kill_before, kill_after   the victim SIGKILLs itself before its first call / before its second
kill_during               a thread of the victim SIGKILLs it while it is inside a call of a loop
stop                      a thread of the victim SIGSTOPs it inside a call of a loop; a thread of
                          another rank (the helper) SIGCONTs it 2 x PAPCOLL_TIMEOUT later
sigint                    the others come 0.5 s late to call 3 (of 4); 0.2 s into it, as it waits
                          for them, a timer thread of the victim sends it SIGINT
late, late_cold           the victim sleeps 1.5 x PAPCOLL_TIMEOUT before its second / first call
alg_cold, alg_warm        the victim calls another algorithm (ALT), on first use / after every
                          rank ran both once
size_cold, size_warm      the victim passes 2 x BLOCK, on first use / after both sizes ran once
settings_copy, settings_node  the victim's PAPCOLL_COPY_THRESHOLD / PAPCOLL_NODE_SIZE differs

Every call's data names (call, source, destination, word) (tests/mpi/pattern.py) and is checked.
Each rank stops at its first error and prints one outcome line:

    CELL rank R: OK after S s in call K (K-1 ok before)
    CELL rank R: <Class> missing=[..] gave_up=[..] ranks=[..] after S s in call K (..): message
    CELL rank R: BADDATA after S s in call K (..): where

(S: from entering that call). Rank 0 first prints ``CELL victim V pids [...]``; the victim
says ``CELL rank V: VICTIM ...`` as it misbehaves. After a kill, survivors wait until all of
them reported (marker files in $FAULTS_DIR), print ``CELL rank R: exits`` and leave with
os._exit(0) (MPI_Finalize would wait for the dead rank); otherwise every rank closes, calls
MPI.Finalize() and prints ``CELL rank R: closed in S s: ok`` and ``CELL rank R: finalized``.
Kill cells need ``mpiexec -disable-auto-cleanup`` and each rank under
``sh -c 'trap "" USR1; "$@"; exit $?' sh python ...`` (tests/test_faults.py says why).
"""
import faulthandler
import os
import signal
import sys
import threading
import time

import numpy as np
from mpi4py import MPI

sys.path.insert(0, os.path.dirname(__file__))
import pattern  # noqa: E402

import papcoll  # noqa: E402

world = MPI.COMM_WORLD
rank, size = world.Get_rank(), world.Get_size()
FAULT, NAME, ROLE, BLOCK = sys.argv[1], sys.argv[2], sys.argv[3], int(sys.argv[4])
TIMEOUT = float(os.environ.get("PAPCOLL_TIMEOUT", "60"))
NODE = int(os.environ.get("PAPCOLL_NODE_SIZE", "0") or 0)
ALT = {"shm_pap": "cma_pap", "cma_pap": "shm_pap", "direct": "pap_direct",
       "pap_direct": "direct", "pap_direct_copy": "pap_direct_zcopy",
       "pap_direct_zcopy": "pap_direct_copy", "shm_direct": "pap_shm_direct",
       "pap_shm_direct": "shm_direct", "auto": "direct"}     # auto: never direct in its cells
LOOPED = ("kill_during", "stop")            # the fault lands at a random point inside a call
KILLS = ("kill_before", "kill_after", "kill_during")
LOOP_LIMIT = 20.0 + 3 * TIMEOUT             # a looping rank that sees no error by then says OK
ACT_AFTER = 0.02                            # the looped fault waits this long after call 1
# ... or, a kill, after the adaptive auto's first switch (PAPCOLL_ADAPT=K: its choice serves
# from call 2K+2), which sets up an algorithm: a death inside MPI's window creation holds the
# others there for ever (docs/failures.md). A stop may land there: the others go on with it.
ADAPT = int(os.environ.get("PAPCOLL_ADAPT", "0") or 0)
ACT_FROM = 2 * ADAPT + 2 if FAULT == "kill_during" and ADAPT else 1
SIGINT_AT, SIGINT_LATE = 0.2, 0.5           # sigint: the victim surely waits inside the call


def role(name):
    if name.isdigit():
        return int(name)
    last_node = ((size - 1) // NODE) * NODE if NODE else 0
    return {"first": 0, "last": size - 1, "master": last_node, "nonmaster": 1}[name]


victim = role(ROLE)
helper = victim + 1 if victim % 2 == 0 and victim + 1 < size else victim - 1   # stop: sends
                                               # SIGCONT (beside the victim: on its host)
is_victim = rank == victim
in_call = False                                # read by the victim's fault thread
usr1 = []                                      # hydra's SIGUSR1 after a death: noted, not fatal
signal.signal(signal.SIGUSR1, lambda *_: usr1.append(time.monotonic()))


def say(line):
    os.write(1, (line + "\n").encode())        # one write: hydra may split a line written in parts


def plan(call):
    """(algorithm, block) of this rank's call number ``call`` (from 1), None after the last."""
    if FAULT in LOOPED:
        return (NAME, BLOCK)
    odd = is_victim and call == {"alg_warm": 4, "size_warm": 4}.get(FAULT, 1)
    if FAULT.startswith("alg_"):
        both = [NAME, ALT[NAME], NAME, NAME][:1 if FAULT == "alg_cold" else 4]
        return (ALT[NAME] if odd else both[call - 1], BLOCK) if call <= len(both) else None
    if FAULT.startswith("size_"):
        both = [BLOCK, 2 * BLOCK, BLOCK, BLOCK][:1 if FAULT == "size_cold" else 4]
        return (NAME, 2 * BLOCK if odd else both[call - 1]) if call <= len(both) else None
    count = {"kill_before": 3, "kill_after": 3, "late": 2, "late_cold": 2, "sigint": 4}.get(FAULT, 1)
    return (NAME, BLOCK) if call <= count else None


def interrupt():
    say(f"CELL rank {rank}: VICTIM gets SIGINT {SIGINT_AT:g} s into call 3")
    os.kill(os.getpid(), signal.SIGINT)


def before(call):
    """The victim's misbehaviour at the start of a call (the non-looped faults)."""
    if FAULT == "sigint" and call == 3:
        if is_victim:
            threading.Timer(SIGINT_AT, interrupt).start()
        else:
            time.sleep(SIGINT_LATE)
    if not is_victim:
        return
    if (FAULT, call) in (("kill_before", 1), ("kill_after", 2)):
        say(f"CELL rank {rank}: VICTIM dies (SIGKILL) before call {call}")
        os.kill(os.getpid(), signal.SIGKILL)
    if (FAULT, call) in (("late", 2), ("late_cold", 1)):
        time.sleep(1.5 * TIMEOUT)


def act(calls_done):
    """Victim's thread for the looped faults: once inside a call after call ACT_FROM,
    misbehave."""
    while calls_done[0] < ACT_FROM:
        time.sleep(0.001)
    time.sleep(ACT_AFTER)
    while not in_call:                          # calls dominate the loop: this takes microseconds
        time.sleep(0.0001)
    what = signal.SIGKILL if FAULT == "kill_during" else signal.SIGSTOP
    say(f"CELL rank {rank}: VICTIM gets {what.name} inside a call ({calls_done[0]} done)")
    os.kill(os.getpid(), what)


def resume(pid):
    """Helper's thread for stop: SIGCONT the victim 2 x TIMEOUT after it is seen stopped."""
    end = time.monotonic() + LOOP_LIMIT
    while time.monotonic() < end:
        try:
            with open(f"/proc/{pid}/stat") as f:
                state = f.read().rsplit(")", 1)[1].split()[0]
        except OSError:
            return
        if state == "T":
            time.sleep(2 * TIMEOUT)
            say(f"CELL rank {rank}: SIGCONT to rank {victim} after {2 * TIMEOUT:g} s stopped")
            os.kill(pid, signal.SIGCONT)
            return
        time.sleep(0.001)


def outcome(kind, start, call, ok, text="", err=None):
    names = "".join(f" {a}={getattr(err, a)}" for a in ("missing", "gave_up", "ranks")
                    if err is not None and hasattr(err, a))
    say(f"CELL rank {rank}: {kind}{names} after {time.monotonic() - start:.2f} s in call {call}"
        f" ({ok} ok before){': ' + text if text else ''}")


def calls(pc):
    """Run this rank's calls until the first error; print the outcome line."""
    global in_call
    done = [0]
    if is_victim and FAULT in LOOPED:
        threading.Thread(target=act, args=(done,), daemon=True).start()
    start, call, loop_end = time.monotonic(), 0, time.monotonic() + LOOP_LIMIT
    try:
        while True:
            call += 1
            step = plan(call)
            if step is None or (FAULT in LOOPED and time.monotonic() > loop_end):
                return outcome("OK", start, call - 1, done[0])
            algorithm, nbytes = step
            send = pattern.send_bytes(rank, size, call, nbytes)
            want = pattern.recv_bytes(rank, size, call, nbytes)
            recv = np.empty_like(want)
            before(call)
            start = time.monotonic()
            in_call = True
            pc.Alltoall(send, recv, algorithm=algorithm)
            in_call = False
            if not np.array_equal(recv, want):
                return outcome("BADDATA", start, call, done[0], pattern.explain(recv, want, nbytes))
            done[0] += 1
    except BaseException as err:                # KeyboardInterrupt too (sigint)
        in_call = False
        outcome(type(err).__name__, start, call, done[0], str(err), err)


def leave(pids):
    """After a kill: wait (bounded) until every survivor has reported, then os._exit(0): hydra
    kills the job's other processes as soon as one leaves without MPI_Finalize, even under
    -disable-auto-cleanup, and MPI_Finalize would wait for the dead rank."""
    where = os.environ.get("FAULTS_DIR") or f"/tmp/papcoll-faults-{pids[0]}"
    os.makedirs(where, exist_ok=True)
    open(os.path.join(where, str(rank)), "w").close()
    end = time.monotonic() + 2 * TIMEOUT + 6
    while time.monotonic() < end and not all(
            os.path.exists(os.path.join(where, str(r))) for r in range(size) if r != victim):
        time.sleep(0.01)
    say(f"CELL rank {rank}: exits (SIGUSR1 {'seen' if usr1 else 'not seen'})")
    os._exit(0)


def main():
    faulthandler.dump_traceback_later(15 * TIMEOUT + 5)   # where a hung rank is, before the
                                                          # launcher kills it
    pids = world.allgather(os.getpid())
    if rank == 0:
        say(f"CELL victim {victim} pids {pids}")
    if is_victim and FAULT.startswith("settings_"):
        if FAULT == "settings_copy":            # at 4 KiB blocks pap_direct's scheme depends on it
            var = "PAPCOLL_COPY_THRESHOLD"
            value = "4096" if os.environ.get(var) == "65536" else "65536"
        else:
            var = "PAPCOLL_NODE_SIZE"
            value = str(NODE + 1 if NODE and NODE + 1 < size else max(NODE - 1, 1))
        os.environ[var] = value
    continuer = None
    if FAULT == "stop" and rank == helper:
        continuer = threading.Thread(target=resume, args=(pids[victim],), daemon=True)
        continuer.start()
    start = time.monotonic()
    try:
        pc = papcoll.Communicator(world)
    except papcoll.PapcollError as err:         # settings: the expected ConfigError
        outcome(type(err).__name__, start, 0, 0, str(err), err)
        pc = None
    if pc is not None:
        calls(pc)
    if FAULT in KILLS:
        leave(pids)
    if continuer is not None:                   # never finalize with the victim still stopped
        continuer.join()
    start, result = time.monotonic(), "ok"
    try:
        if pc is not None:
            pc.close()
    except BaseException as err:                # noqa: BLE001  (reported; the test fails it)
        result = f"{type(err).__name__}: {err}"
    say(f"CELL rank {rank}: closed in {time.monotonic() - start:.2f} s: {result}")
    MPI.Finalize()
    say(f"CELL rank {rank}: finalized")


main()
