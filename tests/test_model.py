"""The model's engine (papcoll/model): against cases computed by hand -- one message, incast,
a balanced Direct at N = 2, a late process under PAP Direct --, every algorithm to its end on
odd and uneven shapes, and the aggregation against the full simulation. Its parameter file and
command line: test_model_tools.py."""
import numpy as np
import pytest

from papcoll.model import extra, params, predict, protocols, timing
from papcoll.model.sim import Complete, Cpu, Deadlock, Put, Sim, Wait

from model_values import M, VALUES


def run(procs, nodes, arrive):
    return Sim(M, nodes).run(procs, arrive)


def test_one_message_lands_after_o_L_and_its_bytes_then_a_poll():
    net = M.link("net")

    def sender():
        yield Put(1, 100, ("x",), net)

    def receiver():
        yield Wait((("x",),))

    # posted at 1 (o), in at 1 + 2 + 100 x 0.01 = 4, seen a poll later
    assert run([sender(), receiver()], [[0], [1]], [0, 0]) == [1.0, 4.1]


def test_a_write_its_target_must_answer_waits_for_the_turn_of_each_that_shares_its_cpu():
    """A write into given memory that takes the target's answer (MPI RMA into a window MPI did
    not allocate), between processes bound to different CPUs, lands wake (5) later for each of
    the two whose CPU holds another process; on one CPU, unanswered or unbound, at L."""
    def landed(placement, dst, answered=1, n=3):
        m = params.make(**{**VALUES, "wake": 5.0, "placement": placement,
                           "net_given_answered": answered})

        def sender():
            yield Put(dst, 100, ("x",), m.link("net_given"))

        def receiver(r):
            if r == dst:
                yield Wait((("x",),))

        procs = [sender()] + [receiver(r) for r in range(1, n)]
        return Sim(m, [[r] for r in range(n)]).run(procs, [0] * n)[dst]

    # posted at 1 (o), in at 1 + 2 + 100 x 0.01 = 4 (test above), seen a poll later
    assert landed([0, 1, 0], 1) == pytest.approx(4.1 + 5)        # rank 0 shares CPU 0
    assert landed([0, 1, 0, 1], 1, n=4) == pytest.approx(4.1 + 10)   # both share theirs
    assert landed([0, 1, 0], 2) == landed([0, 1, 2], 1) == pytest.approx(4.1)
    assert landed([0, 1, 0], 1, answered=0) == landed([], 1) == pytest.approx(4.1)
    assert landed([0, 1, 0, 1], 1) == pytest.approx(4.1)        # not this job's placement


def test_a_write_above_copied_completes_ack_after_it_lands_and_complete_waits_for_it():
    net = M.link("net")

    def sender(nbytes):
        yield Put(1, nbytes, ("x",), net)
        yield Complete()

    def receiver():
        yield Wait((("x",),))

    # 2000 B (above net_copied, 1000): posted at 1, through both NICs in 20, in at 1 + 20 + 2
    # = 23; complete at its poster 1.5 (ack) later, seen a poll after
    assert run([sender(2000), receiver()], [[0], [1]], [0, 0]) == \
        pytest.approx([24.6, 23.1])
    # 1000 B: copied at the post, so the poster is done once it has posted (at 1)
    assert run([sender(1000), receiver()], [[0], [1]], [0, 0]) == pytest.approx([1.0, 13.1])


def test_papcolls_writes_inside_a_node_take_its_own_latency_by_as_much_less():
    """net_local_L 0.5 against net_L 2: a write between two processes of one node lands 1.5
    sooner, on every link (the exposed one too); between nodes nothing moves."""
    near = params.make(**{**VALUES, "net_local_L": 0.5})
    c, far = protocols.Call(near, [[0, 1], [2]], 8), protocols.Call(M, [[0, 1], [2]], 8)
    for link in (c.net, c.exposed):
        assert c.to(0, 1, link).L == pytest.approx(link.L - 1.5) and c.to(0, 2, link) == link
    assert far.to(0, 1, far.net) == far.net
    nodes, zero = [[0, 1], [2, 3]], np.zeros(4)
    for name in ("pap_direct_copy", "pap_direct_zcopy", "direct"):
        assert predict.call_time(near, nodes, 8, name, zero) < \
            predict.call_time(M, nodes, 8, name, zero)
        assert predict.call_time(near, [[0], [1]], 8, name, zero[:2]) == \
            pytest.approx(predict.call_time(M, [[0], [1]], 8, name, zero[:2]))


