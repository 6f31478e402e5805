"""Finished-job histories (``sacct`` output, published cluster traces) and their conversion
into the trace records the simulator runs: what ``gpufair replay`` reads.

The readers of one resource manager's output live beside its adapter
(``adapters/slurm/sacct_saved.py``); the rules every history follows once read (tenants,
requeues, arrays, what is left out and why) and the conversion live here, once.
Imported by ``gpufair replay`` only: pandas stays off the daemon's import path.
"""
