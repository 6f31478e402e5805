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
_PLAIN = (r"\b(?:[Ii]ter(?:ation)?|ITER|[Ss]tep|STEP)\s*[:=#]?\s*(?P<ps>\d+)"
          r"(?:\s*/\s*(?P<pn>\d+))?(?P<rest>[^\n\r]*?(?:[Ll]oss|LOSS)[^\n\r]*)")

# the fields a plain line may carry after its step, in one pass (first of each kind wins)
_REST = re.compile(
    r"\b(?:(?:[Tt]ime|t|step_time|iter_time)\s*[:=]?\s*(?P<tv>[\d.]+)\s*(?P<tu>ms|s)?\b"
    r"|(?P<spi>[\d.]+)\s*(?:s/it|sec/it|s/iter)\b"
    r"|(?P<ips>[\d.]+)\s*it/s\b"
    r"|(?P<sps>[\d.]+)\s*(?:samples|examples|images|img)/s(?:ec)?\b"
    r"|(?:[Bb]atch[_ ][Ss]ize|bs)\s*[:=]?\s*(?P<bs>\d+)"
    r"|[Ll]oss\s*[:=]?\s*(?P<loss>[-+\d.eE]+|nan|inf))")


class PyTorchParser(Parser):
    family = "pytorch"
    signature = re.compile(
        r"Epoch: \[\d+\]\[\s*\d+/\s*\d+\]\s+Time|\| epoch\s+\d+ \|.*ms/batch|"
        r"^\W*(?i:iter(?:ation)?|step)\s*[:=#]?\s*\d+.*(?i:loss)")
    pattern = re.compile(rf"^[^\S\n\r]*(?:{_IMAGENET}|{_WORDLM}|{_PLAIN})", re.M)
    keywords = ("Time ", "ms/batch")

    def convert(self, m: re.Match[str]) -> Sample | None:
        # one group() call per line fetches every field (group lookups add up at 10^5 lines)
        t, ms = m.group("t", "ms")
        if t is not None:
            test, ep, i, n, loss = m.group("test", "ep", "i", "n", "iloss")
            i, n = int(i), int(n)
            if test is not None:
                return Sample(step=i, phase=EVAL, iter_time_s=float(t))
            ep = int(ep)
            return Sample(step=ep * n + i + 1, epoch=ep + i / n, iter_time_s=float(t),
                          loss=_loss(loss))
        if ms is not None:
            wep, wi, wn, wloss = m.group("wep", "wi", "wn", "wloss")
            ep, i, n = int(wep), int(wi), int(wn)
            return Sample(step=(ep - 1) * n + i, epoch=ep - 1 + i / n,
                          iter_time_s=float(ms) / 1000.0, loss=_loss(wloss))
        return self._plain(m)

    def _plain(self, m: re.Match[str]) -> Sample:
        ps, pn, rest = m.group("ps", "pn", "rest")
        sample = Sample(step=int(ps), total_steps=integer(pn))
        # the alternative that matched is the last group closed (``tu`` follows ``tv``)
        for f in _REST.finditer(rest):
            kind = f.lastgroup
            if kind == "tv" or kind == "tu":
                if sample.iter_time_s is None:
                    tv = float(f.group("tv"))
                    sample.iter_time_s = tv / 1000.0 if f.group("tu") == "ms" else tv
            elif kind == "spi":
                if sample.iter_time_s is None:
                    sample.iter_time_s = float(f.group("spi"))
            elif kind == "ips":
                if sample.steps_per_s is None:
                    sample.steps_per_s = float(f.group("ips"))
            elif kind == "sps":
                if sample.samples_per_s is None:
                    sample.samples_per_s = float(f.group("sps"))
            elif kind == "bs":
                if sample.batch_size is None:
                    sample.batch_size = int(f.group("bs"))
            elif kind == "loss" and sample.loss is None:
                sample.loss = _loss(f.group("loss"))
        return sample


def _loss(text: str | None) -> float | None:
    try:
        return num(text)
    except ValueError:
        return None
