"""One configuration schema: every section, type, range and default checked once, everywhere."""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from gpufair.cli.main import main
from gpufair.core.config import Config, config_from_dict, load_config, schema_rows
from gpufair.data import data_dir
from gpufair.errors import InputError
from gpufair.policy.registry import available_policies, create_policy

REPO = Path(__file__).resolve().parents[1]


@pytest.mark.parametrize(("data", "needle"), [
    ({"solvr": {}}, "g.toml: field 'solvr': unknown section"),
    ({"solver": {"backend": "cplex"}}, "field 'solver.backend' = 'cplex': expected one of"),
    ({"solver": {"threads": 0}}, "field 'solver.threads' = 0: must be >= 1"),
    ({"solver": {"time_limit_s": "10"}}, "field 'solver.time_limit_s' = '10': expected a num"),
    ({"daemon": {"round_s": 0}}, "field 'daemon.round_s' = 0: must be > 0"),
    ({"daemon": {"round_s": True}}, "field 'daemon.round_s' = True: expected a number"),
    ({"daemon": {"max_preempt_share": 1.5}}, "'daemon.max_preempt_share' = 1.5: must be <= 1"),
    ({"daemon": {"metrics_port": 70000}}, "'daemon.metrics_port' = 70000: must be <= 65535"),
    ({"daemon": {"seed": 1.5}}, "field 'daemon.seed' = 1.5: expected a whole number"),
    ({"daemon": {"mode": "hardest"}}, "field 'daemon.mode' = 'hardest': expected one of"),
    ({"daemon": {"policy": "nope"}}, "field 'daemon.policy' = 'nope': unknown policy"),
    ({"daemon": {"roundd": 5}}, "field 'daemon.roundd': unknown option"),
    ({"daemon": {"min_runtime_s": -1}}, "field 'daemon.min_runtime_s' = -1: must be >= 0"),
    ({"daemon": []}, "expected a table of options"),
    ({"slurm": {"managed_partitions": ["gpu", 3]}}, "'slurm.managed_partitions[1]' = 3"),
    ({"slurm": {"managed_partitions": "gpu"}}, "'slurm.managed_partitions' = 'gpu': expected"),
    ({"slurm": {"transport": "pyslurm"}}, "field 'slurm.transport' = 'pyslurm'"),
    ({"slurm": {"retries": 0}}, "field 'slurm.retries' = 0: must be >= 1"),
    ({"store": {"path": 5}}, "field 'store.path' = 5: expected a string"),
    ({"policies": {"lass": {}}}, "field 'policies.lass' = 'lass': unknown policy"),
    ({"policies": {"themis": {"f": "abc"}}}, "'policies.themis.f' = 'abc': expected a number"),
    ({"policies": {"themis": {"lease": 60}}}, "field 'policies.themis.lease': unknown option"),
    ({"policies": {"las": {"queue_thresholds": [1]}}}, "'policies.las.queue_thresholds'"),
    ({"policies": {"las": {"queue_thresholds_gpu_s": ["1h"]}}},
     "'policies.las.queue_thresholds_gpu_s[0]' = '1h': expected a number"),
    ({"policies": {"max_min": {"heterogeneity_aware": 1}}}, "expected true or false"),
    ({"policies": {"fifo": {"anything": 1}}}, "'policies.fifo.anything': this section takes"),
    ({"policies": {"shockwave": {"mode": "eager"}}}, "'policies.shockwave.mode' = 'eager'"),
    ({"policies": {"shockwave": {"window_rounds": 0}}}, "'policies.shockwave.window_rounds'"),
    ({"policies": {"themis": {"slowdown": {"rack": "x"}}}}, "'policies.themis.slowdown.rack'"),
    ({"policies": {"themis": {"f": float("nan")}}}, "expected a finite number"),
])
def test_every_mistake_names_file_section_and_key(data, needle):
    with pytest.raises(InputError) as err:
        config_from_dict(data, "g.toml")
    assert needle in str(err.value)
    assert str(err.value).startswith("g.toml")


def test_defaults_are_the_documented_ones():
    config = Config()
    assert config.daemon.round_s == 120.0 and config.daemon.max_preempt_share == 0.5
    assert config.daemon.policy == "las" and config.daemon.mode == "hard"
    assert config.slurm.managed_partitions == ("gpu",) and config.slurm.retries == 3
    assert config.store.path == "/var/lib/gpufair/state.db"
    assert config.solver.backend is None


def test_example_file_is_valid_and_complete():
    config = load_config(REPO / "gpufair" / "deploy" / "gpufair.toml")
    assert config.daemon.round_s == 60 and config.daemon.grace_s == 30
    assert config.policies["las"].queue_thresholds_gpu_s == (3600.0, 36000.0)
    # the example mentions every option of the sections it has (commented or not)
    text = (REPO / "gpufair" / "deploy" / "gpufair.toml").read_text()
    for key, _, _, _ in schema_rows():
        section, _, name = key.rpartition(".")
        if section in ("daemon", "slurm", "store", "solver"):
            assert name in text, f"gpufair/deploy/gpufair.toml does not mention {key}"