def test_shm_direct_raises_its_done_flag_once_its_own_aggregate_completes_pap_shm_direct_not():
    """2 x 2, an aggregate 4 x 300 B, above net_copied: balanced, both masters' aggregates land
    at once, so shm_direct's master raises its flag ack later than it would without the wait,
    and its node's other process finishes that much later; pap_shm_direct's flag goes as the
    other aggregate lands, and only its master waits, at its end."""
    nodes, zero = protocols.shape(2, 2), [0.0] * 4
    never = params.make(**{**VALUES, "net_copied": 1 << 62})

    def ends(machine, name):
        c = protocols.Call(machine, nodes, 300)
        return Sim(machine, nodes).run([protocols.PAPCOLL[name](c, p) for p in range(4)], zero)

    sd, sd0 = ends(M, "shm_direct"), ends(never, "shm_direct")
    assert sd[1] - sd0[1] == pytest.approx(1.5) and sd[3] - sd0[3] == pytest.approx(1.5)
    psd, psd0 = ends(M, "pap_shm_direct"), ends(never, "pap_shm_direct")
    assert psd[1] == pytest.approx(psd0[1]) and psd[3] == pytest.approx(psd0[3])
    assert psd0[0] < psd[0] <= psd0[0] + 1.5 + 0.1


def test_a_wait_that_waits_on_a_shared_core_pays_wake_and_one_that_does_not_wait_does_not():
    sharing = params.make(**{**VALUES, "cores": 1, "wake": 3.0})   # two processes a core
    net = sharing.link("net")

    def sender():
        yield Put(1, 100, ("x",), net)

    def waits():                     # waiting from 0: in at 1 x 2 (o, stretched) + 2 + 1 = 5
        yield Wait((("x",),))

    def late():                      # comes at 10: it is already there
        yield Wait((("x",),))

    def idle():
        yield from ()

    nodes = [[0, 2], [1, 3]]
    # the poll stretched by two; a wait that waited adds wake; the late one only polls
    assert Sim(sharing, nodes).run([sender(), waits(), idle(), idle()], [0, 0, 0, 0])[1] \
        == pytest.approx(5 + 2 * 0.1 + 3)
    assert Sim(sharing, nodes).run([sender(), late(), idle(), idle()], [0, 10, 0, 0])[1] \
        == pytest.approx(10 + 2 * 0.1)
    # one process a core: no wake
    assert Sim(sharing, [[0], [1]]).run([sender(), waits()], [0, 0])[1] == pytest.approx(4.1)


def test_wake_is_the_mean_of_rounds_without_their_preemptions_not_a_mode_the_median_picks():
    # rounds either quick (all on a core) or a scheduler's slice, and five preemptions
    quick, slice_, preempted = [2.0] * 50, [12.0] * 50, [5000.0] * 5
    # a round more of either mode moves the median from one mode to the other
    assert np.median(quick + slice_ + [2.0]) == 2.0 and np.median(quick + slice_ + [12.0]) == 12.0
    # the mean of the quickest 95 % (99 of 105: the preemptions and one slice out) does not
    assert timing.usual(quick + slice_ + preempted) == pytest.approx((100 + 49 * 12) / 99)
    assert timing.usual([3.0]) == 3.0


