"""EASY backfill's rules, as ``slurm_backfill`` keeps them, on hand-built snapshots.

Each test names the rule it checks; the numbers are chosen so that breaking the rule changes
which jobs start (a reservation delayed, a long job backfilled onto reserved GPUs, a job of a
GPU type the cluster lacks holding the queue back).
"""

from __future__ import annotations

from gpufair.model import ClusterState, Job, JobState, Node, ThroughputProfile
from gpufair.policy.base import PolicyConfig
from gpufair.policy.registry import create_policy
from gpufair.policy.slurm_backfill import SlurmBackfillPolicy, batch_ends


def job(jid: str, gpus: int, *, arrival: float = 0.0, limit: float | None = 100.0,
        held: tuple[str, ...] = (), start: float | None = None, nodes: int | None = None,
        types: tuple[str, ...] = ("v100",), gpu_types: tuple[str, ...] | None = None) -> Job:
    rates = {(t, gpus): 1.0 for t in types}
    return Job(id=jid, gpus=gpus, arrival_s=arrival, time_limit_s=limit, gpus_held=held,
               state=JobState.RUNNING if held else JobState.PENDING,
               start_s=start if held else None, nodes=nodes, gpu_types=gpu_types,
               throughput=ThroughputProfile(rates))


def state(now: float, *jobs: Job, nodes: tuple[Node, ...] | None = None) -> ClusterState:
    return ClusterState(time_s=now, nodes=nodes or (Node("n1", "v100", 4),), jobs=jobs)


def started(policy: SlurmBackfillPolicy, snap: ClusterState) -> dict[str, tuple[str, ...]]:
    """Job id → GPUs, for jobs the plan runs that were not running."""
    plan = policy.schedule(snap, snap.time_s)
    running = {j.id for j in snap.jobs if j.gpus_held}
    return {a.job_id: a.gpu_ids for a in plan.assignments if a.job_id not in running}


#: EASY backfill with exact, GPU-level reservations: the rules these tests check one at a
#: time (each of Slurm's own ways, the defaults, is switched on where it is tested)
EASY = {"reservations": 1, "whole_nodes": False, "resolution_s": 0.0, "end_window_s": 0.0}


def policy(**options: float) -> SlurmBackfillPolicy:
    return SlurmBackfillPolicy(PolicyConfig(options={**EASY, **options}))


def test_registered_under_its_name():
    assert isinstance(create_policy("slurm_backfill"), SlurmBackfillPolicy)


def test_by_default_it_plans_as_slurm_22_05_does():
    # the first 20 waiting jobs reserved (Slurm: each it tests), on whole nodes, on whole
    # minutes, at the last end of a batch of ends: scenes of the tests below, Slurm's way
    default = SlurmBackfillPolicy(PolicyConfig())
    assert (default.options.reservations, default.options.whole_nodes,
            default.options.resolution_s, default.options.end_window_s) == (20, True, 60.0, 30.0)
    nodes = (Node("n1", "v100", 4), Node("n2", "v100", 2))
    protect = state(0.0, job("r1", 2, held=("n1:0", "n1:1"), start=0.0, limit=100.0),
                    job("r2", 1, held=("n2:0",), start=0.0, limit=50.0),
                    job("h1", 4, arrival=1.0, nodes=1),
                    job("h2", 2, arrival=2.0, nodes=1, limit=1000.0),
                    job("b", 1, arrival=3.0, limit=1000.0), nodes=nodes)
    assert started(default, protect) == {}       # EASY: b starts, delaying h2
    minutes = state(0.0, job("r", 2, held=("n1:0", "n1:1"), start=0.0, limit=100.0),
                    job("h", 4, arrival=1.0), job("b", 2, arrival=2.0, limit=70.0))
    assert started(default, minutes) == {}       # exact: b ends at 70, before h at 100


def test_submission_order_while_jobs_fit():
    snap = state(0.0, job("b", 2, arrival=2.0), job("a", 2, arrival=1.0), job("c", 1, arrival=3.0))
    # b and a were listed out of order: a (submitted first) gets the first GPUs, c waits
    assert started(policy(), snap) == {"a": ("n1:0", "n1:1"), "b": ("n1:2", "n1:3")}


