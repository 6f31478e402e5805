"""Tests that pin behaviours mutation testing found unguarded in the one-round pipeline.

Each test kills one or more planted bugs that the rest of the suite let through (settings,
guards, round, diff, history, config, daemon, store, recording adapter). Expected values are
written out by hand or computed by a few lines of independent arithmetic here, never by the
code under test. The resource manager used for the daemon is written for these tests (not
the recording adapter, which is itself under test).
"""

from __future__ import annotations

import math
import sqlite3
from collections.abc import Mapping
from dataclasses import dataclass

import pytest
from fixed_policy import FixedPlan

from gpufair.adapters.base import Effect, Unavailable
from gpufair.adapters.recording import RecordingAdapter
from gpufair.core.actions import plan_actions
from gpufair.core.config import Config, config_from_dict
from gpufair.core.guards import PRIORITY_TOP, min_runtime, preemption_cap, rank_priorities
from gpufair.core.history import merge_history, rho_estimates
from gpufair.core.round import Round, RoundRules, action_key
from gpufair.errors import InputError
from gpufair.model import (
    ActionResult,
    Assignment,
    ClusterState,
    Job,
    JobState,
    Migrate,
    Node,
    NodeState,
    Plan,
    Preempt,
    PreemptMode,
    Resize,
    Resume,
    SetPriority,
    Start,
)
from gpufair.plugin.daemon import Daemon, ServiceSettings
from gpufair.plugin.store import APPLYING, DONE, FAILED, PLANNED, SKIPPED, Store
from gpufair.settings import parse_settings, setting

NODES = tuple(Node(f"n{i}", "v100", 4) for i in range(4))   # 16 GPUs


def gpus(node: int, count: int = 4) -> tuple[str, ...]:
    return tuple(f"n{node}:{g}" for g in range(count))


def running(job_id: str, node: int, count: int = 4, start: float = 0.0, **kw) -> Job:
    return Job(job_id, gpus=count, state=JobState.RUNNING, start_s=start,
               gpus_held=gpus(node, count), **kw)


# ---- settings ------------------------------------------------------------------------------
@dataclass(frozen=True)
class _Opts:
    count: int = setting(1, "a whole number >= 1", ge=1)
    share: float = setting(0.5, "a share", ge=0.0, le=1.0)
    span: float = setting(1.0, "strictly positive", gt=0.0)
    mode: str | None = setting(None, "a choice or unset", choices=("a", "b"))
    names: tuple[str, ...] = setting(("x",), "a list")
    table: Mapping[str, float] = setting({}, "a table")
    size: int | str = setting(1, "a number or a word")
    renamed: int = setting(0, "spelled old_name in old files", aliases=("old_name",))

    def __post_init__(self) -> None:
        if self.count > 100:
            raise ValueError("count: at most 100")


def _parse(data: Mapping, ignored: tuple[str, ...] = ()) -> _Opts:
    return parse_settings(_Opts, data, source="t.toml", section="opts", ignored=ignored)


def _error(data: Mapping) -> str:
    with pytest.raises(InputError) as err:
        _parse(data)
    return str(err.value)


def test_a_whole_number_option_rejects_a_boolean():
    """bool is an int subclass: True must not pass as 1 (S01)."""
    assert "expected a whole number" in _error({"count": True})
    with pytest.raises(InputError, match=r"daemon\.seed"):
        config_from_dict({"daemon": {"seed": True}})


def test_an_alias_sets_its_field():
    """An alias is another spelling of the field (S04, S05)."""
    assert _parse({"old_name": 3}).renamed == 3
    config = config_from_dict({"policies": {"shockwave": {"lambda": 5, "future_rounds": 7}}})
    options = config.policies["shockwave"]
    assert (options.ftf_exponent, options.window_rounds) == (5.0, 7)


def test_an_option_given_under_both_spellings_is_an_error():
    """The name and its alias together are ambiguous, whatever their order (S06)."""
    assert "given twice" in _error({"renamed": 1, "old_name": 2})
    assert "given twice" in _error({"old_name": 2, "renamed": 1})


def test_ignored_keys_are_dropped_not_rejected():
    """Keys listed as ignored (an artifact's unused keys) are accepted and dropped (S07, C04)."""
    assert _parse({"junk": 1, "count": 2}, ignored=("junk",)) == _Opts(count=2)
    config = config_from_dict({"policies": {"shockwave": {"gpu_ram": 16, "window_rounds": 3}}})
    assert config.policies["shockwave"].window_rounds == 3


