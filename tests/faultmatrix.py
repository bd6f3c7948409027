"""The fault matrix's cells, launcher and judge (tests/test_faults.py runs it on the host,
tests/rdma/ samples it over verbs): one rank misbehaves -- killed before, during or after a
call, stopped for twice the timeout, interrupted, late, on another algorithm, block size or
wire setting -- and every live rank must, within PAPCOLL_TIMEOUT + a slack of entering its
call, either return the right data or raise the right papcoll error naming the right rank(s);
nothing may crash or hang, nothing may stay in /dev/shm, no process may outlive the job.
The worker is tests/mpi/faults.py.

Each rank runs under ``sh -c`` that ignores SIGUSR1 and turns a death by signal into an exit
status: hydra's proxy SIGKILLs the whole job once it reaps a rank that died by a signal
(MPICH 5 pmip.c), and sends SIGUSR1 (fatal to a plain sh) to every rank when one dies.
"""
import ast
import os
import re
import shutil
import signal
import subprocess
import sys
import time
import uuid

from launcher import HERE, MPIEXEC
from papcoll.bench import leftovers
from papcoll.node import segment

TIMEOUT, SLACK = 2.0, 3.0          # seconds: PAPCOLL_TIMEOUT, and what a call may take past it
KILLS = ("kill_before", "kill_after", "kill_during")
FAULTS = [*KILLS, "stop", "sigint", "late", "late_cold", "alg_cold", "alg_warm", "size_cold",
          "size_warm", "settings_copy", "settings_node"]
ZCOPY = {"PAPCOLL_COPY_THRESHOLD": "4096"}          # 64 KiB blocks go zero-copy, on every rank
FLAT = [("shm_pap", "shm_pap", 4096, {}), ("cma_pap", "cma_pap", 4096, {}),
        ("direct", "direct", 4096, {}), ("pap_direct-4K", "pap_direct", 4096, {}),
        ("pap_direct-64K-zcopy", "pap_direct", 65536, ZCOPY),
        ("pap_direct_copy", "pap_direct_copy", 4096, {}),
        ("pap_direct_zcopy", "pap_direct_zcopy", 4096, {})]
CONFIGS = {name: (3, algorithm, "last", block, env) for name, algorithm, block, env in FLAT}
CONFIGS.update({f"{algorithm}-ns{ns}-{role}": (ns + 2, algorithm, role, 4096,
                                               {"PAPCOLL_NODE_SIZE": str(ns)})
                for algorithm in ("shm_direct", "pap_shm_direct") for ns in (2, 3)
                for role in ("master", "nonmaster")})     # N=4: nodes 2+2; N=5: nodes 3+2
# Blocks read by CMA inside a node (above shm_layout.CMA_BLOCK), and one size whose odd call
# (2 x) crosses it: a board post meets a CMA post. No kill_during or stop of a master at 200K
# (NOT_HERE, even in the full matrix):
# a master killed or stopped while the other master writes it a 1.2 MB aggregate (mpi-rma,
# MPICH, one host) leaves that writer's give-up undelivered for seconds, so a rank awaiting both
# names the live writer too (docs/failures.md).
CONFIGS.update({"pap_shm_direct-ns2-nonmaster-200K": (4, "pap_shm_direct", "nonmaster", 200000,
                                                      {"PAPCOLL_NODE_SIZE": "2"}),
                "shm_direct-ns3-master-200K": (5, "shm_direct", "master", 200000,
                                               {"PAPCOLL_NODE_SIZE": "3"}),
                "pap_shm_direct-ns3-master-100K": (5, "pap_shm_direct", "master", 100000,
                                                   {"PAPCOLL_NODE_SIZE": "3"})})
# The adaptive auto (PAPCOLL_ADAPT=4): a meeting every 4 timed calls of the looped faults, so a
# kill or a stop lands in one as often as in a call; the others make too few calls for one.
# A band in the policy (tests/mpi/banded.json: pap_direct once a skew is agreed), without
# which a site is never timed nor agreed on. Blocks where auto runs papcoll's own algorithm
# (MPI's own call waits unbounded).
ADAPT = {"PAPCOLL_ADAPT": "4", "PAPCOLL_TUNING_FILE": str(HERE / "mpi" / "banded.json")}
CONFIGS.update({"auto-adapt": (3, "auto", "last", 4096, ADAPT),
                "auto-adapt-ns2-master": (4, "auto", "master", 8192,
                                          {**ADAPT, "PAPCOLL_NODE_SIZE": "2"})})
