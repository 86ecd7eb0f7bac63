"""robosuite's observables' sampling clocks, advanced without calling each observable.

robosuite calls every observable's ``update`` after each physics sub-step; most calls only add
the sub-step's duration to the observable's clock (and wrap it at the sampling period), and one
a period samples the sensor. :class:`ObservableClock` works out, from the clocks' current
phases, how many of the next updates sample nothing, and applies those quiet updates' effect on
the clocks with the same float operations robosuite's ``Observable.update`` makes. The answer is
a pure function of the phases, so it is remembered per phase (the phases cycle).

Example (needs robosuite)::

    clock = ObservableClock(env)
    quiet = clock.advance_quietly(24)  # the clocks as that many quiet updates leave them
    ...                                # play those sub-steps, then one with a real update
"""

from __future__ import annotations

from typing import Any

__all__ = ["ObservableClock"]

# enabled, time since the last sample, sampled, sampling period, delay
_Phase = tuple[bool, float, bool, float, float]
_MEMO_LIMIT = 4096


class ObservableClock:
    """The sampling clocks of ``env``'s observables (``env._observables``), over the sub-steps
    of a control step."""

    def __init__(self, env: Any) -> None:
        self.env = env
        self._courses: dict[tuple[float, _Phase], tuple[int, tuple[_Phase, ...]]] = {}

    def _phases(self) -> list[tuple[Any, _Phase]]:
        return [
            (o, (o._enabled, o._time_since_last_sample, o._sampled, o._sampling_timestep,
                 o._current_delay))
            for o in self.env._observables.values()  # read each time: a hard reset makes new ones
        ]  # fmt: skip

    def _course(self, phase: _Phase) -> tuple[int, tuple[_Phase, ...]]:
        """How many of the next updates (up to a control step's sub-steps) leave this phase's
        observable unsampled, and its phase after each: ``(quiet, phases)``, ``phases[k]``
        after ``k`` quiet updates (remembered: clocks drift by rounding, phases recur)."""
        timestep = self.env.model_timestep
        course = self._courses.get((timestep, phase))
        if course is None:
            if len(self._courses) >= _MEMO_LIMIT:
                self._courses.clear()
            updates = int(self.env.control_timestep / timestep)  # as robosuite counts them
            course = self._courses[timestep, phase] = self._simulate(phase, timestep, updates)
        return course

    @staticmethod
    def _simulate(phase: _Phase, timestep: float, updates: int) -> tuple[int, tuple[_Phase, ...]]:
        """robosuite's ``Observable.update`` (``force=False``), update after update, until it
        would sample."""
        enabled, elapsed, sampled, period, delay = phase
        after = [phase]
        for _ in range(updates):
            if enabled:
                elapsed += timestep
                if not sampled and period - delay >= elapsed:
                    break  # this update samples
                if elapsed >= period:
                    if not sampled:
                        break  # robosuite samples late here
                    elapsed %= period
                    sampled = False
            after.append((enabled, elapsed, sampled, period, delay))
        return len(after) - 1, tuple(after)

    def advance_quietly(self, limit: int) -> int:
        """Apply to the clocks as many of the next ``limit`` updates as sample nothing in any
        observable, and return how many that was."""
        phases = self._phases()
        courses = [self._course(phase) for _, phase in phases]
        quiet = min([limit, *(count for count, _ in courses)])
        for (observable, _), (_, after) in zip(phases, courses, strict=True):
            _, observable._time_since_last_sample, observable._sampled, _, _ = after[quiet]
        return quiet