def test_an_algorithms_extra_comes_before_its_protocol_and_calibrate_takes_it_as_what_is_left():
    nodes, zero = [[0], [1]], np.zeros(2)
    plain = predict.call_time(M, nodes, 8, "pap_direct_copy", zero)
    more = params.make(**{**VALUES, "extra": {"pap_direct_copy": 5.0}})
    # both start 5 later, and nothing else moves: the mean time in the call grows by 5
    assert predict.call_time(more, nodes, 8, "pap_direct_copy", zero) == pytest.approx(plain + 5)
    assert predict.call_time(more, nodes, 8, "direct", zero) == \
        pytest.approx(predict.call_time(M, nodes, 8, "direct", zero))
    assert extra.residuals(M, nodes, {"pap_direct_copy": plain + 3, "direct": 0.0}) == \
        pytest.approx({"pap_direct_copy": 3.0, "direct": 0.0})
    assert "shm_pap" in extra.names(False) and "shm_pap" not in extra.names(True)


def test_calibration_takes_the_usual_time_and_extras_rounds_fit_its_budget():
    # the mean of the quickest 95 %: one preemption in 20 is left out, the spread is not
    times = [1.0] * 10 + [3.0] * 9 + [500.0]
    assert timing.usual(times) == pytest.approx((10 + 27) / 19)
    assert min(times) == 1.0 and np.median(times) == 2.0
    # a quick pair: every round; a pair whose round takes 1 s: 10 timed (not 200 s), 1 warm
    assert (extra.BUDGET, extra.LEAST) == (5.0, 10)
    assert extra.rounds(0.001) == (extra.WARM, extra.CALLS)
    assert extra.rounds(1.0) == (1, 10)
    assert extra.rounds(0.05) == (extra.WARM, 100)
    assert extra.rounds(100.0) == (1, 10)


def test_tail_is_the_median_algorithms_mean_over_its_usual_and_stretches_every_call():
    # a: one call in 20 twenty times as long (mean 2, usual 1); b: none; c: mean 2.1, usual 2
    times = {"a": [1.0] * 19 + [21.0], "b": [1.0] * 20, "c": [2.0] * 19 + [4.0]}
    assert extra.tail_of(times) == pytest.approx(1.05)
    nodes, late = [[0], [1]], np.array([0.0, 4.0])
    slow = params.make(**{**VALUES, "tail": 1.5})
    for name in ("mpi", "pap_direct", "pap_shm_direct"):
        assert predict.call_time(slow, nodes, 8, name, late) == \
            pytest.approx(1.5 * predict.call_time(M, nodes, 8, name, late))
    with pytest.raises(params.ParamsError, match="tail"):
        params.make(**{**VALUES, "tail": 0.9})      # a mean is never below its quickest 95 %


def test_incast_queues_at_the_receiving_nic():
    net = M.link("net")

    def sender():
        yield Put(2, 100, ("x", "from"), net)

    def receiver():
        yield Wait((("x", "from"),))

    s0, s1 = sender(), sender()
    # Both posted at 1, their bytes coming in from 3; node 2's NIC shares its time between the
    # two, 1 each: both are in at 5 (first come, first served, the first would be in at 4).
    end = run([s0, s1, receiver()], [[0], [1], [2]], [0, 0, 0])
    assert end[2] == pytest.approx(5.1)

    def two(tag):
        yield Put(2, 100, ("x", tag), net)

    def both():
        yield Wait((("x", 0), ("x", 1)))

    end = run([two(0), two(1), both()], [[0], [1], [2]], [0, 0, 0])
    assert end[2] == pytest.approx(5.1)


def test_a_nic_shares_its_time_among_the_messages_it_has():
    """Not first come, first served: a second message posted while the first is on the wire
    slows it (nic.py), so a receiver served first does not get all its data before the next
    gets any."""
    net = M.link("net")

    def sender():
        yield Put(1, 300, ("x",), net)
        yield Put(2, 300, ("x",), net)

    def receiver():
        yield Wait((("x",),))

    # Out: the first posted at 1 (3 of work), alone to 2, then shared: in at 6 and 7, its
    # last byte L = 2 later; in at node 1: from 3 (its first byte), alone to 4, then shared
    # with the second's (from 4): taken at 8 and 9. Landed at 8 and 9, seen a poll later.
    end = run([sender(), receiver(), receiver()], [[0], [1, 2]], [0, 0, 0])
    assert end == pytest.approx([2.0, 8.1, 9.1])


