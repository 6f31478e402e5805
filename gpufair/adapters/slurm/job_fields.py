"""Decode ``squeue --json`` keeping only the job fields gpufair reads (issue 30).

A Slurm 22.05 job record has ~110 fields; gpufair reads 57 of them. At 100,000 jobs the
decoded records were half a gigabyte and alive for the whole read and translation, and
every field is a dict entry and an object. The fields are dropped while decoding (json's
``object_hook`` sees each record as soon as it is complete), so the full records never
exist all at once: measured on issue 30's 100,000-job squeue (255 MB), peak RSS of the
decode 777 → 553 MB and 4.1 → 3.8 s CPU. A record is known by its ``job_id`` and
``job_state`` (no nested object has both); anything else (the document's ``errors`` and
``meta``, nested values of a kept field) is left as it is.

Every raw-record reader (the translation and its record cache, arrays, limits' charge,
the adapter's action checks, ``gpufair slurm``, dry runs) reads these names only:
``tests/test_slurm_job_fields.py`` fails when a field name that a recorded squeue record
carries appears in gpufair's source but not here, so a new reader cannot miss its field.
"""

from __future__ import annotations

import json
from typing import Any

#: the squeue job-record fields some part of gpufair reads
READ_FIELDS = frozenset({
    "account", "admin_comment", "array_job_id", "array_max_tasks", "array_task_id",
    "array_task_string", "batch_host", "cluster", "command", "comment", "container", "cpus",
    "cpus_per_tres", "current_working_directory", "deadline", "dependency",
    "derived_exit_code", "eligible_time", "excluded_nodes", "exit_code", "features", "flags",
    "gres_detail", "group_id", "job_id", "job_state", "last_sched_evaluation",
    "max_nodes", "memory_per_cpu", "memory_per_node", "memory_per_tres",
    "minimum_cpus_per_node", "name",
    "nice", "node_count", "nodes", "partition", "priority", "profile", "qos", "requeue",
    "required_nodes", "restart_cnt", "resv_name", "shared", "standard_output", "start_time",
    "state_description", "state_reason", "submit_time", "suspend_time", "time_limit",
    "time_minimum", "tres_per_job", "tres_per_node", "tres_req_str", "user_id", "user_name"})


def read_fields_only(record: dict[str, Any]) -> dict[str, Any]:
    """``json``'s object hook: a job record less the fields gpufair never reads; any other
    object as it is."""
    if "job_state" in record and "job_id" in record:
        return {k: v for k, v in record.items() if k in READ_FIELDS}
    return record


def loads_jobs(text: str, *, strict: bool = True) -> Any:
    """``json.loads(text, strict=strict)`` of an ``squeue --json`` document, its job records
    less the fields gpufair never reads (raises what ``json.loads`` raises)."""
    return json.loads(text, strict=strict, object_hook=read_fields_only)
