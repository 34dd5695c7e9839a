"""The task kinds' ``[task]`` sections and the task registry (``TASKS``, ``TaskKind``; ``schema.register_task``
adds a kind at run time): the one place the package learns about a task kind."""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any, Callable, Literal, Union

from pydantic import Field, model_validator

from sparse_tui.presets.fields import _SCHED_HELP, Repeat, RepeatInt, _check_repeat, _Section
from sparse_tui.science.repetition import all_values, scheduled


class TaskSection(_Section):
    """The base of a task kind's config, the preset's ``[task]`` table (``TaskKind.config``)."""


class LinregTask(TaskSection):
    """Single-location linear regression (paper §2.1, App. A, App. B.1).

    Tokens x_t ~ N(0, I/d); target y* = W* x_rel with W* ~ N(0, 1/d) drawn once per run (seeded).
    """

    kind: Literal["linreg"] = "linreg"
    d: int = Field(32, ge=1, description="Token and target dimension d (paper §2.1).")
    T: int = Field(64, ge=2, description="Sequence length T (number of tokens per sequence).")
    B: RepeatInt = Field(
        1, description="In-context repetition: the relevant token appears at B positions (paper §2.3)." + _SCHED_HELP
    )
    p: Repeat = Field(
        0.0,
        description="Cross-sample repetition: probability that the relevant token is the fixed token x~ (§2.3)."
        + _SCHED_HELP,
    )
    position: Literal["last", "fixed", "random"] = Field(
        "last",
        description=(
            "Where the relevant token(s) sit: 'last' = the last B positions (theory, App. A.2); "
            "'fixed' = B positions drawn once per run, never the last (readout) one; 'random' = resampled "
            "per sequence (App. B.1)."
        ),
    )
    indicator: bool = Field(
        False, description="Append a feature that is 1 on relevant tokens and 0 elsewhere (App. B.1)."
    )
    x_tilde: Literal["e1", "random"] = Field(
        "e1",
        description=(
            "The repeated token x~ of cross-sample repetition: 'e1' = the first basis vector (App. A.2, 'without "
            "loss of generality' for gradient flow, not for Adam); 'random' = a random unit vector drawn per (seed, d)."
        ),
    )
    test_repetition: bool = Field(
        False,
        description=(
            "Keep in-context repetition B in the test set (App. D.1 does so for the toy model, which cannot "
            "generalise to B = 1). Cross-sample repetition p is never applied to the test set."
        ),
    )

    @model_validator(mode="after")
    def _check(self) -> "LinregTask":
        _check_repeat(self, "p", 0.0, 1.0)
        _check_repeat(self, "B", 1, self.T, "T", integer=True)
        if self.position == "fixed" and max(all_values(self.B)) > self.T - 1:
            raise ValueError("B: must be <= T - 1 with position 'fixed' (the last, readout position is never drawn)")
        return self


class RecallTask(TaskSection):
    """In-context associative recall (arXiv 2505.17863 §3.1, App. C.1; blog "Sparse attention 6 – In-context
    associative recall").

    n_pairs key-value pairs then a query; the target is the value bound to the query's key.
    """

    kind: Literal["recall"] = "recall"
    n_tokens: int = Field(64, ge=2, description="Vocabulary size N_tokens (keys and values share it).")
    n_pairs: int = Field(32, ge=1, description="Number of key-value pairs in the context (T = 2 n_pairs + 1).")
    B: Repeat = Field(
        1.0,
        description=(
            "In-context repetition: expected number of slots holding the query pair (App. C.1). The query always "
            "occupies one uniformly drawn slot and each other slot with probability (B-1)/(n_pairs-1), so every "
            "sequence is answerable and the mean count is exactly B."
        ) + _SCHED_HELP,
    )
    p: Repeat = Field(
        0.0, description="Cross-sample repetition: probability the query is one of 2 fixed tokens." + _SCHED_HELP
    )
    train_size: int = Field(
        0, ge=0, description="Fixed training set size in sequences (the blog uses 10^4); 0 = fresh online samples."
    )
    values: Literal["permutation", "uniform"] = Field(
        "permutation",
        description=(
            "How each sequence's key -> value map is drawn. permutation: a random permutation of the vocabulary, so "
            "values in one context are all distinct (arXiv 2505.17863 App. C.1). uniform: each key's value drawn "
            "independently and uniformly from the vocabulary, so values may repeat (what the blog 'Sparse attention "
            "6 - In-context associative recall' needs for its Goldilocks zone at 32 pairs; docs/REPRODUCTION.md)."
        ),
    )

    @model_validator(mode="after")
    def _check(self) -> "RecallTask":
        if self.n_pairs > self.n_tokens:
            raise ValueError("n_pairs: must be <= n_tokens (keys in one context are distinct)")
        _check_repeat(self, "p", 0.0, 1.0)
        _check_repeat(self, "B", 1.0, self.n_pairs, "n_pairs")
        if scheduled(self) and self.train_size > 0:
            raise ValueError(f"{next(iter(scheduled(self)))}: a schedule needs train_size = 0 (a fixed training set"
                             " is drawn once, with the values at step 0)")
        return self


