"""Association and QOS limits read ahead on the real Slurm 22.05 with slurmdbd (issue 29).

An account with ``GrpTRES=gres/gpu=2`` and three 1-GPU jobs: gpufair released all three
before (the third then waited on AssocGrpGRES, pinned onto a GPU booked for it, until Slurm's
refusal was seen a round later); now it starts two, leaves the third held with no GPU booked,
and starts it in the round after one of the two ended. And limits on other TRES and per job:
a QOS's ``MaxTRESPerJob=gres/gpu=2`` and an account's ``GrpTRES=cpu=2``."""

from __future__ import annotations

import json
import sys
from pathlib import Path

from conftest import ACCOUNTING_MANAGED
from slurm_cluster import Cluster, write_config

from gpufair.plugin.store import Store

CLI = [sys.executable, "-m", "gpufair.cli.main"]
ACCOUNT = "limited"


def _config(cluster: Cluster, tmp_path: Path) -> Path:
    config = write_config(tmp_path / "g.toml", cluster, tmp_path / "s.db", policy="fifo")
    config.write_text(config.read_text().replace(
        'managed_partitions = ["gpu"]', f'managed_partitions = ["{ACCOUNTING_MANAGED}"]'))
    return config


def _add_account(cluster: Cluster, account: str, *user: str) -> None:
    """``account`` with root in it (slurmdbd may be coming back from test_slurm_accounting's
    stop: tried until it answers)."""
    cluster.wait_for("slurmdbd", lambda: cluster.run(
        "sacctmgr", "-i", "add", "account", account, "Cluster=loopback", check=False
    ).returncode == 0 or account in cluster.run("sacctmgr", "-n", "-P", "show", "account",
                                                account, check=False).stdout, 60)
    cluster.run("sacctmgr", "-i", "add", "user", "root", f"Account={account}", *user)


def test_a_full_gpu_limit_books_no_gpu_for_the_job_slurm_would_not_run(
        slurm_accounting: Cluster, tmp_path: Path):
    cluster = slurm_accounting
    _add_account(cluster, ACCOUNT)
    cluster.run("sacctmgr", "-i", "modify", "account", ACCOUNT, "set", "GrpTRES=gres/gpu=2")
    cluster.wait_for("the limit in slurmctld", lambda: "gres/gpu=2(" in cluster.run(
        "scontrol", "show", "assoc_mgr", f"accounts={ACCOUNT}", "flags=assoc").stdout, 30)
    ids = [cluster.run("sbatch", "--parsable", "-p", ACCOUNTING_MANAGED, "-A", ACCOUNT,
                       "--gres=gpu:1", "-o", "/dev/null", "--wrap", f"sleep {s}"
                       ).stdout.strip() for s in (600, 600, 600)]
    config = _config(cluster, tmp_path)
    try:
        cluster.run(*CLI, "serve", "--config", str(config), "--rounds", "1")
        cluster.wait_for("two jobs running", lambda: sum(
            cluster.jobs()[j]["job_state"] == "RUNNING" for j in ids) == 2, 30)
        third = cluster.jobs()[ids[2]]
        # still held by gpufair (never released, never pinned): no GPU booked for it
        assert third["job_state"] == "PENDING"
        assert third["state_reason"] == "JobHeldUser", third["state_reason"]
        assert not third.get("required_nodes")
        # nor in the snapshot a dry run would plan from
        snap = json.loads(cluster.run(*CLI, "snapshot", "--slurm", "--config",
                                      str(config)).stdout)
        assert ids[2] not in {j["id"] for j in snap["jobs"]}
        assert {ids[0], ids[1]} <= {j["id"] for j in snap["jobs"]}

        cluster.run("scancel", ids[0])
        cluster.wait_for("the first job gone", lambda: cluster.jobs()[ids[0]]["job_state"]
                         not in ("RUNNING", "COMPLETING"), 30)
        cluster.run(*CLI, "serve", "--config", str(config), "--rounds", "1")
        cluster.wait_for("the third job running",
                         lambda: cluster.jobs()[ids[2]]["job_state"] == "RUNNING", 30)
    finally:
        cluster.run("scancel", *ids, check=False)
        cluster.run("sacctmgr", "-i", "modify", "account", ACCOUNT, "set", "GrpTRES=gres/gpu=-1",
                    check=False)