def test_a_job_ending_past_the_shadow_time_never_delays_the_head():
    # the head h needs all 4 GPUs; r holds 2 until its limit at t=100 (the shadow time)
    snap = state(10.0, job("r", 2, held=("n1:0", "n1:1"), start=0.0, limit=100.0),
                 job("h", 4, arrival=1.0),
                 job("long", 2, arrival=2.0, limit=91.0),    # 10 + 91 > 100
                 job("short", 2, arrival=3.0, limit=90.0))   # 10 + 90 = 100: just in time
    assert started(policy(), snap) == {"short": ("n1:2", "n1:3")}


def test_a_long_job_may_use_gpus_the_head_will_not_need():
    nodes = (Node("n1", "v100", 4), Node("n2", "v100", 4))
    # h (6 GPUs) will take n1's 4 and 2 of n2's at t=100; n2's other 2 are extra
    snap = state(10.0, job("r", 4, held=tuple(f"n1:{i}" for i in range(4)), start=0.0),
                 job("h", 6, arrival=1.0),
                 job("long1", 2, arrival=2.0, limit=10_000.0),
                 job("long2", 2, arrival=3.0, limit=10_000.0), nodes=nodes)
    assert started(policy(), snap) == {"long1": ("n2:2", "n2:3")}


def test_exact_fit_starts_on_every_free_gpu():
    snap = state(0.0, job("r", 1, held=("n1:0",), start=0.0), job("three", 3, arrival=1.0))
    assert started(policy(), snap) == {"three": ("n1:1", "n1:2", "n1:3")}


def test_a_gpu_type_without_gpus_holds_no_one_back():
    # "a100" is asked for but the cluster has none: that job can never start, so it gets no
    # reservation, and the long job behind it starts at once (it would wait behind a head)
    snap = state(0.0, job("r", 2, held=("n1:0", "n1:1"), start=0.0),
                 job("a100", 1, arrival=1.0, types=("a100",), gpu_types=("a100",)),
                 job("big", 4, arrival=2.0), job("long", 2, arrival=3.0, limit=10_000.0))
    assert started(policy(), snap) == {}   # big is the head; long would delay it
    snap = state(0.0, job("r", 2, held=("n1:0", "n1:1"), start=0.0),
                 job("a100", 1, arrival=1.0, types=("a100",), gpu_types=("a100",)),
                 job("long", 2, arrival=3.0, limit=10_000.0))
    assert started(policy(), snap) == {"long": ("n1:2", "n1:3")}


def test_a_job_larger_than_the_cluster_reserves_nothing():
    snap = state(0.0, job("huge", 5, arrival=1.0), job("long", 4, arrival=2.0, limit=1e6))
    assert started(policy(), snap) == {"long": ("n1:0", "n1:1", "n1:2", "n1:3")}


def test_the_reservation_follows_the_running_jobs_between_rounds():
    running = job("r", 2, held=("n1:0", "n1:1"), start=0.0, limit=100.0)
    queue = (job("h", 4, arrival=1.0), job("b", 2, arrival=2.0, limit=95.0))
    bf = policy()
    # t=10: b would end at 105, after the shadow time 100
    assert started(bf, state(10.0, running, *queue)) == {}
    # t=4 a round earlier, b fits before it: the same jobs, another answer
    assert started(bf, state(4.0, running, *queue)) == {"b": ("n1:2", "n1:3")}
    # r has ended: the head starts, on every GPU, and b waits behind it
    assert started(bf, state(20.0, *queue)) == {"h": ("n1:0", "n1:1", "n1:2", "n1:3")}