NOT_HERE = {"shm_direct-ns3-master-200K": "kill_during stop"}
DEFAULT = {  # config: faults. Every fault, every algorithm, masters and non-masters as victims
    "pap_direct-4K": " ".join(FAULTS),
    "shm_pap": "kill_during stop sigint late late_cold alg_warm size_cold",
    "cma_pap": "kill_during stop late_cold alg_cold size_warm",
    "direct": "kill_after stop late alg_warm size_warm",
    "pap_direct-64K-zcopy": "kill_during stop sigint late size_warm settings_copy",
    "pap_direct_copy": "kill_before sigint alg_cold alg_warm",
    "pap_direct_zcopy": "kill_during late size_cold alg_warm",
    "shm_direct-ns2-master": "kill_during stop late alg_warm",
    "shm_direct-ns2-nonmaster": "kill_before sigint size_cold",
    "shm_direct-ns3-master": "kill_after late_cold size_cold",
    "shm_direct-ns3-nonmaster": "kill_after sigint size_warm",
    "pap_shm_direct-ns2-master": "kill_before stop alg_cold",
    "pap_shm_direct-ns2-nonmaster": "kill_during stop late_cold size_cold",
    "pap_shm_direct-ns3-master": "kill_before sigint stop alg_cold settings_node",
    "pap_shm_direct-ns3-nonmaster": "kill_during late alg_warm",
    "pap_shm_direct-ns2-nonmaster-200K": "kill_during stop late_cold",
    "shm_direct-ns3-master-200K": "kill_after sigint late",
    "pap_shm_direct-ns3-master-100K": "size_cold size_warm",
    "auto-adapt": "kill_during stop late sigint",
    "auto-adapt-ns2-master": "kill_during stop",
}


def cells(full=False):
    """(fault, config) of the whole product, or of the DEFAULT subset."""
    return [(f, c) for c in CONFIGS for f in FAULTS
            if (full or f in DEFAULT.get(c, "").split()) and f not in NOT_HERE.get(c, "").split()]


OUTCOME = re.compile(r"(?P<kind>\w+)(?P<attrs>(?: \w+=(?:\[[^\]]*\]|None))*) after "
                     r"(?P<secs>[\d.]+) s in call (?P<call>\d+) \(\d+ ok before\)(?:: .*)?$")
CRASH = re.compile(r"Segmentation fault|Aborted|core dumped|Bus error|Traceback")


def job_processes(marker):
    """Live processes whose environment holds ``marker`` (hydra setsid()s every rank, so the
    session does not find them)."""
    found = []
    for pid in filter(str.isdigit, os.listdir("/proc")):
        try:
            with open(f"/proc/{pid}/environ", "rb") as f:
                env = f.read().split(b"\0")
            with open(f"/proc/{pid}/stat") as f:
                state = f.read().rsplit(")", 1)[1].split()[0]
        except OSError:
            continue
        if marker in env and state != "Z":
            found.append(int(pid))
    return found


def native_stacks(pids):
    """Where each rank of ``pids`` is, in C (gdb, where there is one): a hang inside a native
    call shows in the worker's Python traceback only as that call's line."""
    if shutil.which("gdb") is None:
        return ""
    said = []
    for pid in pids:
        try:
            with open(f"/proc/{pid}/cmdline", "rb") as f:
                if b"faults.py" not in f.read() or not os.path.basename(
                        os.readlink(f"/proc/{pid}/exe")).startswith("python"):
                    continue                      # hydra, or a rank's sh wrapper
            out = subprocess.run(["gdb", "-batch", "-p", str(pid), "-ex",
                                  "thread apply all bt 20"],
                                 capture_output=True, text=True, timeout=30).stdout
        except (OSError, subprocess.TimeoutExpired):
            continue
        frames = [x for x in out.splitlines() if x.startswith(("#", "Thread "))]
        said.append(f"\n--- process {pid}, native:\n" + "\n".join(frames[:60]))
    return "".join(said)


