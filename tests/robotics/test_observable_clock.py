"""ObservableClock advances robosuite's observables' clocks exactly as their own updates do."""

from __future__ import annotations

import numpy as np
import pytest

pytestmark = pytest.mark.robosuite


class _Env:
    """The three attributes of a robosuite env the clock reads."""

    def __init__(self, observables, model_timestep=0.002, control_timestep=0.05):
        self._observables = {o.name: o for o in observables}
        self.model_timestep, self.control_timestep = model_timestep, control_timestep


def _observables(rates, counts):
    from robosuite.utils.observables import Observable

    def sensor(name):
        def read(obs_cache):
            counts[name] += 1
            return np.zeros(1)

        read.__modality__ = "robot0_proprio"
        return read

    return [
        Observable(name=f"o{i}", sensor=sensor(f"o{i}"), sampling_rate=rate)
        for i, rate in enumerate(rates)
    ]


@pytest.mark.parametrize("rates", [(20, 20, 20), (20, 10), (500, 20), (33, 20, 7)])
def test_quiet_updates_leave_the_clocks_as_robosuites_updates_do(rates) -> None:
    from wmrl_env.envs.robosuite.observable_clock import ObservableClock

    rng = np.random.default_rng(len(rates))
    counts_a = dict.fromkeys((f"o{i}" for i in range(len(rates))), 0)
    counts_b = dict(counts_a)
    by_clock, by_robosuite = _observables(rates, counts_a), _observables(rates, counts_b)
    clock = ObservableClock(_Env(by_clock))
    for _ in range(60):  # control steps: 24 sub-steps each after the first
        left = 24
        while left:
            quiet = clock.advance_quietly(left)
            sampled_before = dict(counts_b)
            for _ in range(quiet):  # robosuite's own updates sample nothing on these
                for observable in by_robosuite:
                    observable.update(0.002, {})
            assert counts_b == sampled_before
            for a, b in zip(by_clock, by_robosuite, strict=True):
                assert (a._time_since_last_sample, a._sampled) == (
                    b._time_since_last_sample, b._sampled
                )  # fmt: skip
            if quiet == left:
                break
            for observable in by_robosuite:  # the next update samples in some observable
                observable.update(0.002, {})
            assert counts_b != sampled_before
            for observable in by_clock:
                observable.update(0.002, {})
            left -= quiet + 1
        jitter = rng.integers(0, 2)  # now and then a step with one update more (drift)
        for _ in range(jitter):
            for group in (by_clock, by_robosuite):
                for observable in group:
                    observable.update(0.002, {})
    assert counts_a == counts_b and min(counts_a.values()) > 0
