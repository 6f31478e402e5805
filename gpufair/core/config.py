"""gpufair's configuration file (TOML), validated so a typo is an error, not a silent default.

```toml
[solver]
backend = "auto"        # auto | gurobi | highs | ecos (LPs only)
time_limit_s = 30
threads = 2

[policies.las]
queue_thresholds_gpu_s = [3600, 36000]
```
A ``.json`` file is taken as the options of the policy being run, so artifact configuration
files (e.g. Shockwave's ``tacc_32gpus.json``) are accepted as they are.
"""

from __future__ import annotations

import json
import sys
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from gpufair.errors import InputError

if sys.version_info >= (3, 11):
    import tomllib
else:  # pragma: no cover
    import tomli as tomllib

_SOLVER_KEYS = {"backend": str, "time_limit_s": (int, float), "threads": int}
_TOP_KEYS = {"solver", "policies", "simulator", "daemon", "slurm", "yarn", "profiler", "store"}


@dataclass(frozen=True)
class SolverSettings:
    backend: str | None = None  # None: the caller's default (artifact runs use ECOS)
    time_limit_s: float | None = None
    threads: int | None = None


@dataclass(frozen=True)
class Config:
    solver: SolverSettings = field(default_factory=SolverSettings)
    policies: dict[str, dict[str, Any]] = field(default_factory=dict)
    sections: dict[str, Any] = field(default_factory=dict)
    policy_json: dict[str, Any] | None = None

    def policy_options(self, name: str) -> dict[str, Any]:
        if self.policy_json is not None:
            return dict(self.policy_json)
        return dict(self.policies.get(name, {}))


def load_config(path: str | Path | None) -> Config:
    if path is None:
        return Config()
    path = Path(path)
    try:
        text = path.read_text(encoding="utf-8")
    except OSError as exc:
        raise InputError(str(path), f"cannot read config: {exc.strerror}") from exc
    if path.suffix == ".json":
        try:
            data = json.loads(text)
        except json.JSONDecodeError as exc:
            raise InputError(str(path), f"invalid JSON: {exc.msg}", line=exc.lineno) from exc
        if not isinstance(data, dict):
            raise InputError(str(path), "expected a JSON object of policy options")
        return Config(policy_json=data)
    try:
        data = tomllib.loads(text)
    except tomllib.TOMLDecodeError as exc:
        raise InputError(str(path), f"invalid TOML: {exc}") from exc
    return config_from_dict(data, str(path))


def config_from_dict(data: dict[str, Any], source: str = "<config>") -> Config:
    for key in data:
        if key not in _TOP_KEYS:
            raise InputError(source, f"unknown section; expected one of {sorted(_TOP_KEYS)}",
                             field=key)
    solver = data.get("solver", {})
    if not isinstance(solver, dict):
        raise InputError(source, "expected a table", field="solver")
    for key, value in solver.items():
        kind = _SOLVER_KEYS.get(key)
        if kind is None:
            raise InputError(source, f"unknown key; expected {sorted(_SOLVER_KEYS)}",
                             field=f"solver.{key}")
        if isinstance(value, bool) or not isinstance(value, kind):
            raise InputError(source, "wrong type", field=f"solver.{key}", value=value)
    if solver.get("backend", "auto") not in ("auto", "gurobi", "highs", "ecos"):
        raise InputError(source, "expected auto, gurobi, highs or ecos", field="solver.backend",
                         value=solver["backend"])
    policies = data.get("policies", {})
    if not isinstance(policies, dict) or any(not isinstance(v, dict) for v in policies.values()):
        raise InputError(source, "expected [policies.NAME] tables", field="policies")
    from gpufair.plugin.service_config import service_config
    service_config(data, source)  # [daemon], [slurm], [store]: typos are errors here too
    return Config(solver=SolverSettings(**solver), policies=policies,
                  sections={k: v for k, v in data.items() if k not in ("solver", "policies")})
