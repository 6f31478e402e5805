"""``--mem=0``: all of each node's memory (issue 29). 22.05 shows such a job with no memory
field at all and its TRES request holding the *smallest* node's memory (``mem=125G`` on the
loopback cluster whose nodes have 128,000 and 256,000 MB); placed as a job of 128,000 MB it
went onto a 256,000 MB node where another job held memory, and Slurm left it waiting there
(Reason=Resources) on GPUs booked for it. Now it needs a node whose memory is all free."""

from __future__ import annotations

import json
from dataclasses import replace

from test_host_room import MB, READ, _docs, _job, _node, _nodes_of, _state

from gpufair.adapters.slurm.translate import translate
from gpufair.model import HostRequest, JobState
from gpufair.model.host_room import HostRoom
from gpufair.model.snapshot import state_from_dict, state_to_dict
from gpufair.policy.placement import place

WHOLE = HostRequest(cpus_per_node=1, memory_per_node_mb=MB, whole_memory=True)


def test_a_record_without_any_memory_field_asks_the_whole_memory():
    jobs, nodes = _docs()
    record = next(j for j in jobs["jobs"] if j["job_id"] == 9)
    record.update(memory_per_cpu=None, memory_per_node=None, eligible_time=0,
                  tres_req_str="cpu=1,mem=125G,node=1,billing=1")      # as 22.05 shows it
    [job] = [j for j in translate(jobs, nodes, now=READ).state.jobs if j.id == "9"]
    assert job.host == WHOLE
    # with --mem=N it is N, as before
    record.update(memory_per_node=70000)
    [job] = [j for j in translate(jobs, nodes, now=READ).state.jobs if j.id == "9"]
    assert job.host is not None and not job.host.whole_memory
    assert job.host.memory_per_node_mb == 70000


def test_it_goes_only_where_the_node_s_whole_memory_is_free():
    job = replace(_job("j1", 0), host=WHOLE)
    nodes = [_node("small", memory_unavailable_mb=1000),
             _node("big", memory=2 * MB, memory_unavailable_mb=1000),   # the old choice
             _node("free", memory=2 * MB)]
    assert _nodes_of(place(_state(nodes, [job]), [(job, "v100")])) == {"j1": {"free"}}
    # one MB held anywhere: nowhere
    nodes[2] = _node("free", memory=2 * MB, memory_unavailable_mb=1)
    assert not place(_state(nodes, [job]), [(job, "v100")])


def test_a_running_whole_memory_job_leaves_no_memory_on_its_node():
    running = replace(_job("j0", 0), host=WHOLE, state=JobState.RUNNING,
                      gpus_held=("big:0",))
    room = HostRoom([_node("big", memory=2 * MB), _node("other")])
    room.take(running, running.gpus_held)
    assert room.free("big") == (31, 0)            # all 256,000 MB, not the 128,000 shown
    assert not room.fits(_job("j1", 1000), "big", 1) and room.fits(_job("j1", 1000), "other", 1)


def test_a_snapshot_keeps_it_and_one_saved_before_still_loads():
    state = _state([_node("big", memory=2 * MB)], [replace(_job("j1", 0), host=WHOLE)])
    document = state_to_dict(state)
    assert document["jobs"][0]["host"]["whole_memory"] is True
    assert state_from_dict(json.loads(json.dumps(document))) == state
    document["jobs"][0]["host"].pop("whole_memory")     # saved before the field
    assert state_from_dict(document).jobs[0].host == replace(WHOLE, whole_memory=False)
