"""The common cluster model (records, actions) and its JSON snapshot format."""

from gpufair.model.records import (
    Action,
    ActionResult,
    Adaptation,
    Assignment,
    ClusterState,
    GpuType,
    HostRequest,
    Job,
    JobState,
    Migrate,
    Node,
    NodeState,
    Plan,
    Preempt,
    PreemptMode,
    Progress,
    Resize,
    Resume,
    SetPriority,
    Start,
    Tenant,
    ThroughputProfile,
    gpu_id,
    node_of,
)

__all__ = [
    "Action", "ActionResult", "Adaptation", "Assignment", "ClusterState", "GpuType",
    "HostRequest", "Job", "JobState", "Migrate", "Node", "NodeState", "Plan", "Preempt",
    "PreemptMode", "Progress", "Resize", "Resume", "SetPriority", "Start", "Tenant",
    "ThroughputProfile", "gpu_id", "node_of",
]