class NearestTask(TaskSection):
    """Similar-content extraction (blog "Sparse attention 3 – inefficiency of extracting similar content"): predict
    the context token numerically closest to the last token."""

    kind: Literal["nearest"] = "nearest"
    vocab: int = Field(16, ge=3, description="Vocabulary size V; token k means the number k.")
    context: int = Field(3, ge=2, description="Context length C (the last token is the one to match).")
    tie_break: Literal["lower", "earlier"] = Field(
        "lower",
        description="When two context tokens are equally close: take the numerically lower one, or the earlier one.",
    )

    @model_validator(mode="after")
    def _check(self) -> "NearestTask":
        if self.context > self.vocab:
            raise ValueError("context: must be <= vocab (context tokens are distinct)")
        return self


@dataclass(frozen=True)
class TaskKind:
    """A task kind's registry entry, the one place the package learns about the kind (docs/ARCHITECTURE.md, "A new
    task"): the schema, the form, ``tasks.make_task``, ``resources.dims`` and the evaluation read it from ``TASKS``.

    ``config``: the ``[task]`` table, its ``kind`` a one-value Literal, every other field with a default. ``task``:
    the ``tasks/base.Task`` subclass, or ``"module:Class"`` imported when a run is built (so the schema and the
    console import no torch). ``dims``: config -> seq_len, vocab (None: a vector task), in_dim (None: a token task),
    out_dim; a task with a vocabulary is a classification. ``probes``: the attention probes its evaluation logs, the
    first the readout's mass on ``Batch.relevant`` (training/metrics.py).
    """

    config: type[TaskSection]
    task: type | str
    dims: Callable[[Any], dict]
    probes: tuple[str, ...] = ("relevant",)

    @property
    def name(self) -> str:
        return self.config.model_fields["kind"].default

    def tokens(self, task: Any) -> bool:
        """Whether ``task`` (a config of this kind) feeds token ids (an embedding), not vectors."""
        return self.dims(task)["vocab"] is not None


# The task registry: one entry per kind (``register_task`` adds one at run time).
TASKS: dict[str, TaskKind] = {k.name: k for k in (
    TaskKind(LinregTask, "sparse_tui.tasks.linreg:LinearRegression",
             dims=lambda t: dict(seq_len=t.T, vocab=None, in_dim=t.d + int(t.indicator), out_dim=t.d)),
    TaskKind(RecallTask, "sparse_tui.tasks.recall:AssociativeRecall", probes=("select", "copy"),
             dims=lambda t: dict(seq_len=2 * t.n_pairs + 1, vocab=t.n_tokens, in_dim=None, out_dim=t.n_tokens)),
    TaskKind(NearestTask, "sparse_tui.tasks.nearest:NearestToken",
             dims=lambda t: dict(seq_len=t.context, vocab=t.vocab, in_dim=None, out_dim=t.vocab)),
)}


def task_kind(name: str) -> TaskKind:
    """The registry entry of task kind ``name`` (ValueError naming the registered kinds when there is none)."""
    if name not in TASKS:
        raise ValueError(f"unknown task kind {name!r}; registered: {', '.join(TASKS)}")
    return TASKS[name]


def _task_union() -> Any:
    return Union[tuple(k.config for k in TASKS.values())]