def test_a_job_past_its_limit_frees_its_gpus_any_moment():
    # r's limit ended at t=100 but it still runs at t=150 (Slurm's OverTimeLimit): the head
    # h is reserved for the next instant on all of n1, so b may not take n1's free GPUs even
    # for a second, but may take n2's
    nodes = (Node("n1", "v100", 4), Node("n2", "v100", 2))
    overdue = job("r", 2, held=("n1:0", "n1:1"), start=0.0, limit=100.0)
    snap = state(150.0, overdue, job("h", 4, arrival=1.0, nodes=1),
                 job("b", 2, arrival=2.0, limit=1.0), nodes=nodes)
    assert started(policy(), snap) == {"b": ("n2:0", "n2:1")}
    snap = state(150.0, overdue, job("h", 4, arrival=1.0), job("b", 2, arrival=2.0, limit=1.0),
                 nodes=(Node("n1", "v100", 4),))
    assert started(policy(), snap) == {}


def test_a_job_without_time_limit_gets_the_default():
    snap = state(0.0, job("r", 2, held=("n1:0", "n1:1"), start=0.0, limit=100.0),
                 job("h", 4, arrival=1.0), job("nolimit", 2, arrival=2.0, limit=None))
    assert started(policy(), snap) == {}   # one day > the shadow time 100
    assert started(policy(default_time_limit_s=50.0), snap) == {"nolimit": ("n1:2", "n1:3")}


def test_a_multi_node_job_takes_equal_gpus_on_its_nodes():
    nodes = (Node("n1", "v100", 4), Node("n2", "v100", 4), Node("n3", "v100", 4))
    snap = state(0.0, job("r", 2, held=("n1:0", "n1:1"), start=0.0),
                 job("two_nodes", 8, arrival=1.0, nodes=2), nodes=nodes)
    assert started(policy(), snap) == {"two_nodes": tuple(f"n{k}:{i}" for k in (2, 3)
                                                          for i in range(4))}


def test_typed_jobs_stay_on_their_type_and_block_only_it():
    nodes = (Node("v", "v100", 4), Node("k", "k80", 4))
    snap = state(0.0, job("r", 2, held=("v:0", "v:1"), start=0.0, limit=100.0),
                 job("h", 4, arrival=1.0, gpu_types=("v100",)),
                 job("k80_long", 4, arrival=2.0, limit=1e6, types=("k80",)),
                 job("v100_long", 2, arrival=3.0, limit=1e6), nodes=nodes)
    # h waits for the V100s; a long K80 job does not touch them, a long V100 job would
    assert started(policy(), snap) == {"k80_long": ("k:0", "k:1", "k:2", "k:3")}


def test_running_jobs_are_never_preempted():
    snap = state(0.0, job("late", 4, held=tuple(f"n1:{i}" for i in range(4)), start=0.0,
                          arrival=9.0), job("early", 4, arrival=1.0))
    plan = policy().schedule(snap, 0.0)
    assert {a.job_id for a in plan.assignments} == {"late"}


def test_a_one_node_gang_takes_the_first_node_with_room_of_any_type():
    # Slurm walks its nodes in order whatever their type: k1 comes before v2
    nodes = (Node("v1", "v100", 4), Node("k1", "k80", 4), Node("v2", "v100", 4))
    snap = state(0.0, job("r", 4, held=tuple(f"v1:{i}" for i in range(4)), start=0.0),
                 job("any", 2, arrival=1.0, types=("v100", "k80")), nodes=nodes)
    assert started(policy(), snap) == {"any": ("k1:0", "k1:1")}


def test_more_reservations_protect_later_waiting_jobs_too():
    # h1 is reserved all of n1 at t=100; h2 (one node, 2 GPUs) can first run on n2 at t=50.
    # EASY reserves for h1 only, so b takes n2's free GPU now and delays h2; with a
    # reservation for every waiting job (conservative backfill, Slurm's way) b waits
    nodes = (Node("n1", "v100", 4), Node("n2", "v100", 2))
    snap = state(0.0, job("r1", 2, held=("n1:0", "n1:1"), start=0.0, limit=100.0),
                 job("r2", 1, held=("n2:0",), start=0.0, limit=50.0),
                 job("h1", 4, arrival=1.0, nodes=1), job("h2", 2, arrival=2.0, nodes=1,
                                                          limit=1000.0),
                 job("b", 1, arrival=3.0, limit=1000.0), nodes=nodes)
    assert started(policy(), snap) == {"b": ("n2:1",)}
    assert started(policy(reservations=0), snap) == {}
    assert started(policy(reservations=2), snap) == {}


