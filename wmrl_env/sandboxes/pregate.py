"""The deterministic pre-gate: outcomes that are certain before anything runs.

Some programs fail in any sandbox, and a world model's guess about them is no evidence of
anything. The pre-gate answers those exactly, status included:

* a program that does not compile: ``does_not_parse`` (any task);
* for tasks whose submission is a file the program writes (``submission="predictions.csv"``):
  a program that cannot run any code, so cannot write it and cannot raise either (empty,
  comments, docstrings, constant assignments, plain function definitions):
  ``invalid_output``.

A round scores them at the failure score, unexecuted, as *known* outcomes, never as
calibration pairs (``WorldModelVectorEnv(known_failure=PreGate(...))``). Without a
submission file an empty program is not judged: a harness that calls a function, or a task
scored on printed output, decides its fate.

"Does it compile" is :func:`~wmrl_env.sandboxes.syntax.does_not_parse`, the one predicate
the package uses. Anything but a ``str`` is not judged.

Example:
    >>> gate = PreGate(submission="predictions.csv")
    >>> answer = gate.answer(["print(1)", "def f(:", "# nothing", "x = 1/0", 7])
    >>> answer.known.tolist()
    [False, True, True, False, False]
    >>> answer.status.tolist()
    ['', 'does_not_parse', 'invalid_output', '', '']
    >>> answer.reasons[1:3]
    ['does not compile', 'runs no code: cannot write predictions.csv']
    >>> PreGate().answer(["# nothing"]).known.tolist()
    [False]
"""

from __future__ import annotations

import ast
from collections import OrderedDict
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from typing import Any

import numpy as np

from wmrl_env.sandboxes.syntax import does_not_parse

__all__ = ["KnownOutcomes", "PreGate"]


@dataclass(frozen=True)
class KnownOutcomes:
    """The pre-gate's answer for a batch.

    Attributes:
        known: shape ``(N,)`` bool: the outcome is certain (a failure).
        status: shape ``(N,)`` str: the certain status (``""`` where not known).
        reasons: per item, why (``""`` where not known).
    """

    known: np.ndarray
    status: np.ndarray
    reasons: list[str]


class PreGate:
    """Answers exactly when a program's failure is certain (see the module doc).

    Args:
        submission: the file a program must write to be scored (``None``: programs are not
            required to write one, e.g. a harness calls a function they define); with it, a
            program that runs no code is a certain failure. A program that mentions
            ``import`` anywhere is not judged so (it almost always imports; not parsing it a
            second time keeps the gate cheap).
        max_entries: answers kept in an LRU cache keyed by program text.
        cache_key: programs with the same key share an answer (``None``: not judged by key);
            e.g. :func:`~wmrl_env.world_models.programs.program_features.code_key`, under which
            programs that differ only in comment or blank lines (which compile and run
            alike) are judged once.

    Calling the gate on one artifact returns whether its failure is certain (the
    ``known_failure`` predicate of :class:`~wmrl_env.wrappers.vector.WorldModelVectorEnv`).
    """

    def __init__(
        self,
        submission: str | None = None,
        *,
        max_entries: int = 100_000,
        cache_key: Callable[[str], str | None] | None = None,
    ) -> None:
        if submission is not None and not (isinstance(submission, str) and submission):
            raise ValueError(f"submission must be a file name or None, got {submission!r}")
        self.submission = submission
        self.max_entries = max_entries
        self.cache_key = cache_key
        self._cache: OrderedDict[str, tuple[str, str]] = OrderedDict()
        self._by_key: OrderedDict[str, tuple[str, str]] = OrderedDict()

    def __call__(self, artifact: Any) -> bool:
        return bool(self._one(artifact)[0])

    def __repr__(self) -> str:
        return f"PreGate(submission={self.submission!r})"

    def answer(
        self, artifacts: Sequence[Any], parses: Sequence[bool] | None = None
    ) -> KnownOutcomes:
        """The certain outcomes of a batch. ``parses``: per artifact, whether it is valid
        Python, when the caller has already asked
        :func:`~wmrl_env.utils.python_source.parses` (a world model's featurizer does):
        the gate then does not compile it again."""
        if parses is not None and len(parses) != len(artifacts):
            raise ValueError(f"parses has {len(parses)} entries for {len(artifacts)} artifacts")
        given = [None] * len(artifacts) if parses is None else [bool(p) for p in parses]
        answers = [self._one(a, g) for a, g in zip(artifacts, given, strict=True)]
        status = np.array([s for s, _ in answers], dtype=object)
        return KnownOutcomes(
            known=np.array([bool(s) for s, _ in answers], dtype=bool),
            status=status.astype(str) if len(answers) else np.zeros(0, dtype=str),
            reasons=[r for _, r in answers],
        )

    def _one(self, artifact: Any, parses: bool | None = None) -> tuple[str, str]:
        if not isinstance(artifact, str):
            return "", ""
        cached = self._cache.get(artifact)
        if cached is not None:
            self._cache.move_to_end(artifact)
            return cached
        # judged by key only where judging costs more than the key: with ``parses`` given,
        # only an import-free program under a submission is parsed (the key's programs
        # share their answer, so skipping it changes no answer)
        cheap = parses is not None and (
            not parses or self.submission is None or "import" in artifact
        )
        key = self.cache_key(artifact) if self.cache_key is not None and not cheap else None
        answer = self._by_key.get(key) if key is not None else None
        if answer is None:
            answer = self._judge(artifact, parses)
            if key is not None:
                self._by_key[key] = answer
                if len(self._by_key) > self.max_entries:
                    self._by_key.popitem(last=False)
        self._cache[artifact] = answer
        if len(self._cache) > self.max_entries:
            self._cache.popitem(last=False)
        return answer

    def _judge(self, program: str, parses: bool | None = None) -> tuple[str, str]:
        if (not parses) if parses is not None else does_not_parse(program):
            return "does_not_parse", "does not compile"
        if (
            self.submission is not None
            and "import" not in program
            and _inert(ast.parse(program).body)
        ):
            return "invalid_output", f"runs no code: cannot write {self.submission}"
        return "", ""


def _inert(body: list[ast.stmt]) -> bool:
    """Whether running ``body`` can neither call anything nor raise: only ``pass``,
    constants, constant assignments to plain names, and undecorated definitions whose
    defaults are constants and which carry no annotations (a class body runs: it must be
    inert too, and have no bases)."""
    for node in body:
        if isinstance(node, ast.Pass):
            continue
        if isinstance(node, ast.Expr) and isinstance(node.value, ast.Constant):
            continue
        if isinstance(node, ast.Assign) and isinstance(node.value, ast.Constant):
            if all(isinstance(t, ast.Name) for t in node.targets):
                continue
            return False
        if isinstance(node, (ast.FunctionDef, ast.AsyncFunctionDef)):
            args = node.args
            every = [*args.posonlyargs, *args.args, *args.kwonlyargs, args.vararg, args.kwarg]
            defaults = [*args.defaults, *(d for d in args.kw_defaults if d is not None)]
            if (
                node.decorator_list
                or node.returns is not None
                or any(a is not None and a.annotation is not None for a in every)
                or not all(isinstance(d, ast.Constant) for d in defaults)
                or getattr(node, "type_params", None)
            ):
                return False
            continue
        if isinstance(node, ast.ClassDef):
            if node.decorator_list or node.bases or node.keywords or not _inert(node.body):
                return False
            if getattr(node, "type_params", None):
                return False
            continue
        return False
    return True
