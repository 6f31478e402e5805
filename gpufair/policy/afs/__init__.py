"""AFS (Apathetic Future Share, NSDI'21): elastic GPU shares that minimise average JCT.

``allocation`` is the paper's Algorithm 1 and its AFS-P variant on abstract jobs (a ladder of
GPU counts with a measured rate at each); ``ladder`` turns model jobs into those ladders
(min/max GPUs, measured counts, network packing sizes); ``placement`` puts the counts on GPUs,
keeping what each job already holds; ``policy`` is the round: pools per GPU type, the AFS-P
run counters, the reconfiguration cap. Spec: ``shared/specs/afs.md``; doc: ``docs/policies/afs.md``.
"""