def test_whole_node_reservations_keep_the_rest_of_the_node_too():
    # h (3 GPUs on one node) is reserved n2:0-2 from t=50; n2:3 is free now. GPU-level
    # reservations let a long 1-GPU job take it; Slurm's per-node map does not
    nodes = (Node("n1", "v100", 4), Node("n2", "v100", 4))
    snap = state(0.0, job("r1", 4, held=tuple(f"n1:{i}" for i in range(4)), start=0.0),
                 job("r2", 3, held=("n2:0", "n2:1", "n2:2"), start=0.0, limit=50.0),
                 job("h", 3, arrival=1.0, nodes=1),
                 job("b", 1, arrival=2.0, limit=1000.0), nodes=nodes)
    assert started(policy(), snap) == {"b": ("n2:3",)}
    assert started(policy(whole_nodes=True), snap) == {}


def test_a_resolution_moves_reservations_to_its_multiples():
    # h is reserved all of n1 at t=100; b would end at 70, before it, but with a 60-s
    # resolution (Slurm's bf_resolution) the reservation starts at 60, and b would overlap
    snap = state(0.0, job("r", 2, held=("n1:0", "n1:1"), start=0.0, limit=100.0),
                 job("h", 4, arrival=1.0), job("b", 2, arrival=2.0, limit=70.0))
    assert started(policy(), snap) == {"b": ("n1:2", "n1:3")}
    assert started(policy(resolution_s=60.0), snap) == {}


def test_slurm_plans_a_start_at_the_last_end_of_a_batch_of_ends():
    # h needs 4 GPUs: they are first free at 10 (r1's limit, with the 2 free now), but
    # Slurm's select plugin removes running jobs in batches (the first up to 30 + 30 s here:
    # ends 10 and 25) and plans h at the batch's last end, 25; so b (2 GPUs until 24)
    # backfills on the free GPUs, which it cannot with h reserved at 10
    snap = state(0.0, job("r1", 2, held=("n1:0", "n1:1"), start=-90.0, limit=100.0),
                 job("r2", 2, held=("n1:2", "n1:3"), start=-75.0, limit=100.0),
                 job("h", 4, arrival=1.0), job("b", 2, arrival=2.0, limit=24.0),
                 nodes=(Node("n1", "v100", 6),))
    exact = policy(reservations=0).schedule(snap, 0.0).reasons()
    batched = policy(reservations=0, end_window_s=30.0).schedule(snap, 0.0).reasons()
    assert (exact["h"].figures["start_s"], exact["b"].code) == (10.0, "slurm_backfill.reserved")
    assert (batched["h"].figures["start_s"], batched["b"].code) == \
        (25.0, "slurm_backfill.backfilled")


def test_slurms_batches_of_ends_double_until_an_end_falls_in_them():
    # first end 10: barrier 30, batch up to 60 (10, 25, 60); the next end (200) is past
    # 30 + 60 and 30 + 120, so the window doubles to 240: the batch is 200 and 260; then
    # 900 needs a window of 960
    assert batch_ends([10.0, 25.0, 60.0, 200.0, 260.0, 900.0], 30.0) == {60.0, 260.0, 900.0}
    # a first end on a multiple of the window: its barrier is a whole window later
    assert batch_ends([30.0, 90.0], 30.0) == {90.0}
    assert batch_ends([30.0, 91.0], 30.0) == {30.0, 91.0}
    assert batch_ends([], 30.0) == set()