def test_a_balanced_direct_at_two_matches_the_hand_count():
    # entry 3; advert posted at 4, lands 4 + 2 + 40 x 0.01 = 6.4; own copy ends 4.6; the
    # peer's advert seen at 6.5; data posted 7.5 (the NIC free since 4.5), in 7.5 + 2 + 1 =
    # 10.5 (the NIC took the advert at 6.4); seen 10.6.
    c = protocols.Call(M, [[0], [1]], 100)
    end = run([protocols.direct(c, 0), protocols.direct(c, 1)], [[0], [1]], [0, 0])
    assert end == pytest.approx([10.6, 10.6])


def test_a_large_message_inside_a_machine_is_read_across_where_the_library_does():
    """MPICH from 8 KiB inside a machine, Open MPI past its eager limit: a request to send, the
    receiver's CMA read, its word back (mpi_algorithms.SINGLE_COPY); between hosts, and in
    MVAPICH 1.0 (not known), a request, a clear to send and the data."""
    # N = 2, 16384 B: MPICH's isend/irecv. Entry 2; own block copied 0.5 + 16.384: 18.884; the
    # request posted 19.084 (o 0.2), in 19.384 (L 0.3), seen 19.484; the read 1 + 32.768 + 4
    # pages x 0.5: 55.252; its end posted 55.452, in 55.752, seen 55.852.
    def call(machine, nodes, library):
        return predict.call_time(machine, nodes, 16384, "mpi", np.zeros(2), library)
    assert call(M, [[0, 1]], "mpich") == pytest.approx(55.852)
    # between emulated nodes on one machine, the same with MPI's inter-node o 1 and L 2:
    # request posted 19.884, in 21.884, seen 21.984; read to 57.752; its end seen 60.852
    one_machine = params.make(**{**VALUES, "mpi_inter_shared": 1})
    assert call(one_machine, [[0], [1]], "mpich") == pytest.approx(60.852)
    # Open MPI (pairwise) inside: the same read; MVAPICH 1.0: the request seen 19.484; the
    # clear posted 19.684, in 19.984, seen 20.084; the data copied by the sender, 0.2 +
    # 16.384: 36.668, in 36.968, seen 37.068
    assert call(M, [[0, 1]], "openmpi") == pytest.approx(55.852)
    assert call(M, [[0, 1]], "mvapich1") == pytest.approx(37.068)
    # MPICH between hosts (NICs): the request posted 19.884, in 21.884 (L 2), seen 21.984; the
    # clear posted 22.984, in 24.984, seen 25.084; the data posted 26.084, through both NICs
    # in 163.84 (16384 x 0.01), in 26.084 + 163.84 + 2 = 191.924, seen 192.024
    assert call(M, [[0], [1]], "mpich") == pytest.approx(192.024)


def test_a_late_process_under_pap_direct_finds_its_peers_data_waiting():
    # 0: entry 3, a poll 3.1, write posted 4.1 (in at 1 at 7.1), own copy to 4.7, waits.
    # 1 comes at 100: entry 103, a poll finds 0's data: 103.1, write posted 104.1 (in at 0 at
    # 107.1), own copy 104.7, 0's block seen 104.8 and copied out by 105.4. 0 sees 1's at
    # 107.2 and copies it out by 107.8.
    c = protocols.Call(M, [[0], [1]], 100)
    end = run([protocols.pap_direct_copy(c, 0), protocols.pap_direct_copy(c, 1)],
              [[0], [1]], [0, 100])
    assert end == pytest.approx([107.8, 105.4])
    t = predict.call_time(M, [[0], [1]], 100, "pap_direct_copy", np.array([0.0, 100.0]))
    assert t == pytest.approx((107.8 + 5.4) / 2)


@pytest.mark.parametrize("nodes", [[[0]], [[0, 1, 2]], [[0], [1], [2]], [[0, 1], [2]],
                                   [[0, 1], [2, 3], [4]], [[0, 1, 2], [3, 4]]],
                         ids=lambda n: "x".join(str(len(r)) for r in n))