def test_bounds_are_inclusive_or_strict_as_declared():
    """ge and le include the bound, gt excludes it (S08, S10, C07)."""
    assert _parse({"count": 1, "share": 1.0}).share == 1.0
    assert _parse({"share": 0.0}).share == 0.0
    assert "must be > 0" in _error({"span": 0})
    assert _parse({"span": 1e-9}).span == 1e-9
    daemon = config_from_dict({"daemon": {"max_preempt_share": 1, "min_runtime_s": 0,
                                          "metrics_port": 65535}}).daemon
    assert (daemon.max_preempt_share, daemon.min_runtime_s, daemon.metrics_port) == (1.0, 0.0,
                                                                                    65535)
    with pytest.raises(InputError, match="must be <= 65535"):
        config_from_dict({"daemon": {"metrics_port": 65536}})
    assert config_from_dict({"daemon": {"metrics_port": 0}}).daemon.metrics_port == 0


def test_unset_is_not_checked_against_choices():
    """None for an optional option with choices means unset, not a wrong choice (S11)."""
    assert _parse({"mode": None}).mode is None
    assert config_from_dict({"solver": {"backend": None}}).solver.backend is None
    assert "expected one of" in _error({"mode": "c"})


def test_infinity_is_not_a_finite_number():
    """inf passes every lower bound; the finiteness check must still reject it (S12)."""
    assert "expected a finite number" in _error({"span": math.inf})
    assert "expected a finite number" in _error({"span": -math.inf})


def test_values_become_the_declared_types():
    """A whole number for a float option is a float; a list is a tuple (hashable, frozen); a
    table is read-only (S13, S14, S15)."""
    parsed = _parse({"span": 2, "names": ["a", "b"], "table": {"k": 1}})
    assert type(parsed.span) is float and repr(parsed.span) == "2.0"
    assert parsed.names == ("a", "b") and isinstance(parsed.names, tuple)
    assert type(parsed.table["k"]) is float
    hash(parsed.names)
    with pytest.raises(TypeError):
        parsed.table["k"] = 2.0  # type: ignore[index]
    config = config_from_dict({"daemon": {"round_s": 90},
                               "slurm": {"managed_partitions": ["gpu", "a100"]}})
    assert type(config.daemon.round_s) is float
    assert config.slurm.managed_partitions == ("gpu", "a100")
    hash(config.slurm)


def test_a_string_option_rejects_a_number():
    """No implicit str() of numbers (S16)."""
    assert "expected a string" in _error({"names": [3]})


def test_a_check_across_options_is_a_named_input_error():
    """A ValueError from __post_init__ becomes an InputError naming file and section (S17)."""
    message = _error({"count": 101})
    assert message.startswith("t.toml") and "'opts'" in message and "at most 100" in message
    with pytest.raises(InputError, match="slurm"):
        config_from_dict({"slurm": {"managed_partitions": [""]}}, "g.toml")


def test_none_is_only_accepted_by_optional_options():
    """A union without None does not take None (S18)."""
    assert _parse({"size": "big"}).size == "big"
    assert "expected" in _error({"size": None})


# ---- guards --------------------------------------------------------------------------------
def test_min_runtime_is_a_strict_bound():
    """A job that ran exactly min_runtime seconds may be preempted; a moment less, not (G06)."""
    guard = min_runtime(60)
    old = ClusterState(160.0, nodes=NODES, jobs=(running("a", 0, start=100.0),))
    assert guard(old, [Preempt("a")]) == ([Preempt("a")], [])
    young = ClusterState(159.5, nodes=NODES, jobs=(running("a", 0, start=100.0),))
    kept, held = guard(young, [Preempt("a")])
    assert kept == [] and [d.action for d in held] == [Preempt("a")]


def test_hold_back_follows_the_cascade_to_its_end():
    """c is young and stays; b's move needs c's GPUs, so b stays; a's move needs b's GPUs, so
    a stays; so the start onto a's GPUs must wait too: three links, not one (G01)."""
    state = ClusterState(100.0, nodes=NODES, jobs=(running("a", 0), running("b", 1),
                                                   running("c", 2, start=90.0)))
    actions = [Preempt("c"), Migrate("b", gpus(2)), Migrate("a", gpus(1)),
               Start("z", ("n0:0",)), Start("w", ("n3:0",))]
    kept, held = min_runtime(60)(state, actions)
    assert kept == [Start("w", ("n3:0",))]
    assert [d.action for d in held] == actions[:4]


def test_min_runtime_zero_guards_nothing_even_with_clock_skew():
    """With 0 the guard is off: a start time ahead of the daemon's clock changes nothing
    (G07)."""
    state = ClusterState(100.0, nodes=NODES, jobs=(running("a", 0, start=105.0),))
    assert min_runtime(0)(state, [Preempt("a")]) == ([Preempt("a")], [])


def test_cap_rounds_the_share_of_gpus_without_float_error():
    """0.57 of 100 GPUs is 57 (0.57 * 100 == 56.999... in floating point) (G10)."""
    nodes = tuple(Node(f"n{i}", "v100", 4) for i in range(25))
    held = tuple(f"n{i // 4}:{i % 4}" for i in range(57))
    state = ClusterState(0.0, nodes=nodes, jobs=(
        Job("big", gpus=57, state=JobState.RUNNING, gpus_held=held),))
    assert preemption_cap(0.57)(state, [Preempt("big")]) == ([Preempt("big")], [])


