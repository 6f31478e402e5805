"""Batch-size profiles and T_exclusive against the artifact's unit-test values (§1)."""

from __future__ import annotations

import pytest

from gpufair.adapters.simulator.trace import job_type_with_batch
from gpufair.adapters.simulator.workload import (
    SwitchFlags,
    accordion_profile,
    epoch_profile,
    exclusive_time,
    gns_schedule,
    num_epochs,
    rescale_steps,
    update_switch_flags,
)
from gpufair.data import artifact_results
from gpufair.model import Adaptation

# trace line -> epochs N; T_exclusive is SIMULATION.md §1.4's, from artifact_results.json
EPOCHS = {0: 23, 1: 92, 2: 27, 22: 280, 25: 528, 35: 10, 113: 133}
RECORDED = artifact_results()["single_jobs"]["jobs"]


@pytest.mark.parametrize(("line", "epochs"), sorted(EPOCHS.items()))
def test_exclusive_time_matches_artifact(canonical_trace, tacc, line, epochs):
    expected = RECORDED[str(line)]["t_exclusive_s"]
    job = canonical_trace[line]
    n = num_epochs(job.model, job.batch_size, job.total_steps)
    assert n == epochs
    sizes = epoch_profile(job.model, job.batch_size, job.scale_factor, job.mode, n)

    def rate(b):
        return tacc.rate("v100", job_type_with_batch(job.job_type, b), job.scale_factor)

    assert exclusive_time(job.model, sizes, rate) == pytest.approx(expected, abs=0.006)


def test_accordion_profile_keeps_first_30_percent_and_critical_epochs():
    sizes = accordion_profile("ResNet-18", 32, 100)
    assert sizes[:31] == [32] * 31  # e <= 0.3*N stays at b0 even outside critical epochs
    assert sizes[31] == 256
    sizes = accordion_profile("ResNet-18", 32, 300)
    assert sizes[150:160] == [32] * 10 and sizes[160] == 256
    assert accordion_profile("Transformer", 64, 50) == [64] * 50


def test_gns_profile_final_epoch_quirk():
    # LM bs 10 sf 1: stages 11:2 21:4 41:8; 23 epochs: the last one (stage 2) keeps b0
    sizes = gns_schedule("LM", 10, 1, 23)
    assert sizes[10] == 10 and sizes[11] == 20 and sizes[21] == 40 and sizes[22] == 10
    # in stage 1 the last epoch gets the stage-1 multiplier
    assert gns_schedule("LM", 10, 1, 15)[-1] == 20
    # N <= s1: b0 throughout
    assert gns_schedule("LM", 10, 1, 11) == [10] * 11
    # capped at the model maximum
    assert max(gns_schedule("LM", 5, 1, 100)) == 80


def test_run_time_rules_differ_from_profile():
    flags = SwitchFlags()
    # ResNet-50 accordion: c mod 30 < 10 is critical, no 30% rule
    update_switch_flags(flags, "ResNet-50", Adaptation.ACCORDION, 32, 32, 1, 10)
    assert flags.up and not flags.down
    flags = SwitchFlags()
    update_switch_flags(flags, "ResNet-50", Adaptation.ACCORDION, 32, 128, 1, 31)
    assert flags.down
    # GNS looks one epoch ahead: c = 10 already asks for 20 (stage starts at 11)
    flags = SwitchFlags()
    update_switch_flags(flags, "LM", Adaptation.GNS, 10, 10, 1, 10)
    assert flags.up
    flags = SwitchFlags()
    update_switch_flags(flags, "LM", Adaptation.GNS, 10, 10, 1, 9)
    assert not flags.up


def test_rescale_keeps_epochs_and_rounds_partial_epoch_up():
    # ResNet-50 bs 32 -> 128 (job 35's switch): 3125 -> 782 iterations per epoch
    total, run = rescale_steps("ResNet-50", 29992, 3125 * 9 + 1, 32, 128)
    assert -(-total // 782) == 10  # still 10 epochs
    assert run == 10 * 782  # the partly done 10th epoch counts as complete
    assert total - run < 0  # the artifact's job-35 trap: remaining <= 0 without completing
