"""The hand-over between verl's reward workers and its advantage step: one record per sample.

verl scores samples one at a time in reward-loop workers (Ray actors, several per run) and
computes advantages later, in the trainer, from the reward tensor and each sample's ``uid``
only. The fusion needs more per sample (world-model score, real score, validity, failure,
inclusion probability), so each worker files a :class:`SampleRecord` here and the advantage
step takes the records of its batch's uids. :class:`Ledger` holds them in one process;
:class:`RayLedger` is the same object behind a named Ray actor, shared by every process of a
verl run.

Memory stays bounded: the records of the last batch taken are kept for a retry of that
batch and dropped at the next one; records that no batch takes (groups that dynamic sampling
dropped, an abandoned batch) are dropped once ``max_age`` batches have been taken since they
were filed; ``max_records`` caps the rest. Validation samples are never filed (their
figures go to :meth:`Ledger.put_eval`).

Example:
    >>> ledger = Ledger()
    >>> ledger.put([SampleRecord("g0", 0.5, 0.5, True, float("nan"), False, False, 0.1)])
    >>> [r.wm_score for r in ledger.take(["g0"])["g0"]], len(ledger)
    ([0.5], 0)
    >>> [r.wm_score for r in ledger.take(["g0"])["g0"]]  # a retry of the same batch
    [0.5]
"""

from __future__ import annotations

import hashlib
import math
from collections import OrderedDict
from collections.abc import Iterable, Sequence
from dataclasses import dataclass

import numpy as np

from wmrl_env.integrations._shared import EvalTally
from wmrl_env.utils.imports import require

__all__ = ["Ledger", "RayLedger", "SampleRecord", "anchor_draw", "default_ledger"]

DEFAULT_ACTOR_NAME = "wmrl_env_ledger"


def anchor_draw(uid: str, seed: int) -> float:
    """A uniform number in [0, 1) fixed by ``(seed, uid)``: the group is an anchor when it is
    below the anchor fraction (Poisson sampling, inclusion probability = the fraction).

    Every worker that sees a sample of the group draws the same number, so a group split
    across workers is anchored whole.

    >>> anchor_draw("g0", 0) == anchor_draw("g0", 0), 0 <= anchor_draw("g1", 0) < 1
    (True, True)
    """
    digest = hashlib.blake2b(f"{seed}\x00{uid}".encode(), digest_size=8).digest()
    return int.from_bytes(digest, "big") / 2.0**64


@dataclass(frozen=True)
class SampleRecord:
    """What the reward worker knew about one sample.

    Attributes:
        uid: verl's group id (``non_tensor_batch["uid"]``).
        reward: the value handed to verl as ``reward_score`` (real score on executed
            anchors, world-model score elsewhere, NaN for a failed execution or an invalid
            prediction); the advantage step finds the record by ``(uid, float32(reward))``.
        wm_score, wm_valid: the world model's answer.
        real_score: NaN unless executed successfully.
        failed: the execution failed (left out of the group's baseline, never scored 0).
        is_anchor: the group was drawn for real execution.
        inclusion_probability: the chance the group had to be drawn.
        key: the sample's own key (``reward_extra_info["wmrl_key"]``), by which the advantage
            step finds it when verl hands it the batch's row keys (:mod:`.patch`); empty
            when unknown (then it is found by ``(uid, float32(reward))``).
        known_score: an outcome known without a drawn execution (NaN when none): a program
            known to fail without running it, or one executed alone because its prediction
            was invalid. The fusion uses it as that sample's reward, never as evidence.
        wm_std: the world model's predictive std (NaN when it gives none): the fusion's gate
            weighs anchor pairs by it.
        cluster: the sample's task (:func:`~wmrl_env.rounds.task_cluster` of its prompt by
            default; empty when unknown): the gate counts a task recurring across steps as
            one cluster.
        executed: it ran for real (drawn, or alone because its prediction was invalid).
        program_failed: that run failed by the program's fault (scored the failure score).
    """

    uid: str
    reward: float
    wm_score: float
    wm_valid: bool
    real_score: float
    failed: bool
    is_anchor: bool
    inclusion_probability: float
    key: str = ""
    known_score: float = math.nan
    wm_std: float = math.nan
    cluster: str = ""
    executed: bool = False
    program_failed: bool = False

    @property
    def reward_key(self) -> str:
        return reward_key(self.reward)

    def interchangeable(self, other: SampleRecord, method: str) -> bool:
        """Whether two records of one group with the same reward give their rows the same
        fused advantage: always, except under ``ppi`` when the world-model scores differ.
        (Swapping world-model scores between rows of equal real score leaves the multiset of
        calibration pairs, and so the calibration, kappa and every other row, unchanged.)"""
        fields = ("is_anchor", "failed", "wm_valid", "inclusion_probability")
        if any(getattr(self, f) != getattr(other, f) for f in fields):
            return False
        if math.isnan(self.known_score) != math.isnan(other.known_score):
            return False
        if method != "ppi" or not self.wm_valid:
            return True
        return self.wm_score == other.wm_score


