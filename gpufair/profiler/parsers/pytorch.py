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
        spi = steps = samples = loss = None
        batch: int | None = None
        # findall's tuples (no match objects): a group that did not take part is "", and
        # every group that did holds at least one character
        for tv, tu, sp, ips, sps, bs, ls in _REST.findall(rest):
            if tv:
                if spi is None:
                    spi = float(tv) / 1000.0 if tu == "ms" else float(tv)
            elif sp:
                if spi is None:
                    spi = float(sp)
            elif ips:
                if steps is None:
                    steps = float(ips)
            elif sps:
                if samples is None:
                    samples = float(sps)
            elif bs:
                if batch is None:
                    batch = int(bs)
            elif ls and loss is None:
                loss = _loss(ls)
        return Sample(step=int(ps), total_steps=integer(pn), iter_time_s=spi,
                      steps_per_s=steps, samples_per_s=samples, batch_size=batch, loss=loss)


def _loss(text: str | None) -> float | None:
    try:
        return num(text)
    except ValueError:
        return None