def test_a_per_job_gpu_limit_and_a_cpu_limit_are_read_ahead_and_explained(
        slurm_accounting: Cluster, tmp_path: Path):
    """QOS ``capped`` with ``MaxTRESPerJob=gres/gpu=2``: a 4-GPU job in it never starts;
    account ``cpuacct`` with ``GrpTRES=cpu=2``: of two 1-GPU jobs of 2 CPUs and 1 CPU, the
    second waits while the first runs; account ``typedacct`` with
    ``GrpTRES=gres/gpu:v100=1``: of two ``gpu:v100:1`` jobs the second waits, and an untyped
    1-GPU job runs (22.05 holds no untyped request to a typed limit). The old code released
    all of them (the three then sat pending, QOSMaxGRESPerJob, AssocGrpCpuLimit and
    AssocGrpGRES, pinned onto GPUs booked for them); now those three stay held with no node
    pinned, and their owner is told why (gpufair explain, and the job's AdminComment): the
    QOS or account, the limit, the TRES, use and limit."""
    cluster = slurm_accounting
    account = "cpuacct"
    cluster.run("sacctmgr", "-i", "add", "qos", "capped", "MaxTRESPerJob=gres/gpu=2",
                check=False)    # (there already when the session's cluster ran this before)
    _add_account(cluster, account, "QOS=normal,capped")
    cluster.run("sacctmgr", "-i", "modify", "account", account, "set", "GrpTRES=cpu=2")
    _add_account(cluster, "typedacct")
    cluster.run("sacctmgr", "-i", "modify", "account", "typedacct", "set",
                "GrpTRES=gres/gpu:v100=1")

    def shown(*argv: str) -> str:
        return cluster.run("scontrol", "show", "assoc_mgr", *argv).stdout
    cluster.wait_for("the limits in slurmctld", lambda: "cpu=2(" in shown(
        f"accounts={account}", "flags=assoc") and "gres/gpu:v100=1(" in shown(
        "accounts=typedacct", "flags=assoc") and "MaxTRESPJ=gres/gpu=2" in shown(
        "qos=capped", "flags=qos"), 30)

    def sbatch(*how: str, account: str = account) -> str:
        return cluster.run("sbatch", "--parsable", "-p", ACCOUNTING_MANAGED, "-A", account,
                           "-o", "/dev/null", *how, "--wrap", "sleep 600").stdout.strip()
    big = sbatch("--qos=capped", "--gres=gpu:4")
    two_cpus = sbatch("--gres=gpu:1", "-c", "2")
    one_more = sbatch("--gres=gpu:1", "-c", "1")
    v100s = [sbatch("--gres=gpu:v100:1", account="typedacct") for _ in range(2)]
    untyped = sbatch("--gres=gpu:1", account="typedacct")
    config = _config(cluster, tmp_path)
    try:
        cluster.run(*CLI, "serve", "--config", str(config), "--rounds", "1")
        cluster.wait_for("the 2-CPU, first v100 and untyped jobs running", lambda: all(
            cluster.jobs()[j]["job_state"] == "RUNNING" for j in (two_cpus, v100s[0], untyped)),
            30)
        jobs = cluster.jobs()
        for job in (big, one_more, v100s[1]):
            assert (jobs[job]["job_state"], jobs[job]["state_reason"]) == \
                ("PENDING", "JobHeldUser"), (job, jobs[job]["state_reason"])
            assert not jobs[job].get("required_nodes")
        # what the owner sees in squeue / scontrol show job: the same reason
        assert jobs[big]["admin_comment"].startswith("gpufair:managed | gpufair ")
        assert jobs[big]["admin_comment"].endswith(
            "QOS capped MaxTRESPerJob gres/gpu: the job asks 4, the limit is 2")
        store = Store(tmp_path / "s.db")
        [told_big] = store.decisions(big)
        [told_cpu] = store.decisions(one_more)
        [told_v100] = store.decisions(v100s[1])
        store.close()
    finally:
        cluster.run("scancel", big, two_cpus, one_more, *v100s, untyped, check=False)
        cluster.run("sacctmgr", "-i", "modify", "account", account, "set", "GrpTRES=cpu=-1",
                    check=False)
        cluster.run("sacctmgr", "-i", "modify", "account", "typedacct", "set",
                    "GrpTRES=gres/gpu:v100=-1", check=False)
    assert (told_big["outcome"], told_big["code"]) == ("wait", "slurm.not_startable")
    assert told_big["text"].endswith(
        "QOS capped MaxTRESPerJob gres/gpu: the job asks 4, the limit is 2"), told_big["text"]
    assert told_cpu["text"].endswith(
        f"association (account {account}) GrpTRES cpu: 2 in use + 1 asked > 2"), \
        told_cpu["text"]
    assert told_v100["text"].endswith(
        "association (account typedacct) GrpTRES gres/gpu:v100: 1 in use + 1 asked > 1"), \
        told_v100["text"]