def test_a_victim_over_the_cap_does_not_use_up_the_budget():
    """The cap is 4 of 16 GPUs: an 8-GPU victim is over it, and a 4-GPU one after it still
    fits (G11)."""
    big = Job("big", gpus=8, state=JobState.RUNNING, gpus_held=gpus(0) + gpus(1))
    state = ClusterState(0.0, nodes=NODES, jobs=(big, running("small", 2)))
    kept, held = preemption_cap(0.25)(state, [Preempt("big"), Preempt("small")])
    assert kept == [Preempt("small")]
    assert [d.action for d in held] == [Preempt("big")]


def test_cap_counts_usable_gpus_only():
    """Half of the 8 GPUs on up nodes is 4, not half of all 16 (G12)."""
    nodes = NODES[:2] + tuple(Node(f"d{i}", "v100", 4, state=NodeState.DRAIN) for i in range(2))
    state = ClusterState(0.0, nodes=nodes, jobs=(running("a", 0), running("b", 1)))
    kept, held = preemption_cap(0.5)(state, [Preempt("a"), Preempt("b")])
    assert kept == [Preempt("a")] and [d.action for d in held] == [Preempt("b")]


def test_rank_ties_go_to_the_numerically_lower_job_id():
    """Equal priorities: "9" before "10" (numerically), highest priority first (G13, G14,
    G15)."""
    assert rank_priorities({"10": 1.0, "9": 1.0, "b": 2.0}) == {
        "b": 1_000_000, "9": 999_999, "10": 999_998}
    assert PRIORITY_TOP == 1_000_000


# ---- the round -----------------------------------------------------------------------------
class _Scripted:
    """A policy whose plans are given, one per round."""

    name = "scripted"

    def __init__(self, plans: list[Plan]) -> None:
        self.plans = list(plans)

    def schedule(self, state: ClusterState, now: float) -> Plan:
        return self.plans.pop(0)


def test_round_applies_min_runtime_before_the_cap():
    """A young job is kept by min_runtime and so does not use the cap's budget: the old job
    (4 GPUs, the whole cap of 0.25 * 16) is preempted; of two old jobs only one is
    (R01, R02, C11)."""
    state = ClusterState(100.0, nodes=NODES, jobs=(running("young", 0, start=95.0),
                                                   running("old", 1, start=0.0)))
    rules = config_from_dict({"daemon": {"min_runtime_s": 60, "max_preempt_share": 0.25}}
                             ).daemon.rules()
    result = Round(FixedPlan(Plan()), rules).run(state)
    assert result.actions == [Preempt("old")]
    assert [(d.action, d.reason) for d in result.deferred] == [
        (Preempt("young"), "started less than 60 s ago")]
    both_old = state.with_jobs((running("a", 0), running("b", 1)))
    result = Round(FixedPlan(Plan()), rules).run(both_old)
    assert result.actions == [Preempt("a")]
    assert [d.action for d in result.deferred] == [Preempt("b")]


def test_round_reports_what_every_guard_held_back():
    """A job on a drained node and a young job are both reported as deferred (R15)."""
    nodes = (*NODES[:3], Node("n3", "v100", 4, state=NodeState.DRAIN))
    state = ClusterState(100.0, nodes=nodes, jobs=(running("drained", 3),
                                                   running("young", 0, start=90.0)))
    result = Round(FixedPlan(Plan()), RoundRules(min_runtime_s=60)).run(state)
    assert result.actions == []
    assert sorted(d.action.job_id for d in result.deferred) == ["drained", "young"]


def test_round_preemptions_carry_the_rules_mode_and_grace():
    """[daemon] preempt_mode and grace_s reach the Preempt actions (R13, R14, C05)."""
    rules = config_from_dict({"daemon": {"preempt_mode": "suspend", "grace_s": 30,
                                         "min_runtime_s": 5}}).daemon.rules()
    assert (rules.grace_s, rules.min_runtime_s, rules.preempt_mode) == (30.0, 5.0,
                                                                        PreemptMode.SUSPEND)
    state = ClusterState(100.0, nodes=NODES, jobs=(running("a", 0),))
    assert Round(FixedPlan(Plan()), rules).run(state).actions == [
        Preempt("a", PreemptMode.SUSPEND, 30.0)]


def test_a_fill_only_round_neither_preempts_nor_moves():
    """preemptive=False: only starts on idle GPUs (R11, A04, A05, A07)."""
    state = ClusterState(0.0, nodes=NODES, jobs=(running("a", 0), running("b", 1), Job("x"),
                                                 Job("y")))
    plan = Plan(assignments=(Assignment("b", gpus(2)), Assignment("x", ("n0:0",)),
                             Assignment("y", ("n3:0",))))
    assert Round(FixedPlan(plan)).run(state, preemptive=False).actions == [Start("y", ("n3:0",))]
    assert Round(FixedPlan(plan)).run(state).actions == [
        Preempt("a"), Migrate("b", gpus(2)), Start("x", ("n0:0",)), Start("y", ("n3:0",))]


