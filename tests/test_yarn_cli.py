"""``gpufair snapshot --yarn URL``, ``gpufair dry-run`` of that snapshot, and ``gpufair serve``
with ``[daemon] adapter = "yarn"``, against the emulator."""

from __future__ import annotations

import json

import pytest

from gpufair.cli.main import main
from gpufair.model.snapshot import load_snapshot
from tests.yarn_emulator import RMServer
from tests.yarn_setup import gpu_cluster


@pytest.fixture()
def rm():
    cluster = gpu_cluster()
    server = RMServer(cluster)
    cluster.submit("alice", "a", 2)
    cluster.submit("bob", "b", 3)
    cluster.tick()
    cluster.submit("bob", "b", 2)          # b: 3 + 2 > 4: waits
    yield cluster, server
    server.close()


def write_config(tmp_path, server, **daemon) -> str:
    extra = "".join(f'{k} = {json.dumps(v)}\n' for k, v in daemon.items())
    path = tmp_path / "gpufair.toml"
    path.write_text(f"""[daemon]
adapter = "yarn"
policy = "fifo"
metrics_port = 0
poll_s = 0
round_s = 1
log_format = "text"
hook_dir = "{tmp_path / 'hooks'}"
{extra}
[yarn]
urls = ["{server.url}"]
managed_queues = ["a", "b"]
enforce = "capacity"
rest_queue = "root.rest"

[store]
path = "{tmp_path / 'state.db'}"
""")
    return str(path)


def test_snapshot_then_dry_run(rm, tmp_path, capsys) -> None:
    cluster, server = rm
    assert main(["snapshot", "--yarn", server.url, "--config",
                 write_config(tmp_path, server)]) == 0
    out = capsys.readouterr().out
    snap = tmp_path / "snap.json"
    snap.write_text(out)
    state = load_snapshot(str(snap))
    assert sorted((j.tenant, j.state.value, j.gpus) for j in state.jobs) == [
        ("a", "running", 2), ("b", "pending", 2), ("b", "running", 3)]
    assert json.loads(out)["source"]["adapter"] == f"yarn/{server.url}"
    requests_before = len(cluster.requests)
    assert main(["dry-run", str(snap), "--config", write_config(tmp_path, server),
                 "--json"]) == 0
    decided = json.loads(capsys.readouterr().out)
    assert decided["policy"] == "fifo" and decided["gpus"] == 8
    assert [a["kind"] for a in decided["actions"]] == ["Start"]
    assert len(cluster.requests) == requests_before     # a dry run asks the RM nothing


def test_snapshot_of_an_unreachable_rm_fails_cleanly(tmp_path, capsys) -> None:
    assert main(["snapshot", "--yarn", "http://127.0.0.1:9", "--config",
                 str(tmp_path / "none.toml")]) == 2          # missing config: bad input
    assert main(["snapshot", "--yarn", "http://127.0.0.1:9"]) == 1
    assert "YARN unavailable" in capsys.readouterr().err


def test_serve_with_yarn(rm, tmp_path) -> None:
    cluster, server = rm
    assert main(["serve", "--config", write_config(tmp_path, server), "--rounds", "1"]) == 0
    cluster.tick()
    assert {q.name: q.max_capacity for q in cluster.queues.values()} == \
        {"root": 100.0, "a": 25.0, "b": 62.5, "rest": 12.5}
    assert cluster.gpus_by_queue() == {"a": 2, "b": 5, "rest": 0}
