"""Hugging Face ``Trainer`` on a tiny randomly initialised BERT (no download: config only)."""

from __future__ import annotations

import sys
import warnings

import torch
from common import IterTimer
from transformers import (
    BertConfig,
    BertForSequenceClassification,
    Trainer,
    TrainerCallback,
    TrainingArguments,
)


class Rows(torch.utils.data.Dataset):
    def __init__(self, n: int) -> None:
        g = torch.Generator().manual_seed(0)
        self.ids = torch.randint(0, 1000, (n, 64), generator=g)
        self.labels = torch.randint(0, 2, (n,), generator=g)

    def __len__(self) -> int:
        return len(self.labels)

    def __getitem__(self, i: int) -> dict:
        return {"input_ids": self.ids[i], "labels": self.labels[i]}


class Timing(TrainerCallback):
    def __init__(self, timer: IterTimer) -> None:
        self.timer = timer

    def on_train_begin(self, args, state, control, **kw) -> None:
        self.timer.start()

    def on_step_end(self, args, state, control, **kw) -> None:
        self.timer.tick(int(state.epoch or 0))


def main() -> None:
    warnings.filterwarnings("ignore")
    torch.manual_seed(0)
    torch.set_num_threads(1)
    out = sys.argv[sys.argv.index("--out") + 1] if "--out" in sys.argv else "/tmp/hf_out"
    config = BertConfig(vocab_size=1000, hidden_size=128, num_hidden_layers=2,
                        num_attention_heads=2, intermediate_size=256, num_labels=2)
    batch = 16
    timer = IterTimer(batch)
    args = TrainingArguments(output_dir=out, per_device_train_batch_size=batch,
                             num_train_epochs=2, logging_steps=5, save_strategy="no",
                             report_to=[], use_cpu=True, disable_tqdm=False,
                             dataloader_num_workers=0)
    trainer = Trainer(model=BertForSequenceClassification(config), args=args,
                      train_dataset=Rows(batch * 15), callbacks=[Timing(timer)])
    trainer.train()
    timer.write(style="hf")


if __name__ == "__main__":
    main()