def test_the_first_round_writes_history_rows():
    """An empty history (the store's first round) is merged too, so rows are written (R12)."""
    state = ClusterState(50.0, nodes=NODES, jobs=(Job("p", arrival_s=20.0), running("r", 0)))
    result = Round(FixedPlan(Plan())).run(state, history={})
    assert [(r["job_id"], r["first_seen"], r["waiting_s"]) for r in result.history] == [
        ("p", 50.0, 30.0), ("r", 50.0, 0.0)]


def test_keys_name_the_kind_the_mode_the_gpus_and_the_priority():
    """Different decisions have different keys; the same one has the same key whatever the
    order of its GPUs (R05, R07, R08, R09)."""
    pending, suspended = Job("7"), Job("7", state=JobState.SUSPENDED, gpus_held=gpus(0, 2))
    assert action_key(Start("7", ("n0:1", "n0:0")), pending) == \
        action_key(Start("7", ("n0:0", "n0:1")), pending)
    assert action_key(Start("7", gpus(0, 2)), pending) != \
        action_key(Resume("7", gpus(0, 2)), suspended)
    job = running("7", 0)
    assert action_key(Preempt("7", PreemptMode.REQUEUE), job) is not None
    # repeatable within one incarnation (a priority back to an earlier value, a second
    # suspension after a resume): no key, so never skipped as done
    assert action_key(Preempt("7", PreemptMode.SUSPEND), job) is None
    assert action_key(SetPriority("7", 5.0), pending) is None
    assert action_key(Resume("7", gpus(0, 2)), suspended) is None


def test_keys_change_with_restarts_and_start_time():
    """A requeued job (restarts + 1) or one started anew is a new incarnation; the submit
    time is not part of it (R03, R04)."""
    assert action_key(Start("7", ("n0:0",)), Job("7")) != \
        action_key(Start("7", ("n0:0",)), Job("7", restarts=1))
    assert action_key(Preempt("7"), running("7", 0, start=100.0)) != \
        action_key(Preempt("7"), running("7", 0, start=500.0))
    assert action_key(Preempt("7"), running("7", 0, arrival_s=1.0)) == \
        action_key(Preempt("7"), running("7", 0, arrival_s=2.0))


# ---- the diff ------------------------------------------------------------------------------
def test_diff_leaves_suspended_jobs_and_resumes_them():
    """A suspended job is not preempted again; planned, it is resumed, not started
    (A01, A08)."""
    suspended = Job("s", gpus=4, state=JobState.SUSPENDED, start_s=0.0, gpus_held=gpus(0))
    state = ClusterState(0.0, nodes=NODES, jobs=(suspended,))
    assert plan_actions(state, Plan()) == []
    plan = Plan(assignments=(Assignment("s", gpus(0)),))
    assert plan_actions(state, plan) == [Resume("s", gpus(0))]


def test_diff_tells_moves_from_resizes():
    """Same size elsewhere: Migrate; another size: Resize; same GPUs in another order:
    nothing (A02, A03)."""
    state = ClusterState(0.0, nodes=NODES, jobs=(running("a", 0), running("b", 1),
                                                 running("c", 2)))
    plan = Plan(assignments=(Assignment("a", gpus(3)), Assignment("b", ("n1:0", "n1:1")),
                             Assignment("c", tuple(reversed(gpus(2))))))
    assert plan_actions(state, plan) == [Migrate("a", gpus(3)), Resize("b", ("n1:0", "n1:1"))]


def test_diff_orders_preemptions_moves_starts():
    """A start onto GPUs a move frees comes after the move (A06)."""
    state = ClusterState(0.0, nodes=NODES, jobs=(Job("x", gpus=4), running("b", 1),
                                                 running("a", 0)))
    plan = Plan(assignments=(Assignment("x", gpus(1)), Assignment("b", gpus(2))))
    assert plan_actions(state, plan) == [Preempt("a"), Migrate("b", gpus(2)),
                                         Start("x", gpus(1))]


# ---- history -------------------------------------------------------------------------------
def _row(**kw) -> dict:
    row = {"job_id": "j", "tenant": "default", "arrival_s": 0.0, "first_seen": 10.0,
           "state": "pending", "attained_s": 0.0, "waiting_s": 0.0, "restarts": 0,
           "last_seen": 10.0, "finished_at": None, "exit_code": None}
    row.update(kw)
    return row


def test_history_keeps_first_seen_and_first_finish():
    """first_seen and finished_at are written once (H05, H06)."""
    done = ClusterState(100.0, jobs=(Job("j", state=JobState.COMPLETED),))
    _, rows = merge_history(done, {"j": _row(finished_at=40.0, state="completed")})
    assert (rows[0]["first_seen"], rows[0]["finished_at"]) == (10.0, 40.0)
    _, rows = merge_history(done, {"j": _row()})
    assert rows[0]["finished_at"] == 100.0


