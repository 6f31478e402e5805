"""Shadow runs: what gpufair would have done beside the resource manager's own scheduler.

``gpufair serve --shadow`` records, each round, the plan and the actions it would take next to
what the resource manager itself did (the daemon's store); :mod:`gpufair.shadow.report` turns
that record into figures and a results directory (docs/FORMATS.md section 9, kind
``shadow``). Above ``core/`` beside ``results/``; never imported by ``plugin/``.
"""