def reward_key(value: float) -> str:
    """The float32 value verl stores, as an exact text key (``"nan"`` for NaN)."""
    value = float(np.float32(value))
    return "nan" if math.isnan(value) else value.hex()


class Ledger:
    """Records by uid until a batch takes them (module docstring: what is dropped when).

    Args:
        max_records: at most this many records waiting (oldest group dropped first).
        max_age: a record no batch took is dropped after this many batches were taken since
            it was filed (a group verl's dynamic sampling dropped, an abandoned batch).
    """

    def __init__(self, max_records: int = 1_000_000, max_age: int = 4) -> None:
        if max_records < 1:
            raise ValueError(f"max_records must be >= 1, got {max_records}")
        if max_age < 1:
            raise ValueError(f"max_age must be >= 1, got {max_age}")
        self.max_records = max_records
        self.max_age = max_age
        self._by_uid: OrderedDict[str, tuple[int, list[SampleRecord]]] = OrderedDict()
        self._size = 0
        self._batches = 0  # batches taken so far: a record's age is counted in them
        self._last: dict[str, list[SampleRecord]] = {}  # the last batch taken, for a retry
        self._eval = EvalTally()
        self.evicted = 0

    def __len__(self) -> int:
        """Records waiting (the last batch's records, kept for a retry, not counted)."""
        return self._size

    def put(self, records: Iterable[SampleRecord]) -> None:
        for record in records:
            _, group = self._by_uid.setdefault(record.uid, (self._batches, []))
            group.append(record)
            self._size += 1
        while self._size > self.max_records:
            self._drop_oldest()

    async def aput(self, records: Iterable[SampleRecord]) -> None:
        self.put(records)

    def take(self, uids: Sequence[str]) -> dict[str, list[SampleRecord]]:
        """Remove and return the records of ``uids`` (an absent uid maps to ``[]``).

        Asked for exactly the uids of the last batch again (a retry), it returns that batch's
        records again. Otherwise the last batch's records are dropped (it was consumed) and
        so are waiting records older than ``max_age`` batches."""
        wanted = list(dict.fromkeys(uids))
        if wanted and set(wanted) == set(self._last) and not any(u in self._by_uid for u in wanted):
            return {uid: list(self._last[uid]) for uid in wanted}
        taken = {}
        for uid in wanted:
            _, records = self._by_uid.pop(uid, (0, []))
            self._size -= len(records)
            taken[uid] = records
        self._last = {uid: list(records) for uid, records in taken.items()}
        self._batches += 1
        while self._by_uid and next(iter(self._by_uid.values()))[0] < self._batches - self.max_age:
            self._drop_oldest()
        return taken

    def _drop_oldest(self) -> None:
        _, (_, dropped) = self._by_uid.popitem(last=False)
        self._size -= len(dropped)
        self.evicted += len(dropped)

    def put_eval(self, wm: float, real: float, executed: bool, exec_seconds: float) -> None:
        """One validation sample's figures (world-model score, real outcome)."""
        self._eval.add(np.array([wm]), np.array([real]), np.array([executed]), exec_seconds)

    async def aput_eval(self, *args: float) -> None:
        self.put_eval(*args)

    def take_eval(self) -> EvalTally | None:
        """The validation figures gathered since the last call (``None`` when none)."""
        tally, self._eval = self._eval, EvalTally()
        return tally if tally.wm or tally.real or tally.n_missing else None


class RayLedger:
    """A :class:`Ledger` in a named Ray actor, created by whichever process asks first."""

    def __init__(self, name: str = DEFAULT_ACTOR_NAME) -> None:
        ray = require("ray", "the verl integration's ledger")
        self.name = name
        self._actor = ray.remote(Ledger).options(name=name, get_if_exists=True, num_cpus=0).remote()
        self._ray = ray

    def put(self, records: Iterable[SampleRecord]) -> None:
        self._ray.get(self._actor.put.remote(list(records)))

    async def aput(self, records: Iterable[SampleRecord]) -> None:
        """Filed once this returns (a reward worker awaits it inside its event loop)."""
        await self._actor.put.remote(list(records))

    def take(self, uids: Sequence[str]) -> dict[str, list[SampleRecord]]:
        return self._ray.get(self._actor.take.remote(list(uids)))

    async def aput_eval(self, *args: float) -> None:
        await self._actor.put_eval.remote(*args)

    def take_eval(self) -> EvalTally | None:
        return self._ray.get(self._actor.take_eval.remote())

    def __len__(self) -> int:
        return self._ray.get(self._actor.__len__.remote())


_PROCESS_LEDGER = Ledger()


def default_ledger() -> Ledger | RayLedger:
    """The named Ray actor when Ray is running (every verl run), else this process's ledger."""
    from wmrl_env.utils.imports import is_available

    if is_available("ray"):
        import ray

        if ray.is_initialized():
            return RayLedger()
    return _PROCESS_LEDGER