def test_history_waiting_and_suspended_time():
    """A new pending job has waited since it arrived; a known one since it was last seen; a
    suspended job accrues neither service nor waiting (H04, H08, H09)."""
    _, rows = merge_history(ClusterState(70.0, jobs=(Job("j", arrival_s=25.0),)), {})
    assert rows[0]["waiting_s"] == 45.0
    _, rows = merge_history(ClusterState(70.0, jobs=(Job("j"),)),
                            {"j": _row(first_seen=10.0, last_seen=50.0, waiting_s=5.0)})
    assert rows[0]["waiting_s"] == 5.0 + 20.0
    suspended = Job("j", state=JobState.SUSPENDED, start_s=0.0, gpus_held=("n0:0",))
    merged, rows = merge_history(ClusterState(70.0, jobs=(suspended,)),
                                 {"j": _row(attained_s=8.0, waiting_s=3.0, last_seen=50.0)})
    assert merged.jobs[0].attained_s == 8.0 and rows[0]["waiting_s"] == 3.0


def test_rho_is_at_least_one():
    """rho = time in the system / service received, floored at 1; jobs never run have none
    (H07)."""
    state = ClusterState(100.0, jobs=(Job("a", arrival_s=0.0, attained_s=25.0),
                                      Job("b", arrival_s=90.0, attained_s=40.0), Job("c")))
    assert rho_estimates(state) == {"a": 4.0, "b": 1.0}


# ---- config --------------------------------------------------------------------------------
def test_policy_options_under_an_alias_belong_to_the_policy():
    """[policies.tiresias] is las's section (C03)."""
    config = config_from_dict({"policies": {"tiresias": {"queue_thresholds_gpu_s": [60]}}})
    assert config.policy_config("las").options.queue_thresholds_gpu_s == (60.0,)


def test_a_json_file_gives_the_running_policys_options():
    """A JSON config file's options are those of whichever policy runs (C08)."""
    config = Config(policies={"las": {"queue_thresholds_gpu_s": [1.0]}},
                    policy_json={"queue_thresholds_gpu_s": [2.0]})
    assert config.policy_config("las").options == {"queue_thresholds_gpu_s": [2.0]}


def test_only_the_known_sections():
    """A misspelt section name is an error (C09)."""
    for section in ("policy", "deamon", "solvers"):
        with pytest.raises(InputError, match="unknown section"):
            config_from_dict({section: {}})


# ---- the daemon against a scripted resource manager ----------------------------------------
class _Cluster:
    """A resource manager for these tests: a fixed snapshot, answers and effects by job."""

    name = "cluster"

    def __init__(self, state: ClusterState, *, refuse: tuple[str, ...] = (),
                 effects: Mapping[str, Effect | str] | None = None, grace: float = 0.0) -> None:
        self.state = state
        self.refuse = set(refuse)
        self.effects = dict(effects or {})
        self.grace = grace
        self.log: list[tuple] = []
        self.store: Store | None = None

    def snapshot(self) -> ClusterState:
        return self.state

    def warn_preemptions(self, actions) -> float:
        self.log.append(("warn", tuple(a.job_id for a in actions if isinstance(a, Preempt))))
        return self.grace

    def apply_one(self, action) -> ActionResult:
        statuses = None
        if self.store is not None:
            statuses = [e.status for e in self.store.journal() if e.action == action]
        self.log.append(("apply", action, statuses))
        if action.job_id in self.refuse:
            return ActionResult(action, False, "refused")
        return ActionResult(action, True, "ok")

    def apply(self, actions) -> list[ActionResult]:
        return [self.apply_one(a) for a in actions]

    def check(self, action) -> Effect:
        effect = self.effects.get(action.job_id, Effect.NOT_YET)
        if effect == "down":
            raise Unavailable("no answer")
        return Effect(effect)

    def status(self) -> dict[str, float]:
        return {}


    def reconcile(self, ours=None) -> list:
        return []

    def sent(self) -> list:
        return [entry[1] for entry in self.log if entry[0] == "apply"]


def _daemon(cluster: _Cluster, policy, store: Store, *, rules: RoundRules | None = None,
            settings: ServiceSettings | None = None, sleeps: list | None = None) -> Daemon:
    sleep = (lambda s: None) if sleeps is None else sleeps.append
    return Daemon(cluster, Round(policy, rules), store, settings or ServiceSettings(),
                  sleep=sleep)


def _two_jobs() -> ClusterState:
    return ClusterState(500.0, nodes=NODES, jobs=(running("a", 0), Job("x", gpus=4)))


