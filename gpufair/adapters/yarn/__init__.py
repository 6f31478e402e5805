"""YARN adapter: the ResourceManager's REST API (nodes with ``yarn.io/gpu``, apps, queues) into
the cluster model, and actions back as queue capacities, priorities, moves, kills and
lifetimes. See specs/yarn_rm_rest.md for the contract it is written against."""

from gpufair.adapters.yarn.adapter import NotExpressible, YarnAdapter, YarnSettings
from gpufair.adapters.yarn.client import RMClient, RMError, RMReplyError, RMUnavailable

__all__ = ["NotExpressible", "RMClient", "RMError", "RMReplyError", "RMUnavailable",
           "YarnAdapter", "YarnSettings"]