@pytest.mark.parametrize("block", [0, 8, 100000])
@pytest.mark.parametrize("library", sorted(predict.mpi_algorithms.SELECTION))
def test_every_algorithm_ends_and_no_process_before_the_last_arrives(nodes, block, library):
    """Nobody can finish an alltoall before every block for it exists, so before the last
    process has arrived; and every algorithm's protocol runs to its end on odd and uneven
    shapes (a protocol waiting for a message nobody sends would deadlock the engine)."""
    rng = np.random.default_rng(7)
    for algorithm in predict.runnable(nodes):
        arrive = rng.uniform(0, 50, sum(map(len, nodes)))
        c = protocols.Call(M, nodes, block)
        procs = ([predict.mpi_algorithms.protocol(c, library)(c, p) for p in range(c.size)]
                 if algorithm == "mpi" else
                 [predict.ALGORITHMS[algorithm](c, p) for p in range(c.size)])
        end = Sim(M, nodes).run(procs, arrive)
        assert min(end) >= max(arrive), algorithm


def test_a_protocol_that_waits_for_nothing_sent_is_named():
    def waits():
        yield Cpu(1.0)
        yield Wait((("never",),))
    with pytest.raises(Deadlock, match=r"ranks 0 \(waiting for \(\('never',\),\)\)"):
        run([waits()], [[0]], [0])


def test_pap_direct_runs_as_the_scheme_its_threshold_picks(monkeypatch):
    """What the benchmark records for pap_direct: copy-based up to the threshold in force,
    zero-copy above it -- the rule the model plays (protocols.pap_direct)."""
    from papcoll.algorithms import pap_direct
    monkeypatch.setenv("PAPCOLL_COPY_THRESHOLD", "1024")
    assert pap_direct.runs_as(1024, 4) == "pap_direct_copy"
    assert pap_direct.runs_as(1025, 4) == "pap_direct_zcopy"
    c = protocols.Call(params.make(**{**VALUES, "copy_threshold": 1024}),
                       protocols.shape(2, 1), 1025)
    assert isinstance(next(protocols.pap_direct(c, 0)), Cpu)
    assert any(isinstance(a, Put) and a.key[0] == "advert" for a in protocols.pap_direct(c, 0))


def test_a_message_standing_for_several_costs_them_all_and_lands_with_the_last():
    net = M.link("net")

    def sender():
        yield Put(1, 100, ("x",), net, count=3)

    def receiver():
        yield Wait((("x",),), any=True)

    # CPU 3 o = 3; the NIC sends 3 of max(g, 100 G) = 1 each: the last leaves at 5, lands at
    # 5 + 2 + 1 = 8; seen with a poll for each of the 3 it stands for: 8.3
    assert run([sender(), receiver()], [[0], [1]], [0, 0]) == pytest.approx([3.0, 8.3])


def test_aggregation_shares_the_other_nodes_out_evenly_and_keeps_the_last_arrival():
    from papcoll.model import aggregate
    assert aggregate.plan(4, 8) is None
    nodes, weight, groups = aggregate.plan(1024, 64)
    assert [len(n) for n in nodes] == [64] * 4 and weight == 341.0
    assert sorted(sum(groups, [])) == list(range(1, 1024)) and {len(g) for g in groups} == {341}
    row = np.random.default_rng(3).uniform(0, 1, 7 * 2)
    nodes, weight, groups = aggregate.plan(7, 2)
    got = aggregate.arrivals(row, 2, groups)
    assert weight == 2.0 and list(got[:2]) == list(row[:2])
    assert got.max() == row.max()
    assert list(got[2:4]) == list(row.reshape(7, 2)[groups[0]].max(axis=0))


