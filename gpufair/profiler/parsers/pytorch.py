"""PyTorch scripts in the style of the official examples, and plain ``step N ... loss`` lines.

- ImageNet example (``ProgressMeter``): ``Epoch: [e][ i/n]\\tTime  0.123 ( 0.150)\\t...``;
  ``Test: [ i/n]`` lines are evaluation.
- Word language model: ``| epoch   1 |   200/ 2983 batches | lr 20.00 | ms/batch 45.1 |``.
- Plain loops: ``step 10/500 loss 2.3 time 45ms`` / ``iter 10: loss=2.3, 0.05 s/it``; a line
  must mention a loss to count, so unrelated ``step`` chatter is ignored.
"""

from __future__ import annotations

import re

from gpufair.profiler.events import EVAL, Sample
from gpufair.profiler.parsers.base import Parser, integer, num

_IMAGENET = (r"(?:(?P<test>Test: ?)|Epoch: \[(?P<ep>\d+)\])\[\s*(?P<i>\d+)/\s*(?P<n>\d+)\]"
             r"\s+Time\s+(?P<t>[\d.]+)\s+\(\s*[\d.]+\)(?:.*?Loss\s+(?P<iloss>\S+))?")
_WORDLM = (r"\| epoch\s+(?P<wep>\d+) \|\s*(?P<wi>\d+)/\s*(?P<wn>\d+) batches \|.*?"
           r"ms/batch\s+(?P<ms>[\d.]+)(?: \| loss\s+(?P<wloss>\S+))?")
_PLAIN = (r"(?i:\b(?:iter(?:ation)?|step))\s*[:=#]?\s*(?P<ps>\d+)(?:\s*/\s*(?P<pn>\d+))?"
          r"(?P<rest>[^\n\r]*?(?i:loss)[^\n\r]*)")

_REST_TIME = re.compile(r"(?i)\b(?:time|t|step_time|iter_time)\s*[:=]?\s*([\d.]+)\s*(ms|s)?\b")
_REST_SPI = re.compile(r"([\d.]+)\s*(?:s/it|sec/it|s/iter)\b")
_REST_IPS = re.compile(r"([\d.]+)\s*it/s\b")
_REST_SPS = re.compile(r"(?i)([\d.]+)\s*(?:samples|examples|images|img)/s(?:ec)?\b")
_REST_BATCH = re.compile(r"(?i)\b(?:batch[_ ]size|bs)\s*[:=]?\s*(\d+)")
_REST_LOSS = re.compile(r"(?i)loss\s*[:=]?\s*([-+\d.eE]+|nan|inf)")


class PyTorchParser(Parser):
    family = "pytorch"
    signature = re.compile(
        r"Epoch: \[\d+\]\[\s*\d+/\s*\d+\]\s+Time|\| epoch\s+\d+ \|.*ms/batch|"
        r"^\W*(?i:iter(?:ation)?|step)\s*[:=#]?\s*\d+.*(?i:loss)")
    pattern = re.compile(rf"^[^\S\n\r]*(?:{_IMAGENET}|{_WORDLM}|{_PLAIN})", re.M)
    keywords = ("Time ", "ms/batch")

    def convert(self, m: re.Match[str]) -> Sample | None:
        t = m.group("t")
        if t is not None:
            i, n = int(m.group("i")), int(m.group("n"))
            if m.group("test") is not None:
                return Sample(step=i, phase=EVAL, iter_time_s=float(t))
            ep = int(m.group("ep"))
            loss = m.group("iloss")
            return Sample(step=ep * n + i + 1, epoch=ep + i / n, iter_time_s=float(t),
                          loss=_loss(loss))
        ms = m.group("ms")
        if ms is not None:
            ep, i, n = int(m.group("wep")), int(m.group("wi")), int(m.group("wn"))
            return Sample(step=(ep - 1) * n + i, epoch=ep - 1 + i / n,
                          iter_time_s=float(ms) / 1000.0, loss=_loss(m.group("wloss")))
        return self._plain(m)

    def _plain(self, m: re.Match[str]) -> Sample:
        rest = m.group("rest")
        sample = Sample(step=int(m.group("ps")), total_steps=integer(m.group("pn")))
        tm = _REST_TIME.search(rest)
        if tm is not None:
            value = float(tm.group(1))
            sample.iter_time_s = value / 1000.0 if tm.group(2) == "ms" else value
        elif (spi := _REST_SPI.search(rest)) is not None:
            sample.iter_time_s = float(spi.group(1))
        elif (ips := _REST_IPS.search(rest)) is not None:
            sample.steps_per_s = float(ips.group(1))
        if (sps := _REST_SPS.search(rest)) is not None:
            sample.samples_per_s = float(sps.group(1))
        if (bm := _REST_BATCH.search(rest)) is not None:
            sample.batch_size = int(bm.group(1))
        if (lm := _REST_LOSS.search(rest)) is not None:
            sample.loss = _loss(lm.group(1))
        return sample


def _loss(text: str | None) -> float | None:
    try:
        return num(text)
    except ValueError:
        return None