def test_an_action_is_journalled_as_applying_before_it_is_sent():
    """The write-ahead journal: 'applying' is committed before the resource manager sees the
    action (D09)."""
    cluster = _Cluster(_two_jobs())
    store = cluster.store = Store(":memory:")
    _daemon(cluster, FixedPlan(Plan(assignments=(Assignment("x", gpus(0)),))), store).run_round()
    assert [(e[1], e[2]) for e in cluster.log if e[0] == "apply"] == [
        (Preempt("a"), [APPLYING]), (Start("x", gpus(0)), [APPLYING])]


def test_the_daemon_waits_the_grace_then_acts_with_pauses():
    """Warn, sleep the grace, then each action followed by action_interval_s (D05, D14)."""
    cluster = _Cluster(_two_jobs(), grace=30.0)
    sleeps: list[float] = []
    _daemon(cluster, FixedPlan(Plan(assignments=(Assignment("x", gpus(0)),))), Store(":memory:"),
            settings=ServiceSettings(action_interval_s=2.0), sleeps=sleeps).run_round()
    assert cluster.log[0] == ("warn", ("a",))
    assert sleeps == [30.0, 2.0, 2.0]


def _crashed_round(store: Store, actions: list) -> int:
    """A round journalled as planned, as a daemon killed before it acted leaves it."""
    return store.begin_round("fixed", {}, actions, keys=[f"k{i}" for i in range(len(actions))])


def test_recovery_checks_each_action_and_does_not_warn_again():
    """Restart: in effect → done, job gone → skipped, not yet → carried out; the checkpoint
    warning went out before the crash and is not repeated (D04, D06, D12)."""
    store = Store(":memory:")
    actions = [Preempt("a"), Preempt("b"), Start("x", gpus(0))]
    round_id = _crashed_round(store, actions)
    cluster = _Cluster(_two_jobs(), effects={"a": Effect.IN_EFFECT, "b": Effect.JOB_GONE},
                       grace=30.0)
    sleeps: list[float] = []
    _daemon(cluster, FixedPlan(Plan()), store, sleeps=sleeps).recover()
    assert [(e.status, e.detail) for e in store.journal(round_id)] == [
        (DONE, "already in effect (recovered)"), (SKIPPED, "job no longer active"),
        (DONE, "ok")]
    assert cluster.log == [("apply", Start("x", gpus(0)), None)]
    assert sleeps == []
    assert store.unfinished_rounds() == []


def test_recovery_stops_when_the_check_gets_no_answer():
    """check() unavailable: this and the rest of the round are dropped, nothing sent (D11)."""
    store = Store(":memory:")
    round_id = _crashed_round(store, [Preempt("a"), Start("x", gpus(0))])
    cluster = _Cluster(_two_jobs(), effects={"a": "down"})
    _daemon(cluster, FixedPlan(Plan()), store).recover()
    assert [e.status for e in store.journal(round_id)] == [SKIPPED, SKIPPED]
    assert all("unavailable" in e.detail for e in store.journal(round_id))
    assert cluster.sent() == []


def test_a_fill_only_daemon_round_does_not_preempt():
    """run_round(preemptive=False) passes the flag to the round (D08)."""
    cluster = _Cluster(_two_jobs())
    _daemon(cluster, FixedPlan(Plan(assignments=(Assignment("x", gpus(1)),))),
            Store(":memory:")).run_round(preemptive=False)
    assert cluster.sent() == [Start("x", gpus(1))]


def test_a_dry_run_does_not_persist_policy_state():
    """Only a real round saves the policy's state (D07)."""
    class Remembering(FixedPlan):
        def state_dict(self) -> dict:
            return {"seen": 1}

        def load_state_dict(self, data) -> None:
            pass

    store = Store(":memory:")
    _daemon(_Cluster(_two_jobs()), Remembering(Plan()), store,
            settings=ServiceSettings(dry_run=True)).run_round()
    assert store.policy_state("fixed") is None
    _daemon(_Cluster(_two_jobs()), Remembering(Plan()), store).run_round()
    assert store.policy_state("fixed") == {"seen": 1}


def test_a_refused_action_is_tried_again_next_round():
    """Only 'done' counts as done for the same incarnation: a refusal is retried (ST02)."""
    cluster = _Cluster(_two_jobs(), refuse=("x",))
    store = Store(":memory:")
    daemon = _daemon(cluster, FixedPlan(Plan(assignments=(Assignment("a", gpus(0)),
                                                       Assignment("x", gpus(1))))), store)
    first = store.journal(daemon.run_round())
    assert [e.status for e in first] == [FAILED]
    cluster.refuse = set()
    second = store.journal(daemon.run_round())
    assert [e.status for e in second] == [DONE]
    assert cluster.sent() == [Start("x", gpus(1))] * 2


