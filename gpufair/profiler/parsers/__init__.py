"""Parser families, most specific first, and auto-detection over a file's first lines.

Order matters only for ties: a Megatron-DeepSpeed log matches both Megatron and DeepSpeed
lines, and Megatron's carry more (iteration time *and* global batch size); the generic plain
``step ... loss`` pattern of the PyTorch family comes last.
"""

from __future__ import annotations

from gpufair.profiler.parsers.base import Parser
from gpufair.profiler.parsers.deepspeed import DeepSpeedParser
from gpufair.profiler.parsers.detectron2 import Detectron2Parser
from gpufair.profiler.parsers.fairseq import FairseqParser
from gpufair.profiler.parsers.hf_trainer import HfTrainerParser
from gpufair.profiler.parsers.keras import KerasParser
from gpufair.profiler.parsers.lightning import LightningParser
from gpufair.profiler.parsers.litgpt import LitGptParser
from gpufair.profiler.parsers.maskrcnn_benchmark import MaskRcnnBenchmarkParser
from gpufair.profiler.parsers.megatron import MegatronParser
from gpufair.profiler.parsers.meters import MetersParser
from gpufair.profiler.parsers.mmcv import MmcvParser
from gpufair.profiler.parsers.niftynet import NiftyNetParser
from gpufair.profiler.parsers.paddle import PaddleParser
from gpufair.profiler.parsers.pytorch import PyTorchParser
from gpufair.profiler.parsers.reporter_jsonl import ReporterParser
from gpufair.profiler.parsers.tensorflow import TensorFlowParser

FAMILIES: tuple[type[Parser], ...] = (
    ReporterParser, MegatronParser, DeepSpeedParser, HfTrainerParser, LightningParser,
    KerasParser, TensorFlowParser, Detectron2Parser, MaskRcnnBenchmarkParser, MmcvParser,
    FairseqParser, LitGptParser, PaddleParser, NiftyNetParser, PyTorchParser, MetersParser,
)
BY_NAME: dict[str, type[Parser]] = {p.family: p for p in FAMILIES}

DETECT_LINES = 400


def detect(lines: list[str]) -> type[Parser] | None:
    """The family whose signature matches most of ``lines`` (ties: the more specific)."""
    best: type[Parser] | None = None
    best_hits = 0
    for family in FAMILIES:
        sig = family.signature
        hits = sum(1 for line in lines if sig.search(line))
        if hits > best_hits:
            best, best_hits = family, hits
    return best


def parser_for(name: str) -> type[Parser]:
    try:
        return BY_NAME[name]
    except KeyError:
        from gpufair.errors import InputError
        raise InputError("--format", f"unknown log format; one of {', '.join(BY_NAME)}",
                         value=name) from None


__all__ = ["BY_NAME", "DETECT_LINES", "FAMILIES", "Parser", "detect", "parser_for"]
