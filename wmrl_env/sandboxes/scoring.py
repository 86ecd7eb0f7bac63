"""Scoring a job on the host, after its outputs are collected: strict, never scraped from stdout.

:class:`JsonScore` covers the common case, a program that writes a JSON object with a score
to a declared file. :func:`apply_scorer` turns a scorer's verdict into the result's status,
the same way for every backend.

Example:
    >>> score = JsonScore("m.json", key="acc")
    >>> score({"m.json": b'{"acc": 0.9}'})
    0.9
    >>> score({"m.json": b'{"acc": true}'})
    Traceback (most recent call last):
    ...
    wmrl_env.sandboxes.job.InvalidOutputError: m.json: 'acc' must be a finite number, got True
"""

from __future__ import annotations

import dataclasses
import json
import math
from collections.abc import Mapping
from dataclasses import dataclass

from wmrl_env.executors.base import ExecResult, ExecStatus
from wmrl_env.sandboxes.job import InvalidOutputError, Scorer

__all__ = ["JsonScore", "apply_scorer"]


@dataclass(frozen=True)
class JsonScore:
    """Read ``key`` from the JSON object a job wrote to ``file``.

    Anything else is :class:`~wmrl_env.sandboxes.job.InvalidOutputError` with the reason: the
    file missing, not UTF-8 JSON, not an object, the key absent, or its value not a finite
    number (booleans are refused too). Declare the file in the job's ``output_files``::

        score = JsonScore("score.json")
        Job(program, output_files=score.files, scorer=score)
    """

    file: str = "score.json"
    key: str = "score"

    @property
    def files(self) -> tuple[str, ...]:
        """The output files this scorer reads, for ``Job(output_files=...)``."""
        return (self.file,)

    def __call__(self, outputs: Mapping[str, bytes]) -> float:
        if self.file not in outputs:
            raise InvalidOutputError(f"{self.file} was not written")
        try:
            document = json.loads(outputs[self.file].decode("utf-8"))
        except (UnicodeDecodeError, ValueError) as error:
            raise InvalidOutputError(f"{self.file} is not valid JSON: {error}") from None
        if not isinstance(document, dict):
            raise InvalidOutputError(
                f"{self.file} must hold a JSON object, got {type(document).__name__}"
            )
        if self.key not in document:
            raise InvalidOutputError(f"{self.file} has no {self.key!r} field")
        value = document[self.key]
        number = isinstance(value, int | float) and not isinstance(value, bool)
        if not number or not math.isfinite(value):
            raise InvalidOutputError(
                f"{self.file}: {self.key!r} must be a finite number, got {value!r}"
            )
        return float(value)


def apply_scorer(result: ExecResult, scorer: Scorer | None) -> ExecResult:
    """Score an ``ok`` result's outputs; other results (and jobs without scorer) pass through.

    An :class:`~wmrl_env.sandboxes.job.InvalidOutputError` becomes ``invalid_output`` with its
    message; any other exception is the scorer's own failure, ``error``.
    """
    if scorer is None or not result.ok:
        return result
    try:
        score = float(scorer(result.outputs))
    except InvalidOutputError as error:
        return dataclasses.replace(
            result, status=ExecStatus.INVALID_OUTPUT, message=str(error) or "invalid output"
        )
    except Exception as error:  # the scorer's bug must not lose the finished run
        return dataclasses.replace(
            result, status=ExecStatus.ERROR, message=f"scorer failed: {error!r}"
        )
    if math.isnan(score):
        return dataclasses.replace(
            result, status=ExecStatus.INVALID_OUTPUT, message="the scorer returned NaN"
        )
    return dataclasses.replace(result, score=score)