def test_each_job_is_told_why_in_backfill_terms():
    """The reasons (gpufair explain, the job's AdminComment) say what EASY did: running to
    its limit, the head's reservation and its start, a job backfilled past it, a job that
    waits, and a job started in plain order before any reservation."""
    snap = state(10.0, job("r", 2, held=("n1:0", "n1:1"), start=0.0, limit=100.0),
                 job("h", 4, arrival=1.0),
                 job("long", 2, arrival=2.0, limit=91.0),
                 job("short", 2, arrival=3.0, limit=90.0))
    reasons = {j: (r.code, r.figures) for j, r in
               policy().schedule(snap, snap.time_s).reasons().items()}
    assert reasons["r"] == ("slurm_backfill.running", {"ends_by_s": 100.0})
    assert reasons["h"] == ("slurm_backfill.reserved", {"position": 1, "of": 3,
                                                        "start_s": 100.0})
    assert reasons["long"][0] == "slurm_backfill.waiting"
    assert reasons["short"] == ("slurm_backfill.backfilled", {"position": 3, "of": 3})
    quiet = state(0.0, job("a", 2, arrival=1.0))
    assert policy().schedule(quiet, 0.0).reasons()["a"].code == "slurm_backfill.started"


def test_between_backfill_passes_only_the_main_scheduler_starts_jobs_in_order():
    # 3 of 4 GPUs busy until t=100; the head wants 2 (must wait), a 1-GPU job behind it fits
    # now and ends before the head's reservation: backfill starts it, Slurm's main scheduler
    # (an event between passes) stops at the head and starts nothing
    snap = state(10.0, job("r", 3, held=("n1:0", "n1:1", "n1:2"), start=0.0, limit=100.0),
                 job("head", 2, arrival=1.0), job("small", 1, arrival=2.0, limit=50.0))
    model = policy(backfill_at_boundaries=True)
    model.next_decision(False)
    assert started(model, snap) == {}
    model.next_decision(True)   # a round boundary: the backfill pass
    assert started(model, snap) == {"small": ("n1:3",)}
    plain = policy()            # off (the default): every decision backfills
    plain.next_decision(False)
    assert started(plain, snap) == {"small": ("n1:3",)}


def test_the_main_scheduler_starts_the_jobs_ahead_of_the_first_that_cannot_start():
    # an exact fit for the first two in order; the third cannot start and blocks the fourth,
    # which would fit on what is left; the queue state changes between events (the first two
    # now run) and the next main pass still stops at the third
    snap = state(5.0, job("a", 2, arrival=1.0), job("b", 1, arrival=2.0),
                 job("c", 2, arrival=3.0), job("d", 1, arrival=4.0, limit=10.0))
    model = policy(backfill_at_boundaries=True)
    model.next_decision(False)
    assert started(model, snap) == {"a": ("n1:0", "n1:1"), "b": ("n1:2",)}
    later = state(6.0, job("a", 2, held=("n1:0", "n1:1"), start=5.0),
                  job("b", 1, held=("n1:2",), start=5.0), job("c", 2, arrival=3.0),
                  job("d", 1, arrival=4.0, limit=10.0))
    assert started(model, later) == {}
    model.next_decision(True)
    assert started(model, later) == {"d": ("n1:3",)}


def test_jobs_restricted_to_other_nodes_each_start_on_theirs():
    """An unrestricted job, then restrictions shared by several jobs (a site's partitions)
    and one of its own: each job starts on the first node with room that it may use, never
    on one another job's restriction allowed; the later job of a shared restriction finds
    its node full and waits."""
    from dataclasses import replace
    nodes = (Node("n1", "v100", 2), Node("n2", "v100", 2), Node("n3", "v100", 2))
    on_n3, on_n2 = ("n3",), ("n2",)
    snap = state(0.0, job("d", 1, arrival=0),
                 replace(job("a", 2, arrival=1), allowed_nodes=on_n3),
                 replace(job("b", 2, arrival=2), allowed_nodes=on_n2),
                 replace(job("c", 2, arrival=3), allowed_nodes=on_n3), nodes=nodes)
    assert started(policy(reservations=0), snap) == \
        {"d": ("n1:0",), "a": ("n3:0", "n3:1"), "b": ("n2:0", "n2:1")}
