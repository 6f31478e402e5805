"""PyTorch scripts in the style of the official examples, and plain ``step N ... loss`` lines.

- ImageNet example (``ProgressMeter``): ``Epoch: [e][ i/n]\\tTime  0.123 ( 0.150)\\t...``;
  ``Test: [ i/n]`` lines are evaluation.
- Word language model: ``| epoch   1 |   200/ 2983 batches | lr 20.00 | ms/batch 45.1 |``.
- Plain loops: ``step 10/500 loss 2.3 time 45ms`` / ``iter 10: loss=2.3, 0.05 s/it``; a line
  must mention a loss to count, so unrelated ``step`` chatter is ignored.
"""

from __future__ import annotations

import re

import numpy as np

from gpufair.profiler.events import Samples
from gpufair.profiler.extract import Fields
from gpufair.profiler.parsers.base import Parser

_IMAGENET = (r"(?:(?P<test>Test: ?)|Epoch: \[(?P<ep>\d+)\])\[\s*(?P<i>\d+)/\s*(?P<n>\d+)\]"
             r"\s+Time\s+(?P<t>[\d.]+)\s+\(\s*[\d.]+\)(?:.*?Loss\s+(?P<iloss>\S+))?")
_WORDLM = (r"\| epoch\s+(?P<wep>\d+) \|\s*(?P<wi>\d+)/\s*(?P<wn>\d+) batches \|.*?"
           r"ms/batch\s+(?P<ms>[\d.]+)(?: \| loss\s+(?P<wloss>\S+))?")
# a plain line may follow a quote mark and a date-time stamp (nanoGPT forks print one)
_STAMP = r"(?:>\s*)?(?:\d+-\d+-\d+[T ][\d:.,]+\s+)?"
_PLAIN = (rf"{_STAMP}\b(?:[Ii]ter(?:ation)?|ITER|[Ss]tep|STEP)\s*[:=#]?\s*(?P<ps>\d+)"
          r"(?:\s*/\s*(?P<pn>\d+))?(?P<rest>[^\n\r]*?(?:[Ll]oss|LOSS)[^\n\r]*)")

# the fields a plain line may carry after its step (first of each kind wins; a time stated
# both ways, ``time 0.5`` and ``0.5 s/it``, is read from the first form)
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
        r"Epoch: \[\d+\]\[\s*\d+/\s*\d+\]\s+Time\s+[\d.]|\| epoch\s+\d+ \|.*ms/batch|"
        r"^\W*(?:\d+-\d+-\d+[T ][\d:.,]+\s+)?(?i:iter(?:ation)?|step)\s*[:=#]?\s*\d+.*(?i:loss)")
    pattern = re.compile(rf"^[^\S\n\r]*(?:{_IMAGENET}|{_WORDLM}|{_PLAIN})")
    numbers = frozenset({"ep", "i", "n", "t", "iloss", "wep", "wi", "wn", "ms", "wloss", "ps",
                         "pn", "@tv", "@spi", "@ips", "@sps", "@bs", "@loss"})
    texts = frozenset({"@tu"})
    items = _REST
    items_in = "rest"
    lenient = frozenset({"iloss", "wloss", "@loss"})
    keywords = ("Time ", "ms/batch")

    @classmethod
    def convert(cls, f: Fields) -> tuple[Samples, np.ndarray]:
        imagenet, wordlm, test = f.has("t"), f.has("ms"), f.has("test")
        train = imagenet & ~test
        ep, i, per_epoch = f.num("ep"), f.num("i"), f.num("n")
        wep, wi, wn = f.num("wep"), f.num("wi"), f.num("wn")
        # an epoch of zero iterations cannot be: the line is garbage
        f.bad |= (train & (per_epoch == 0)) | (wordlm & (wn == 0))
        tv = f.num("@tv")
        plain_time = np.where(np.isnan(tv), f.num("@spi"),
                              np.where(f.text("@tu") == "ms", tv / 1000.0, tv))
        samples = Samples.build(
            f.n, eval=test,
            step=np.where(test, i, np.where(train, ep * per_epoch + i + 1,
                                            np.where(wordlm, (wep - 1) * wn + wi, f.num("ps")))),
            total_steps=f.num("pn"),
            epoch=np.where(train, ep + i / per_epoch, np.where(wordlm, wep - 1 + wi / wn, np.nan)),
            iter_time_s=np.where(imagenet, f.num("t"),
                                 np.where(wordlm, f.num("ms") / 1000.0, plain_time)),
            steps_per_s=f.num("@ips"), samples_per_s=f.num("@sps"), batch_size=f.num("@bs"),
            loss=np.where(imagenet, f.num("iloss"), np.where(wordlm, f.num("wloss"),
                                                              f.num("@loss"))))
        return samples, np.ones(f.n, dtype=bool)
