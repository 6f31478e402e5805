"""Regenerate the profiler's fixture logs in tests/fixtures/logs/ from real training runs.

Each fixture is the captured stdout+stderr of a real CPU training run of a tiny model
(scripts/profiler/train_*.py), plus ``NAME.times.json``: the wall-clock time of every
iteration as the training script measured it itself, which the tests compare with what the
profiler extracts. Families that cannot run here (Megatron-LM, DeepSpeed, TF Estimator,
tf_cnn_benchmarks, Horovod) have hand-written fixtures named ``*.handwritten.log``; this
script never touches those.

    python scripts/make_profiler_fixtures.py            # all that can run here
    python scripts/make_profiler_fixtures.py keras hf   # some
"""

from __future__ import annotations

import os
import shutil
import subprocess
import sys
import tempfile
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
SCRIPTS = ROOT / "scripts" / "profiler"
OUT = ROOT / "tests" / "fixtures" / "logs"

# name: (script, extra args, python modules it needs)
RUNS: dict[str, tuple[str, list[str], list[str]]] = {
    "pytorch_imagenet": ("train_torch_imagenet_style.py", [], ["torch"]),
    "pytorch_wordlm": ("train_torch_wordlm_style.py", [], ["torch"]),
    "pytorch_plain_batch_switch": ("train_torch_plain.py",
                                   ["--batch-schedule", "16:15,64:15"], ["torch"]),
    "lightning_tqdm": ("train_lightning.py", ["--bar", "tqdm"], ["pytorch_lightning"]),
    "lightning_rich": ("train_lightning.py", [], ["pytorch_lightning", "rich"]),
    "keras3": ("train_keras.py", [], ["keras", "torch"]),
    "hf_trainer": ("train_hf_trainer.py", [], ["transformers", "accelerate"]),
    "tensorboard": ("train_tensorboard.py", [], ["tensorboard", "torch"]),
}


def _have(modules: list[str]) -> bool:
    import importlib.util
    return all(importlib.util.find_spec(m) is not None for m in modules)


def run(name: str, script: str, extra: list[str], tmp: Path) -> None:
    """One real run; output and side file land in tests/fixtures/logs/."""
    log, times = OUT / f"{name}.log", OUT / f"{name}.times.json"
    args = [sys.executable, str(SCRIPTS / script), "--times", str(times), *extra]
    if name.startswith("lightning"):
        args += ["--csv-dir", str(tmp / name)]
    if name == "hf_trainer":
        args += ["--out", str(tmp / name)]
    if name == "tensorboard":
        args += ["--logdir", str(tmp / name)]
    env = {**os.environ, "PYTHONUNBUFFERED": "1", "KERAS_BACKEND": "torch",
           "TF_CPP_MIN_LOG_LEVEL": "3"}
    with log.open("wb") as out:
        subprocess.run(args, stdout=out, stderr=subprocess.STDOUT, cwd=SCRIPTS, env=env,
                       check=True, timeout=600)
    if name == "lightning_tqdm":
        shutil.copy(tmp / name / "metrics.csv", OUT / "lightning_csv_metrics.csv")
    if name == "tensorboard":
        event = next((tmp / name).glob("events.out.tfevents.*"))
        shutil.copy(event, OUT / "tensorboard.tfevents")
        log.unlink()  # the event file is the fixture; stdout is empty


def main(names: list[str]) -> int:
    OUT.mkdir(parents=True, exist_ok=True)
    todo = names or list(RUNS)
    with tempfile.TemporaryDirectory() as tmpdir:
        for name in todo:
            script, extra, modules = RUNS[name]
            if not _have(modules):
                print(f"skip {name}: needs {', '.join(modules)}")
                continue
            run(name, script, extra, Path(tmpdir))
            print(f"made {name}")
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
