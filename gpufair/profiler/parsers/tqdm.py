"""The tqdm progress bar, as printed by Lightning's TQDM bar and the Hugging Face Trainer.

Shared by two families, so it lives once here: ``45%|####5     | 45/100 [00:01<00:01,
30.12it/s, loss=...]`` (or ``1.52s/it`` when slower than one iteration per second).
"""

from __future__ import annotations

BAR = (r"(?P<n>\d+)/(?P<total>\d+) \[(?P<elapsed>[\d:]+)<(?P<remain>[\d:?]+),\s*"
       r"(?P<rate>[\d.]+|\?)\s*(?P<unit>it/s|s/it)")


def rate_to_seconds(rate: str, unit: str) -> float | None:
    """Seconds per iteration from tqdm's rate field; None while tqdm shows ``?``."""
    if rate == "?":
        return None
    value = float(rate)
    if value <= 0:
        return None
    return value if unit == "s/it" else 1.0 / value


def clock_seconds(text: str) -> float:
    """``01:02:03`` or ``02:03`` to seconds."""
    total = 0.0
    for part in text.split(":"):
        total = total * 60 + float(part)
    return total
