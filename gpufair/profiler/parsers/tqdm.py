"""The tqdm progress bar, as printed by Lightning's TQDM bar and the Hugging Face Trainer.

Shared by two families, so it lives once here: ``45%|####5     | 45/100 [00:01<00:01,
30.12it/s, loss=...]`` (or ``1.52s/it`` when slower than one iteration per second).
"""

from __future__ import annotations

import numpy as np

BAR = (r"(?P<n>\d+)/(?P<total>\d+) \[(?P<elapsed>[\d:]+)<(?P<remain>[\d:?]+),\s*"
       r"(?P<rate>[\d.]+|\?)\s*(?P<unit>it/s|s/it)")


def seconds_per_iter(rate: np.ndarray, unit: np.ndarray) -> np.ndarray:
    """Seconds per iteration from tqdm's rate and unit columns; NaN while tqdm shows ``?``
    (read as NaN) or a rate of zero."""
    return np.where(rate > 0, np.where(unit == "s/it", rate, 1.0 / rate), np.nan)