def test_a_requeued_job_is_started_again_on_the_same_gpus():
    """A Start done for restarts=0 does not stand for restarts=1 (R03)."""
    cluster = _Cluster(ClusterState(0.0, nodes=NODES, jobs=(Job("x"),)))
    store = Store(":memory:")
    daemon = _daemon(cluster, FixedPlan(Plan(assignments=(Assignment("x", ("n0:0",)),))), store)
    daemon.run_round()
    cluster.state = ClusterState(60.0, nodes=NODES, jobs=(Job("x", restarts=1),))
    assert [e.status for e in store.journal(daemon.run_round())] == [DONE]
    assert len(cluster.sent()) == 2


def test_a_new_priority_is_sent():
    """Soft mode: a changed rank is a new decision (R09)."""
    cluster = _Cluster(ClusterState(0.0, nodes=NODES, jobs=(Job("1"), Job("2"))))
    plans = [Plan(priorities={"1": 2.0, "2": 1.0}), Plan(priorities={"1": 1.0, "2": 2.0})]
    daemon = _daemon(cluster, _Scripted(plans), Store(":memory:"),
                     rules=RoundRules(mode="soft"))
    daemon.run_round()
    daemon.run_round()
    assert cluster.sent() == [SetPriority("1", 1_000_000.0), SetPriority("2", 999_999.0),
                              SetPriority("2", 1_000_000.0), SetPriority("1", 999_999.0)]


# ---- the store -----------------------------------------------------------------------------
def _mark_all(store: Store, round_id: int, status: str) -> None:
    for entry in store.journal(round_id):
        store.mark(round_id, entry.seq, status)


def test_done_keys_are_those_of_earlier_rounds_and_name_the_latest():
    """Keys done in rounds before the given one, each with the last round that did it
    (ST03, ST04)."""
    store = Store(":memory:")
    rounds = [store.begin_round("p", {}, [Preempt("a")], keys=["k"]) for _ in range(3)]
    for round_id in rounds:
        _mark_all(store, round_id, DONE)
    assert store.done_keys(["k"], rounds[2]) == {"k": rounds[1]}
    assert store.done_keys(["k"], rounds[0]) == {}


def test_done_keys_answers_for_every_key_of_a_large_round():
    """More keys than one SQL chunk: none is lost at a chunk border (ST06)."""
    store = Store(":memory:")
    keys = [f"k{i}" for i in range(1203)]
    first = store.begin_round("p", {}, [SetPriority(str(i), 1.0) for i in range(1203)],
                              keys=keys)
    store.db.execute("UPDATE actions SET status='done' WHERE round_id=?", (first,))
    later = store.begin_round("p", {}, [])
    assert store.done_keys(keys, later) == dict.fromkeys(keys, first)


def test_job_history_of_many_jobs_is_complete():
    """A round asks for the history of its jobs only, in chunks: none is lost (ST08)."""
    store = Store(":memory:")
    ids = [str(i) for i in range(1203)]
    store.save_jobs([{"job_id": j, "tenant": "t", "arrival_s": 0.0, "first_seen": 1.0,
                      "state": "pending", "attained_s": 0.0, "waiting_s": 0.0, "restarts": 0,
                      "last_seen": 1.0, "finished_at": None, "exit_code": None} for j in ids])
    assert sorted(store.job_history(ids[1:]), key=int) == ids[1:]
    assert set(store.job_history(["5", "nope"])) == {"5"}


def test_a_store_without_the_key_column_is_migrated(tmp_path):
    """A database written before idempotency keys gains the column, keeps its rows and works
    (ST05)."""
    path = tmp_path / "old.db"
    db = sqlite3.connect(path)
    db.executescript("""
        CREATE TABLE rounds (id INTEGER PRIMARY KEY, started_at REAL NOT NULL,
          finished_at REAL, policy TEXT NOT NULL, status TEXT NOT NULL,
          reason TEXT NOT NULL DEFAULT '', plan TEXT NOT NULL, latency_s REAL);
        CREATE TABLE actions (round_id INTEGER NOT NULL REFERENCES rounds(id),
          seq INTEGER NOT NULL, kind TEXT NOT NULL, job_id TEXT NOT NULL,
          payload TEXT NOT NULL, status TEXT NOT NULL, detail TEXT NOT NULL DEFAULT '',
          updated_at REAL NOT NULL, attempts INTEGER NOT NULL DEFAULT 0,
          PRIMARY KEY (round_id, seq));
        INSERT INTO rounds VALUES (1, 0, 0, 'las', 'done', '', '{}', NULL);
        INSERT INTO actions VALUES (1, 0, 'Preempt', 'a',
          '{"grace_s": 0.0, "job_id": "a", "kind": "Preempt", "mode": "requeue"}',
          'done', '', 0, 1);
    """)
    db.commit()
    db.close()
    store = Store(path)
    assert [(e.action, e.status, e.key) for e in store.journal()] == [(Preempt("a"), DONE,
                                                                       None)]
    round_id = store.begin_round("las", {}, [Preempt("a")], keys=["preempt:a"])
    _mark_all(store, round_id, DONE)
    assert store.done_keys(["preempt:a"], round_id + 1) == {"preempt:a": round_id}
    store.close()
    assert "key" in {r[1] for r in sqlite3.connect(path).execute("PRAGMA table_info(actions)")}