def run_cell(n, fault, argv, env, tmp_path, timeout=TIMEOUT, flags=()):
    """Launch one cell with PAPCOLL_TIMEOUT=``timeout`` (``flags``: mpiexec's, before -n);
    return (output, returncode, problems of the launch itself)."""
    tag = f"PAPCOLL_FAULTS_JOB={uuid.uuid4().hex}"
    before = leftovers.snapshot()
    full_env = {k: v for k, v in os.environ.items()
                if k not in ("PAPCOLL_NODE_SIZE", "PAPCOLL_COPY_THRESHOLD", "PAPCOLL_ALGORITHM",
                             "PAPCOLL_ADAPT", "PAPCOLL_TUNING_FILE")}
    full_env.update(env, PAPCOLL_TIMEOUT=f"{timeout:g}", FAULTS_DIR=str(tmp_path))
    full_env.update([tag.split("=")])
    cmd = [MPIEXEC, *flags, *(["-disable-auto-cleanup"] if fault in KILLS else []), "-n", str(n),
           "sh", "-c", 'trap "" USR1; "$@"; exit $?', "sh",
           sys.executable, "-m", "mpi4py", str(HERE / "mpi" / "faults.py"), *map(str, argv)]
    problems = []
    with open(tmp_path / "out", "w+") as out:     # a file: a straggler cannot hold a pipe open
        proc = subprocess.Popen(cmd, env=full_env, stdout=out, stderr=subprocess.STDOUT,
                                start_new_session=True)
        try:
            rc = proc.wait(15 * timeout + 15)    # the worker's own limits end it first
        except subprocess.TimeoutExpired:
            problems.append(f"the job did not end in {15 * timeout + 15:g} s (a hang)"
                            + native_stacks(job_processes(tag.encode())))
            os.killpg(proc.pid, signal.SIGKILL)
            rc = proc.wait()
        end = time.monotonic() + 3
        while (left := job_processes(tag.encode())) and time.monotonic() < end:
            time.sleep(0.05)
        if left:
            problems.append(f"processes left behind: {left}")
            for pid in left:
                os.kill(pid, signal.SIGKILL)
        out.seek(0)
        text = out.read()
    leftovers.remove_new(before)              # MPICH's own files of a job that lost a rank
    return text, rc, problems


def judge(fault, r, victim, kind, attrs, line, finished=frozenset()):
    """Problems with rank r's outcome: ``kind`` (OK, BADDATA or the exception's class),
    ``attrs`` (missing, gave_up, ranks), ``line`` (with the message). ``finished``: the live
    ranks whose own outcome shows they finished r's call -- after r's deadline, if r names
    them: "no sign of them" was then true, so r may name them beside the victim (the rare
    case in docs/failures.md), never instead of it. A stop inside MPI's blocking set-up call
    (window or communicator creation) holds every rank there: each then names nobody, as MPI
    cannot say which rank held it (rendezvous.held)."""
    msg = line.split(" ok before): ", 1)[-1]
    if (fault == "stop" and kind == "PapcollTimeoutError" and attrs.get("missing", []) is None
            and "inside MPI's blocking call" in msg):
        return []
    missing, gave_up, ranks = (set(attrs.get(k) or []) for k in ("missing", "gave_up", "ranks"))
    named = missing | gave_up | ranks
    if r in named:
        return [f"rank {r} names itself"]
    if kind == "BADDATA":
        return [f"rank {r} got wrong data"]
    if fault.startswith("settings_"):
        var = "PAPCOLL_COPY_THRESHOLD" if fault == "settings_copy" else "PAPCOLL_NODE_SIZE"
        if kind != "ConfigError" or var not in msg or not re.search(
                rf"ranks? [\d, ]*\b{victim}\b", msg):
            return [f"rank {r}: {kind}, want ConfigError naming {var} and rank {victim}"]
        return []
    # An error passed on by a rank that gave up ("rank X gave up on ...: <its error>") names
    # X in err.ranks and the cause in the quoted error; "cannot complete" (the wait ended early
    # because ranks gave up) lists as missing those not seen yet, without blaming them.
    relay = re.match(r"rank (\d+) gave up on ", msg)
    if relay and re.search(rf"\brank {victim} (?:called|is at|gave up)\b|"
                           rf"rank\(s\) \[(?:\d+, )*{victim}\b", msg):
        named.add(victim)
    blame = ranks - ({int(relay[1])} if relay else set())
    if "cannot complete" not in msg:
        blame |= missing - gave_up
    mismatch = fault.startswith(("alg_", "size_"))
    want = ("MismatchError", "PapcollTimeoutError") if mismatch else ("PapcollTimeoutError",)
    if fault in KILLS:           # a death may show as the transport's error naming the dead:
        want += ("TransportError",)            # CMA reads of it fail with "No such process"
    if r != victim:
        if kind not in want:
            return [f"rank {r}: {kind}, want {' or '.join(want)}"]
        if victim not in named:
            return [f"rank {r}: {kind} does not name rank {victim}"]
        if blame - {victim} - finished:
            return [f"rank {r}: {kind} blames live rank(s) {sorted(blame - {victim} - finished)}"]
        if victim in gave_up and not mismatch and fault != "sigint":
            return [f"rank {r}: says rank {victim} gave up; it was {fault}"]
        return []
    if (fault == "sigint" and kind == "KeyboardInterrupt") or (
            kind == "OK" and fault in ("late", "late_cold")):   # OK: the data was checked
        return []
    if kind not in ("PapcollTimeoutError", "MismatchError") or not named:
        return [f"rank {r} (victim): {kind}, want the right data or an error naming others"]
    if not mismatch and blame:                 # every other rank gave up on it
        return [f"rank {r} (victim): {kind} blames rank(s) {sorted(blame)}, which gave up"]
    return []


