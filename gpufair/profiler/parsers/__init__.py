"""Parser families, most specific first, and auto-detection over a sample of a log.

Order matters only for ties: a Megatron-DeepSpeed log matches both Megatron and DeepSpeed
lines, and Megatron's carry more (iteration time *and* global batch size); the generic plain
``step ... loss`` pattern of the PyTorch family comes last.
"""

from __future__ import annotations

import numpy as np

from gpufair.profiler.parsers.accelerate import AccelerateParser
from gpufair.profiler.parsers.base import Parser
from gpufair.profiler.parsers.deepspeed import DeepSpeedParser
from gpufair.profiler.parsers.detectron2 import Detectron2Parser
from gpufair.profiler.parsers.fairseq import FairseqParser
from gpufair.profiler.parsers.hf_trainer import HfTrainerParser
from gpufair.profiler.parsers.jax import JaxParser
from gpufair.profiler.parsers.keras import KerasParser
from gpufair.profiler.parsers.lightning import LightningParser
from gpufair.profiler.parsers.litgpt import LitGptParser
from gpufair.profiler.parsers.maskrcnn_benchmark import MaskRcnnBenchmarkParser
from gpufair.profiler.parsers.megatron import MegatronParser
from gpufair.profiler.parsers.meters import MetersParser
from gpufair.profiler.parsers.mmcv import MmcvParser
from gpufair.profiler.parsers.mxnet import MxnetParser
from gpufair.profiler.parsers.nemo import NemoParser
from gpufair.profiler.parsers.niftynet import NiftyNetParser
from gpufair.profiler.parsers.paddle import PaddleParser
from gpufair.profiler.parsers.pytorch import PyTorchParser
from gpufair.profiler.parsers.reporter_jsonl import ReporterParser
from gpufair.profiler.parsers.tensorflow import TensorFlowParser
from gpufair.profiler.parsers.timm import TimmParser
from gpufair.profiler.scan import scan

FAMILIES: tuple[type[Parser], ...] = (
    ReporterParser, MegatronParser, DeepSpeedParser, HfTrainerParser, AccelerateParser,
    LightningParser,
    KerasParser, TensorFlowParser, Detectron2Parser, MaskRcnnBenchmarkParser, MmcvParser,
    FairseqParser, LitGptParser, PaddleParser, NiftyNetParser, NemoParser, JaxParser,
    MxnetParser, TimmParser, PyTorchParser, MetersParser,
)
BY_NAME: dict[str, type[Parser]] = {p.family: p for p in FAMILIES}

DETECT_LINES = 400
# Detection reads the first DETECT_LINES lines of a chunk and SAMPLE_WINDOWS windows of
# DETECT_LINES lines spread over the rest (a Megatron log's first iteration line comes after
# thousands of lines of arguments): bounded cost per chunk, and every chunk of a log is
# tried until one identifies it, so the whole log is sampled.
SAMPLE_WINDOWS = 8


def _picked(data: bytes) -> list[bytes]:
    """The non-empty lines of a clean chunk that detection reads: its head and evenly
    spread windows."""
    lines = data.split(b"\n")
    if len(lines) <= DETECT_LINES * (SAMPLE_WINDOWS + 1):
        picked = lines
    else:
        # the head, the tail (what a running log's latest lines say) and windows between
        stride = (len(lines) - 2 * DETECT_LINES) // (SAMPLE_WINDOWS - 1)
        picked = lines[:DETECT_LINES]
        for k in range(1, SAMPLE_WINDOWS - 1):
            start = DETECT_LINES + k * stride
            picked.extend(lines[start:start + DETECT_LINES])
        picked.extend(lines[-DETECT_LINES:])
    return [line for line in picked if line]


def sample_lines(data: bytes) -> list[str]:
    """Lines of a clean chunk to detect on: its head and evenly spread windows."""
    return [line.decode("utf-8", "replace") for line in _picked(data)]


def _shapes(lines: list[bytes]) -> list[tuple[str, int]]:
    """One line of each shape among ``lines`` (same text once every number is a marker of
    its form, and as many numbers: a hash collision of two shapes must not merge them),
    with how many lines have that shape."""
    scanned = scan(b"\n".join(lines) + b"\n")
    skeletons = scanned.skeletons
    tokens = np.diff(scanned.token_offsets)
    order = np.lexsort((tokens, skeletons))  # stable: a group's first line comes first
    s, t = skeletons[order], tokens[order]
    opens = np.ones(len(order), dtype=bool)
    opens[1:] = (s[1:] != s[:-1]) | (t[1:] != t[:-1])
    heads = np.flatnonzero(opens)
    counts = np.diff(np.append(heads, len(order)))
    return [(lines[i].decode("utf-8", "replace"), n)
            for i, n in zip(order[heads].tolist(), counts.tolist(), strict=True)]


def closest(lines: list[str], n: int = 3) -> list[str]:
    """Why no family matched: the families whose words appear most in ``lines``, each with
    what was found and that no line had the family's shape (for an "unknown format"
    answer; empty when no family's words appear at all)."""
    found = []
    for family in FAMILIES:
        words = family.hints or family.keywords
        hits = {w: sum(1 for line in lines if w in line) for w in words}
        total = sum(hits.values())
        if total:
            said = ", ".join(f"'{w}' x{c}" for w, c in hits.items() if c)
            found.append((total, f"{family.family}: {said}, but no line has the shape of "
                                 f"its progress lines"))
    found.sort(key=lambda t: -t[0])
    return [text for _, text in found[:n]]


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


def detect_chunk(data: bytes) -> type[Parser] | None:
    """``detect(sample_lines(data))``, with each signature run once per line shape rather
    than once per line: a chunk of a training log is a few shapes repeated thousands of
    times, and 21 signatures on every one of 3,600 sampled lines cost more than parsing the
    whole megabyte (Megatron's 300-character lines: 0.5 s). Exact for signatures that treat
    all digit runs alike; those that do not (``signature_reads_digits``) see every line."""
    picked = _picked(data)
    if not picked:
        return None
    shapes = _shapes(picked)
    texts: list[str] | None = None
    best: type[Parser] | None = None
    best_hits = 0
    for family in FAMILIES:
        sig = family.signature
        if family.signature_reads_digits:
            if texts is None:
                texts = [line.decode("utf-8", "replace") for line in picked]
            hits = sum(1 for line in texts if sig.search(line))
        else:
            hits = sum(n for line, n in shapes if sig.search(line))
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


__all__ = ["BY_NAME", "DETECT_LINES", "FAMILIES", "Parser", "closest", "detect", "detect_chunk",
           "parser_for", "sample_lines"]