def test_the_aggregated_simulation_stays_near_the_exact_one_where_both_run():
    """16 nodes of 2 on 4 simulated ones: every algorithm within 30 % of the exact simulation
    (docs/model.md gives check-aggregation's figures on calibrated parameters)."""
    from papcoll.model import aggregate
    nodes = protocols.shape(16, 2)
    exact = predict.predict(M, nodes, [8, 65536], [1, 32], calls=4)
    agg = predict.predict(M, nodes, [8, 65536], [1, 32], calls=4,
                          aggregated=aggregate.plan(16, 2))
    for e, a in zip(exact, agg):
        assert abs(a["us"] / e["us"] - 1) < 0.3, (e, a)


def test_a_cells_calls_stop_once_every_mean_is_settled_and_pap_direct_shares_its_protocols_run(
        monkeypatch):
    """By default a cell takes calls until every algorithm's mean has a standard error within
    1 % (two at least, 30 at most), the first of the same draws an explicit count takes; and
    pap_direct is simulated once with the protocol it runs, unless its extra differs."""
    assert not predict.settled([[5.0]]) and predict.settled([[5.0, 5.0], [1.0, 1.01]])
    assert not predict.settled([[5.0, 5.0], [1.0, 1.1]])
    simulated = []
    real = predict.call_time

    def counted(machine, nodes, block, algorithm, row, *rest):
        simulated.append((algorithm, real(machine, nodes, block, algorithm, row, *rest)))
        return simulated[-1][1]
    monkeypatch.setattr(predict, "call_time", counted)
    nodes, names = protocols.shape(2, 2), ["pap_direct", "pap_direct_copy", "mpi"]
    calm = predict.predict(M, nodes, [8], [1], names)
    assert {a for a, _ in simulated} == {"pap_direct", "mpi"}
    times = [[t for a, t in simulated if a == name] for name in ("pap_direct", "mpi")]
    k = len(times[0])
    assert 2 < k < predict.CALLS and predict.settled(times)
    assert not predict.settled([t[:-1] for t in times])
    assert calm == predict.predict(M, nodes, [8], [1], names, calls=k)
    assert calm[0]["us"] == calm[1]["us"]
    del simulated[:]
    predict.predict(M, nodes, [8], [512], names)              # calls far apart: all 30
    assert len(simulated) == 2 * predict.CALLS
    del simulated[:]
    slower = params.make(**{**VALUES, "extra": {"pap_direct": 1.0}})
    rows = predict.predict(slower, nodes, [8], [1], names, calls=1)
    assert [a for a, _ in simulated] == names and rows[0]["us"] > rows[1]["us"]


@pytest.mark.parametrize("pap", [True, False])
def test_the_papers_master_copies_each_aggregate_in_before_its_flag(pap):
    """The paper's PAP_Shm_Direct and Shm_Direct (staged): on 2 nodes of 1, each master ends
    one copy of the landed aggregate (1 block of 100 B: 0.5 + 0.1) after papcoll's."""
    nodes = protocols.shape(2, 1)

    def ends(staged):
        c = protocols.Call(M, nodes, 100)
        return run([protocols.hierarchical(c, p, pap, staged) for p in (0, 1)], nodes, [0, 0])
    assert np.allclose(np.subtract(ends(True), ends(False)), [0.6, 0.6])


def test_a_copy_slows_with_the_memory_its_call_touches():
    """copy_G by footprint: the nearest measured one outside them, log-linear between."""
    m = params.make(**{**VALUES, "copy_G": [[1000, 0.001], [100000, 0.002]]})
    assert m.copy(100, 10) == pytest.approx(0.5 + 0.1)
    assert m.copy(100, 10000) == pytest.approx(0.5 + 0.15)      # halfway, in log
    assert m.copy(100, 10 ** 6) == pytest.approx(0.5 + 0.2)
    c = protocols.Call(m, protocols.shape(2, 1), 5000)           # touches 2 x 2 x 5000 B
    assert c.copy().seconds == pytest.approx(m.copy(5000, 20000))
    for bad in ([[1000, 0.001], [1000, 0.002]], [[0, 0.001]], [[1000]]):
        with pytest.raises(params.ParamsError, match="copy_G"):
            params.make(**{**VALUES, "copy_G": bad})
