"""OEF (Middleware'24): optimal efficiency with fairness on heterogeneous GPUs.

``lp`` builds and solves the fair-share LPs (non-cooperative eq. 9, cooperative eq. 10, both
weighted), ``fastpath`` is the non-cooperative bisection shortcut, ``rounding`` turns
fractional shares into whole GPUs with carried deviation, and ``policy`` is the scheduler.
"""