def test_one_policy_config_for_every_command():
    """serve, dry-run and simulate all read [solver] and the policy options the same way;
    [daemon] gives the round and seed unless a simulation overrides them."""
    config = config_from_dict({"solver": {"backend": "highs", "time_limit_s": 7, "threads": 1},
                               "daemon": {"round_s": 90, "seed": 5, "policy": "tiresias"},
                               "policies": {"las": {"queue_thresholds_gpu_s": [10, 5]}}})
    daemon = config.policy_config()
    assert (daemon.round_s, daemon.seed, daemon.solver_backend, daemon.solver_time_limit_s,
            daemon.solver_threads) == (90, 5, "highs", 7, 1)
    assert create_policy("las", daemon).thresholds == [5.0, 10.0]
    sim = config.policy_config("las", round_s=120, seed=0, default_backend="ecos")
    assert (sim.round_s, sim.seed, sim.solver_backend) == (120, 0, "highs")
    assert Config().policy_config("max_min", default_backend="ecos").solver_backend == "ecos"


def test_artifact_json_is_the_running_policys_options():
    config = load_config(data_dir() / "tacc_32gpus.json")
    policy = create_policy("shockwave", config.policy_config("shockwave"))
    assert policy.settings.window_rounds == 20 and policy.settings.ftf_exponent == 12.0
    with pytest.raises(InputError, match=r"tacc_32gpus\.json: field 'policies\.themis\.future"):
        create_policy("themis", config.policy_config("themis"))


def test_describe_lists_every_option_of_every_section(capsys):
    assert main(["config", "--describe"]) == 0
    out = capsys.readouterr().out
    for key in ("solver.backend", "daemon.min_runtime_s", "slurm.token_file", "store.path",
                "policies.themis.f", "policies.shockwave.window_rounds",
                "policies.las.queue_thresholds_gpu_s", "policies.max_min.heterogeneity_aware"):
        assert key in out
    assert len(out.splitlines()) == len(schema_rows())
    assert {row[0].split(".")[1] for row in schema_rows() if row[0].startswith("policies.")} <= \
        set(available_policies())


def test_config_command_checks_a_file(tmp_path):
    bad = tmp_path / "g.toml"
    bad.write_text('[daemon]\nmax_preempt_share = "half"\n')
    proc = subprocess.run([sys.executable, "-m", "gpufair.cli.main", "config", str(bad)],
                          capture_output=True, text=True, check=False)
    assert proc.returncode == 2 and "Traceback" not in proc.stderr
    assert f"{bad}: field 'daemon.max_preempt_share' = 'half': expected a number" in proc.stderr
    bad.write_bytes(b'[daemon]\npolicy = "\xff"\n')
    proc = subprocess.run([sys.executable, "-m", "gpufair.cli.main", "config", str(bad)],
                          capture_output=True, text=True, check=False)
    assert proc.returncode == 2 and "not UTF-8" in proc.stderr


def test_the_same_bad_config_fails_every_command_the_same_way(tmp_path, capsys):
    bad = tmp_path / "g.toml"
    bad.write_text("[policies.themis]\nf = 2\n")
    snap = REPO / "gpufair" / "deploy" / "snapshot.example.json"
    for argv in (["simulate", "--config", str(bad), "--no-progress"],
                 ["dry-run", str(snap), "--config", str(bad)],
                 ["serve", "--config", str(bad), "--rounds", "0"],
                 ["snapshot", "--slurm", "--config", str(bad)],
                 ["config", str(bad)]):
        assert main(argv) == 2, argv
        assert "field 'policies.themis.f' = 2: must be <= 1" in capsys.readouterr().err


_values = st.recursive(st.none() | st.booleans() | st.integers() | st.floats() | st.text(),
                       lambda inner: st.lists(inner, max_size=3)
                       | st.dictionaries(st.text(max_size=8), inner, max_size=3), max_leaves=6)
_keys = st.sampled_from(["solver", "daemon", "slurm", "store", "policies", "x"])
_options = st.sampled_from(["backend", "round_s", "policy", "mode", "managed_partitions",
                            "path", "themis", "las", "f", "queue_thresholds_gpu_s", "seed"])


@settings(max_examples=300, deadline=None)
@given(st.dictionaries(_keys, st.dictionaries(_options, _values, max_size=4)
                       | _values, max_size=4))
def test_any_table_is_a_config_or_a_named_error(data):
    try:
        config = config_from_dict(json.loads(json.dumps(data, allow_nan=True)), "f.toml")
    except InputError as exc:
        assert str(exc).startswith("f.toml")
    else:
        assert isinstance(config, Config)


def test_a_config_nested_too_deeply_is_named_alone(tmp_path, capsys):
    """The config reader says which file is too deep itself (the CLI's last-resort fallback
    could only name every input file on the command line)."""
    from gpufair.cli.main import main

    deep = tmp_path / "deep.toml"
    deep.write_text("a = " + "[" * 5000 + "]" * 5000 + "\n")
    assert main(["simulate", "--config", str(deep), "--trace",
                 "shockwave_120jobs_32gpus"]) == 2
    err = capsys.readouterr().err.strip()
    assert err.startswith(f"gpufair: error: {deep}: nested too deeply"), err
    assert "shockwave_120jobs" not in err


@pytest.mark.parametrize("key, value, limit", [
    ("round_s", 1e9, "<= 86400"), ("poll_s", 1e7, "<= 3600"), ("grace_s", 1e7, "<= 3600"),
    ("event_min_interval_s", 1e7, "<= 3600"), ("action_interval_s", 1e4, "<= 60"),
    ("min_runtime_s", 1e9, r"<= 2\.592e\+06")])
def test_daemon_durations_have_a_sane_upper_bound(key, value, limit):
    """A round of 30 years or a grace of months is a typo, not a choice: say so."""
    from gpufair.core.config import config_from_dict
    from gpufair.errors import InputError

    with pytest.raises(InputError, match=limit):
        config_from_dict({"daemon": {key: value}}, "t.toml")