def check(fault, n, text, rc, problems, timeout=TIMEOUT, slack=SLACK):
    """Problems with a cell's output ``text`` (and ``rc``, the launch's ``problems``)."""
    head = re.search(r"CELL victim (\d+) pids (\[[\d, ]*\])", text)
    if head is None:
        return problems + ["no start line: the job failed before its first step"]
    victim, pids = int(head[1]), ast.literal_eval(head[2])
    lines = {r: [] for r in range(n)}
    for r, rest in re.findall(r"CELL rank (\d+): (.*?)(?=CELL |\n|\Z)", text):
        lines[int(r)].append(rest.strip())
    live = [r for r in range(n) if not (fault in KILLS and r == victim)]
    outcomes = {r: [m for m in map(OUTCOME.match, lines[r]) if m] for r in live}
    ended = {r: int(found[0]["call"]) + (found[0]["kind"] == "OK")   # the call it did not finish
             for r, found in outcomes.items() if len(found) == 1 and found[0]["kind"] != "BADDATA"}
    for r in live:
        found = outcomes[r]
        if len(found) != 1:
            problems.append(f"rank {r}: {len(found)} outcome lines (a crash or hang if 0)")
            continue
        m = found[0]
        attrs = {k: ast.literal_eval(v) for k, v in re.findall(r"(\w+)=(\[[^\]]*\]|None)",
                                                                m["attrs"])}
        bound = timeout + slack + (2 * timeout if fault == "stop" and r == victim else 0)
        if fault == "sigint" and r == victim:
            bound = 0.5 + timeout / 2          # SIGINT 0.2 s in; Ctrl-C gets through in 0.1 s
        if float(m["secs"]) > bound:
            problems.append(f"rank {r}: its call took {m['secs']} s > {bound:g} s")
        finished = {q for q, call in ended.items() if r in ended and call > ended[r]}
        problems += judge(fault, r, victim, m["kind"], attrs, m.group(0), finished)
        if fault in KILLS and not any(x.startswith("exits") for x in lines[r]):
            problems.append(f"rank {r}: did not reach os._exit after reporting")
        if fault not in KILLS:
            closed = [re.match(r"closed in ([\d.]+) s: (.*)", x) for x in lines[r]]
            closed = [c for c in closed if c]
            if not closed or closed[0][2] != "ok" or float(closed[0][1]) > timeout + slack:
                problems.append(f"rank {r}: close() did not end cleanly and in time")
            if "finalized" not in lines[r]:
                problems.append(f"rank {r}: did not get through MPI.Finalize()")
    event = {"kill_before": "VICTIM dies", "kill_after": "VICTIM dies",
             "kill_during": "VICTIM gets SIGKILL", "stop": "VICTIM gets SIGSTOP",
             "sigint": "VICTIM gets SIGINT"}.get(fault)
    if event and not any(x.startswith(event) for x in lines[victim]):
        problems.append(f"the fault did not happen (no '{event}' line)")
    if fault == "stop" and not any("SIGCONT" in x for r in lines for x in lines[r]):
        problems.append("the victim was never continued")
    if fault not in KILLS and rc != 0:
        problems.append(f"mpiexec returned {rc} (a rank crashed, e.g. at MPI_Finalize)")
    if CRASH.search(text):
        problems.append(f"crash reported: {CRASH.search(text)[0]}")
    shm = [x for x in os.listdir(segment.SHM_DIR)
           if x.startswith(tuple(f"{segment.PREFIX}{p}-" for p in pids))]
    if shm:
        problems.append(f"left in {segment.SHM_DIR}: {shm}")
        for x in shm:
            os.unlink(os.path.join(segment.SHM_DIR, x))
    return problems


def assert_cell(fault, config, tmp_path, timeout=TIMEOUT, slack=SLACK, env=None, flags=()):
    """Run ``fault`` on ``config`` (a CONFIGS value: N, algorithm, victim, block, environment)
    with ``env`` added, and fail on any problem."""
    n, algorithm, role, block, cell_env = config
    text, rc, problems = run_cell(n, fault, [fault, algorithm, role, block],
                                  {**cell_env, **(env or {})}, tmp_path, timeout, flags)
    problems = check(fault, n, text, rc, problems, timeout, slack)
    cells = "\n".join(x for x in text.splitlines() if "UCX  WARN" not in x)
    assert not problems, "\n".join(problems) + "\n--- output:\n" + cells[-6000:]