def test_an_empty_round_is_closed_and_a_planned_one_is_not():
    """begin_round: no actions → done at once; actions → applying until finished (ST07)."""
    store = Store(":memory:")
    empty = store.begin_round("p", {}, [])
    busy = store.begin_round("p", {}, [Preempt("a")])
    assert store.unfinished_rounds() == [busy] and empty != busy
    assert [e.status for e in store.journal(busy)] == [PLANNED]


# ---- the recording adapter -----------------------------------------------------------------
def test_recording_adapter_records_warns_and_never_waits():
    """Only preemptions with a grace are warned; the dry run never waits; what was recorded
    is in effect, anything else is not yet (RC01, RC02, RC03, RC04)."""
    state = ClusterState(0.0, nodes=NODES)
    adapter = RecordingAdapter(state)
    actions = [Preempt("a", grace_s=30.0), Preempt("b"), Start("x", ("n0:0",))]
    assert adapter.warn_preemptions(actions) == 0.0
    assert adapter.warned == ["a"]
    assert adapter.snapshot() is state
    assert adapter.apply(actions[:1]) == [ActionResult(actions[0], True, "recorded (dry run)")]
    assert adapter.recorded == actions[:1]
    assert adapter.check(actions[0]) is Effect.IN_EFFECT
    assert adapter.check(actions[1]) is Effect.NOT_YET


# ---- real bugs found while mutation testing (fixed) ----------------------------------------
def test_a_priority_that_returns_to_an_earlier_value_is_sent_again():
    """Soft mode, ranks A → B → A: the third round must set A again, since B is in effect."""
    cluster = _Cluster(ClusterState(0.0, nodes=NODES, jobs=(Job("1"), Job("2"))))
    top_1 = Plan(priorities={"1": 2.0, "2": 1.0})
    plans = [top_1, Plan(priorities={"1": 1.0, "2": 2.0}), top_1]
    daemon = _daemon(cluster, _Scripted(plans), Store(":memory:"),
                     rules=RoundRules(mode="soft"))
    for _ in plans:
        daemon.run_round()
    last = {a.job_id: a.priority for a in cluster.sent()}
    assert last == {"1": 1_000_000.0, "2": 999_999.0}


def test_a_job_resumed_after_a_suspension_can_be_suspended_again():
    """preempt_mode=suspend: suspend, resume, suspend; Slurm keeps start_time and restart_cnt
    across suspend/resume, so the job looks the same in rounds 1 and 3."""
    run = running("1", 0, start=1000.0)
    cluster = _Cluster(ClusterState(1100.0, nodes=NODES, jobs=(run,)))
    plans = [Plan(), Plan(assignments=(Assignment("1", gpus(0)),)), Plan()]
    daemon = _daemon(cluster, _Scripted(plans), Store(":memory:"),
                     rules=RoundRules(preempt_mode=PreemptMode.SUSPEND))
    daemon.run_round()
    cluster.state = ClusterState(1200.0, nodes=NODES, jobs=(
        Job("1", gpus=4, state=JobState.SUSPENDED, start_s=1000.0, gpus_held=gpus(0)),))
    daemon.run_round()
    cluster.state = ClusterState(1300.0, nodes=NODES, jobs=(run,))
    daemon.run_round()
    suspend = Preempt("1", PreemptMode.SUSPEND)
    assert cluster.sent() == [suspend, Resume("1", gpus(0)), suspend]


def test_a_preemption_skipped_as_done_is_not_warned_again():
    """The resource manager still shows a preempted job on the same run: the Preempt is
    skipped, so neither the checkpoint signal nor the grace wait may be repeated."""
    cluster = _Cluster(_two_jobs(), grace=30.0)
    sleeps: list[float] = []
    daemon = _daemon(cluster, FixedPlan(Plan(assignments=(Assignment("x", gpus(1)),))),
                     Store(":memory:"), rules=RoundRules(grace_s=30.0), sleeps=sleeps)
    daemon.run_round()
    daemon.run_round()
    assert [e for e in cluster.log if e[0] == "warn"] == [("warn", ("a",))]
    assert sleeps == [30.0]


def test_rank_ties_of_word_job_ids_go_by_their_numbers():
    """YARN's ids are words with numbers in them: on a tie, application_…_9 precedes
    application_…_10 (text order would put _10 first), and a later cluster timestamp comes
    after an earlier one whatever the sequence number."""
    ids = ["application_1700000000000_10", "application_1700000000000_9",
           "application_1600000000000_12"]
    ranked = rank_priorities(dict.fromkeys(ids, 0.0))
    assert sorted(ranked, key=ranked.__getitem__, reverse=True) == [
        "application_1600000000000_12", "application_1700000000000_9",
        "application_1700000000000_10"]
