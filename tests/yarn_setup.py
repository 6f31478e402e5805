"""Shared set-up of the YARN tests: a small GPU cluster in the emulator, and the gpufair
configuration that drives it (one place, so every YARN test means the same cluster)."""

from __future__ import annotations

from pathlib import Path
from typing import Any

from gpufair.core.config import Config, config_from_dict
from tests.yarn_emulator import Cluster, EmuNode, RMServer


def gpu_cluster(**options: Any) -> Cluster:
    """Two 4-GPU nodes; tenants ``a`` and ``b`` at 50 % each; ``rest`` at 0."""
    return Cluster([EmuNode("gpu01", 4), EmuNode("gpu02", 4)],
                   {"root.a": (50, 50), "root.b": (50, 50), "root.rest": (0, 0)}, **options)


def yarn_settings(*servers: RMServer, **extra: Any) -> dict[str, Any]:
    return {"urls": [s.url for s in servers], "managed_queues": ["a", "b"],
            "enforce": "capacity", "rest_queue": "root.rest", "backoff_s": 0.05,
            "retries": 4, "timeout_s": 5.0, "kill_wait_s": 5.0, **extra}


def yarn_config(tmp: Path, *servers: RMServer, policy: str = "fifo",
                daemon: dict[str, Any] | None = None, **extra: Any) -> Config:
    return config_from_dict({
        # min_runtime_s 0: these tests watch the policy's own decisions at 1 s rounds (the
        # 30 s default would hold back every kill a test waits for)
        "daemon": {"policy": policy, "adapter": "yarn", "metrics_port": 0,
                   "hook_dir": str(tmp / "hooks"), "max_preempt_share": 1.0, "poll_s": 0,
                   "round_s": 1, "min_runtime_s": 0, **(daemon or {})},
        "yarn": yarn_settings(*servers, **extra),
        "store": {"path": str(tmp / "state.db")}}, "<test>")
