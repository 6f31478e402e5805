"""PyTorch LSTM language model printing exactly like pytorch/examples word_language_model."""

from __future__ import annotations

import math
import time

import torch
from common import IterTimer
from torch import nn


def main() -> None:
    torch.manual_seed(0)
    torch.set_num_threads(1)
    ntokens, bptt, bsz, log_interval, epochs, nbatches = 500, 35, 20, 5, 2, 20
    emb, rnn, dec = nn.Embedding(ntokens, 128), nn.LSTM(128, 128), nn.Linear(128, ntokens)
    params = [*emb.parameters(), *rnn.parameters(), *dec.parameters()]
    data = torch.randint(0, ntokens, (bptt * nbatches + 1, bsz))
    crit, lr = nn.CrossEntropyLoss(), 20.0
    timer = IterTimer(bsz)
    for epoch in range(1, epochs + 1):
        total_loss, start_time, epoch_start = 0.0, time.time(), time.time()
        timer.start()
        for batch, i in enumerate(range(0, data.size(0) - 1, bptt)):
            src, tgt = data[i:i + bptt], data[i + 1:i + 1 + bptt]
            out, _ = rnn(emb(src))
            loss = crit(dec(out).view(-1, ntokens), tgt.reshape(-1))
            for p in params:
                p.grad = None
            loss.backward()
            with torch.no_grad():
                for p in params:
                    p.add_(p.grad, alpha=-lr)
            total_loss += loss.item()
            timer.tick(epoch)
            if batch % log_interval == 0 and batch > 0:
                cur_loss = total_loss / log_interval
                elapsed = time.time() - start_time
                # the official example's own format string, kept verbatim
                print("| epoch {:3d} | {:5d}/{:5d} batches | lr {:02.2f} | ms/batch {:5.2f} | "  # noqa: UP032
                      "loss {:5.2f} | ppl {:8.2f}".format(
                          epoch, batch, (data.size(0) - 1) // bptt, lr,
                          elapsed * 1000 / log_interval, cur_loss, math.exp(cur_loss)),
                      flush=True)
                total_loss, start_time = 0.0, time.time()
        print("-" * 89)
        print("| end of epoch {:3d} | time: {:5.2f}s | valid loss {:5.2f} | "  # noqa: UP032
              "valid ppl {:8.2f}".format(epoch, time.time() - epoch_start, 6.2, math.exp(6.2)))
        print("-" * 89, flush=True)
    timer.write(style="wordlm", log_interval=log_interval)


if __name__ == "__main__":
    main()
