"""The preset schema: the sections, their fields and limits, and the task registry (``register_task``)."""

from __future__ import annotations

import math
import re
from typing import Annotated, Any, Literal, Union, get_args

from pydantic import BaseModel, Field, field_validator, model_validator

from sparse_tui.base.numbers import fmt_plain
from sparse_tui.presets.fields import INT64_MAX, MAX_DESCRIPTION, MAX_EVALS, MAX_NAME, MAX_SNAPSHOTS, _Section, _show
from sparse_tui.presets.tasks import TASKS, RecallTask, TaskKind, _task_union, task_kind
from sparse_tui.science.repetition import Schedule, all_values, parse_condition, scheduled

TaskConfig = Annotated[_task_union(), Field(discriminator="kind")]


class ToyModel(_Section):
    """The simplified attention layer y = W sum_t softmax(a)_t x_t (paper Eq. 2)."""

    kind: Literal["toy"] = "toy"
    init: Literal["zero", "normal"] = Field(
        "zero", description="Initial a and W: exactly zero (Asm. 2 and 4) or N(0, init_scale^2)."
    )
    init_scale: float = Field(0.0, ge=0.0, description="Standard deviation of the initial W and a when init='normal'.")


class TransformerModel(_Section):
    """A small decoder-style Transformer with readout at the last position (arXiv 2505.17863 Table 1; blog "Sparse
    attention 6 – In-context associative recall")."""

    kind: Literal["transformer"] = "transformer"
    n_layers: int = Field(2, ge=1, description="Number of attention layers.")
    n_heads: int = Field(1, ge=1, description="Attention heads per layer.")
    d_model: int = Field(64, ge=1, description="Residual stream / embedding dimension.")
    d_qk: int | None = Field(
        None, ge=1, description="Query/key dimension per head (Table 1: 64); empty = d_model / n_heads."
    )
    mlp: bool = Field(False, description="An MLP after each attention layer.")
    mlp_factor: int = Field(4, ge=1, description="MLP hidden width = mlp_factor * d_model.")
    layernorm: bool = Field(False, description="Pre-LayerNorm before attention/MLP and before the readout.")
    residual: bool = Field(True, description="Skip connections around attention and MLP.")
    pos_enc: Literal["sinusoidal", "learned", "none"] = Field("learned", description="Positional encoding.")
    input: Literal["auto", "embedding", "linear"] = Field(
        "auto", description="Token embedding table (token tasks) or linear map (vector tasks); auto picks by task."
    )
    causal: bool = Field(True, description="Causal attention mask.")
    readout_self_key: bool = Field(
        True,
        description=(
            "The read-out query (last layer, last position) attends to its own position too. false = a strictly "
            "causal readout: it sees only the other positions (every other row keeps its mask), so the current token "
            "is not among its own keys, as the blog 'Sparse attention 3 - inefficiency of extracting similar "
            "content' task (the context token closest to the current one) would need for a 1-D distance kernel "
            "(docs/REPRODUCTION.md). The blog does not say which its model does."
        ),
    )
    init: Literal["normal", "torch", "torch_mha"] = Field(
        "normal",
        description=(
            "normal: every weight ~ N(0, init_std^2), biases 0 (nanoGPT-style); torch: PyTorch's default module "
            "initialisation (Linear U(+-1/sqrt(fan_in)), Embedding and learned positions N(0, 1)); torch_mha: torch, "
            "with the attention initialised as nn.MultiheadAttention does (query, key and value weights "
            "xavier-uniform over their packed [q; k; v] matrix, attention biases 0): between the other two in scale."
        ),
    )
    init_std: float = Field(0.02, gt=0.0,
                            description="Standard deviation of the weight initialisation (init='normal').")
    embed_scale: float = Field(
        1.0,
        gt=0.0,
        description=(
            "Multiplies the token embedding (or linear input map) before the positions are added, as Vaswani et al. "
            "(2017) multiply theirs by sqrt(d_model). The paper (arXiv 2505.17863 App. B.3) suspects the input "
            "embedding makes the relevant-token feature a weaker signal than the positions; it states no scale."
        ),
    )
    pos_init_std: float | None = Field(
        None,
        gt=0.0,
        description=(
            "Standard deviation of the initial learned positions (pos_enc='learned'); empty = as the init gives them "
            "(init_std for 'normal', 1 for 'torch', PyTorch's nn.Embedding default). The blog 'Sparse attention 6 - "
            "In-context associative recall' needs 0.1 at 32 pairs (docs/REPRODUCTION.md)."
        ),
    )
    bias: bool = Field(
        True,
        description=(
            "Biases on the Linear layers: the query, value and output projections, the MLP, a linear input map and "
            "the readout (the key projection never has one: it would only shift a score row, which the softmax "
            "ignores). false = none, as the blog 'Sparse attention 6 - In-context associative recall' needs at 32 "
            "pairs (docs/REPRODUCTION.md). LayerNorm keeps its own bias."
        ),
    )
    tie_embeddings: bool = Field(
        False, description="Read out with the transposed token embedding (nanoGPT-style weight tying; token tasks)."
    )
    attention: Literal["dot", "euclidean"] = Field(
        "dot",
        description=(
            "Attention scores: dot = q.k / sqrt(d_qk); euclidean = -||q - k||^2 / sqrt(d_qk), the fix proposed in "
            "the blog 'Sparse attention 3 - inefficiency of extracting similar content' (nearest content by "
            "distance)."
        ),
    )
    embedding: Literal["learned", "ordered"] = Field(
        "learned",
        description=(
            "Token embedding: learned; or ordered: frozen, token v at v on the first axis (the others 0), the 1-D "
            "embedding with which the blog 'Sparse attention 3 - inefficiency of extracting similar content' expects "
            "distance attention to suffice (token tasks, weight_decay 0)."
        ),
    )

    @model_validator(mode="after")
    def _check(self) -> "TransformerModel":
        if self.d_model % self.n_heads != 0:
            raise ValueError("d_model: must be divisible by n_heads")
        return self


class OdeModel(_Section):
    """The reduced gradient-flow dynamics of the toy model (paper Eqs. 12-14, 17-21), integrated instead of
    trained: one 'step' is one unit of gradient-flow time multiplied by train.lr."""

    kind: Literal["ode"] = "ode"
    rtol: float = Field(1e-8, gt=0.0, lt=1.0, description="Relative tolerance of the adaptive integrator.")
    atol: float = Field(1e-10, gt=0.0, description="Absolute tolerance of the adaptive integrator.")


ModelConfig = Annotated[Union[ToyModel, TransformerModel, OdeModel], Field(discriminator="kind")]

_DEVICE_RE = re.compile(r"^(auto|cpu|cuda|cuda:\d+|mps)$")


class TrainConfig(_Section):
    """Optimisation (paper Table 1)."""

    optimizer: Literal["adam", "adamw", "sgd"] = Field("adam", description="Optimiser.")
    lr: float = Field(1e-3, gt=0.0, description="Peak learning rate.")
    batch_size: int = Field(32, ge=1, description="Sequences per step.")
    steps: int = Field(1000, ge=1, description="Number of optimisation steps.")
    warmup_steps: int = Field(0, ge=0, description="Linear warmup from 0 to lr over this many steps.")
    schedule: Literal["constant", "linear", "cosine"] = Field(
        "constant", description="Learning-rate schedule after warmup (decays to min_lr_ratio * lr)."
    )
    min_lr_ratio: float = Field(0.0, ge=0.0, le=1.0, description="Final lr / peak lr for linear and cosine.")
    grad_clip: float = Field(0.0, ge=0.0, description="Clip the gradient norm to this value; 0 = no clipping.")
    weight_decay: float = Field(0.0, ge=0.0, description="Weight decay (decoupled for adamw).")
    momentum: float = Field(0.0, ge=0.0, lt=1.0, description="SGD momentum.")
    beta1: float = Field(0.9, ge=0.0, lt=1.0, description="Adam beta1.")
    beta2: float = Field(0.999, ge=0.0, lt=1.0, description="Adam beta2.")
    device: str = Field("auto", description="auto | cpu | cuda | cuda:N.")
    flush_denormal: bool = Field(
        True,
        description="CPU: flush denormal floats (|x| < 1.2e-38) to zero while training; unstable runs whose values "
        "underflow ran up to 3x faster, with the same results to float tolerance (docs/PERFORMANCE.md).",
    )
    checkpoint_every: int = Field(
        1000,
        ge=0,
        description="Save a checkpoint (model, optimiser, random streams, data position) every this many steps "
        "and at least every 5 minutes, for 'sparse-tui resume'; 0 = never.",
    )
    cuda_graph: Literal["auto", "on", "off"] = Field(
        "auto",
        description="CUDA: capture the whole training step as a CUDA graph and replay it (auto: try, and train "
        "eagerly if capture fails; on: a failed capture fails the run; off: eager). No effect on CPUs.",
    )
    precision: Literal["fp32", "tf32", "bf16"] = Field(
        "fp32",
        description="Training-step arithmetic: fp32 (default), tf32 (CUDA matmuls in TensorFloat-32, ~1e-3 "
        "relative), bf16 (forward under bfloat16 autocast, ~1e-2); evaluations stay fp32 (docs/PERFORMANCE.md).",
    )

    @model_validator(mode="after")
    def _check(self) -> "TrainConfig":
        if not _DEVICE_RE.match(self.device):
            raise ValueError("device: must be one of auto, cpu, cuda, cuda:N")
        return self


class EvalConfig(_Section):
    """When and on what the model is evaluated."""

    every: int = Field(50, ge=1, description="Evaluate every this many steps (and at step 0 and the last step).")
    train_every: int = Field(
        10, ge=1, description="Log train/loss (the mean since the last log) every this many steps between evaluations."
    )
    test_size: int = Field(512, ge=1, description="Sequences in the fixed test set (no repetition).")
    snapshot_every: int = Field(
        0, ge=0,
        description="Store attention maps of a few test sequences every this many steps; 0 = at eval 0 and end."
    )
    snapshot_examples: int = Field(2, ge=1, le=16, description="Number of test sequences whose attention is stored.")


class PlateauConfig(_Section):
    """Plateau length (paper App. D.1): the first evaluated step at which the threshold is crossed."""

    metric: str = Field("test/loss", description="Metric watched, e.g. test/loss, train/loss, test/acc.")
    mode: Literal["fraction", "below", "above"] = Field(
        "fraction",
        description=(
            "fraction: metric <= value * its initial value (App. D.1 uses 0.2); below: metric <= value; "
            "above: metric >= value (accuracy, App. D.1 uses 0.05 for recall)."
        ),
    )
    value: float = Field(0.2, description="Threshold value.")
    stop_after: int = Field(
        -1,
        ge=-1,
        description="End a run this many steps after its plateau is crossed (checked at evaluations; the run is "
        "recorded finished at that step); -1 = train every step. Saves most of a scaling grid's time: the short "
        "plateaus stop early instead of running as long as the longest.",
    )


MAX_TAGS = 16
_TAG = re.compile(r"[A-Za-z0-9_.:+=/@-]{1,40}")


def _esc(text: str) -> str:
    """``text`` with control characters (terminal escape codes, newlines) shown escaped, never sent raw."""
    return "".join(c if c.isprintable() or c == " " else repr(c)[1:-1] for c in str(text))


def tag_problem(tag: Any) -> str | None:
    """Why ``tag`` is not a valid run tag (None when it is): 1-40 characters of ASCII letters, digits and ``_.:+=/@-``,
    so a tag is one word in the console's filter and in ``runs --tag``."""
    if not isinstance(tag, str):
        return f"tags must be strings, got {_show(tag)}"
    if not _TAG.fullmatch(tag):
        bad = next((c for c in tag if not _TAG.fullmatch(c)), None)
        what = f"; {_esc(bad)!r} is not one of them" if bad is not None and len(tag) <= 40 else ""
        return (f"tag {_esc(tag)!r}: use 1-40 characters, each an ASCII letter, a digit or one of _.:+=/@- (no "
                f"spaces){what}")
    return None


class _Experiment(_Section):
    """The sections shared by a preset file and a single run."""

    name: str = Field("", max_length=MAX_NAME, description="Preset name (defaults to the file name).")
    description: str = Field("", max_length=MAX_DESCRIPTION, description="One line saying what the preset shows.")
    task: TaskConfig = Field(default_factory=RecallTask)
    model: ModelConfig = Field(default_factory=TransformerModel)
    train: TrainConfig = Field(default_factory=TrainConfig)
    eval: EvalConfig = Field(default_factory=EvalConfig)
    plateau: PlateauConfig = Field(default_factory=PlateauConfig)
    tags: list[str] = Field(default_factory=list, description="Free labels stored with each run (`runs --tag`).")

    @field_validator("tags", mode="before")
    @classmethod
    def _tags(cls, v: Any) -> Any:
        if not isinstance(v, list):
            raise ValueError(f"must be a list of strings, got {_show(v)}")
        if len(v) > MAX_TAGS:
            raise ValueError(f"at most {MAX_TAGS} tags, got {len(v)}")
        for t in v:
            problem = tag_problem(t)
            if problem:
                raise ValueError(problem)
        if len(set(v)) != len(v):
            dup = next(t for t in v if v.count(t) > 1)
            raise ValueError(f"tag {dup!r} appears twice")
        return v

    @model_validator(mode="after")
    def _cross(self) -> "_Experiment":
        if self.model.kind in ("toy", "ode") and self.task.kind != "linreg":
            raise ValueError(f"model.kind: '{self.model.kind}' needs task.kind = 'linreg'")
        if self.model.kind == "transformer":
            token_task = task_kind(self.task.kind).tokens(self.task)
            if self.model.tie_embeddings and not token_task:
                raise ValueError(f"model.tie_embeddings: needs a token task ({_kinds_with(True)})")
            if self.model.embedding == "ordered":
                if not token_task or self.model.input == "linear":
                    raise ValueError(f"model.embedding: 'ordered' needs a token task ({_kinds_with(True)})")
                if self.train.weight_decay != 0:
                    raise ValueError("model.embedding: 'ordered' is frozen, and train.weight_decay would move it; "
                                     "set 0")
            if self.model.input == "embedding" and not token_task:
                raise ValueError(f"model.input: 'embedding' needs a token task ({_kinds_with(True)}); use auto or"
                                 " linear")
            if self.model.input == "linear" and token_task:
                raise ValueError(f"model.input: 'linear' needs a vector task ({_kinds_with(False)}); use auto or"
                                 " embedding")
        n_evals = n_eval_steps(self.train.steps, self.eval.every)
        if n_evals > MAX_EVALS:
            raise ValueError(
                f"eval.every: {n_evals} evaluations (train.steps {self.train.steps} / eval.every {self.eval.every})"
                f" is more than {MAX_EVALS}; raise eval.every"
            )
        if self.eval.snapshot_every > 0:
            n_snaps = n_eval_steps(self.train.steps, math.lcm(self.eval.every, self.eval.snapshot_every))
            if n_snaps > MAX_SNAPSHOTS:
                raise ValueError(
                    f"eval.snapshot_every: {n_snaps} attention snapshots is more than {MAX_SNAPSHOTS};"
                    " raise eval.snapshot_every"
                )
        self._check_plateau()
        self._check_schedules()
        return self

    def _check_schedules(self) -> None:
        """A repetition schedule's conditions read metrics this run logs; the ODE flow cannot be 'stuck'."""
        for key, sched in scheduled(self.task).items():
            for metric in sched.metrics():
                if metric_range(self, metric) is None:
                    raise ValueError(f"task.{key}: {metric!r} is not logged by this run (schedule {sched})")
            if self.model.kind == "ode" and len(scheduled(self.task)) > 1:
                raise ValueError("task.p: the reduced flow follows one schedule at a time (p or B)")
            if self.model.kind == "ode" and any(w.startswith("stuck") for w in sched.when):
                raise ValueError(f"task.{key}: the reduced flow improves at every step; 'stuck' never fires there")
            why = self._never_acts(sched)
            if why:
                raise ValueError(f"task.{key}: {why}, so the schedule never acts within the run (schedule {sched})")

    def _never_acts(self, sched: Schedule) -> str | None:
        """Why a part of ``sched`` can never act within ``train.steps`` (issue 45), else None: a switch at or past
        the last step, 'stuck K' with fewer than K evaluations after the first, a threshold outside its metric's
        range."""
        steps = self.train.steps
        for s, _ in sched.steps[1:]:
            if s >= steps:
                return f"the switch at step {s} is at or past train.steps = {steps}"
        evals = n_eval_steps(steps, self.eval.every) - 1
        for w in sched.when:
            c = parse_condition(w)
            if c[0] == "stuck" and c[1] > evals:
                return f"'{w}' needs {c[1]} evaluations after the first and the run has {evals}"
            if c[0] == "cmp":
                lo, hi = metric_range(self, c[1]) or (-math.inf, math.inf)
                op, x = c[2], c[3]
                if (op == ">=" and x > hi) or (op == ">" and x >= hi) or (op == "<=" and x < lo) or (
                        op == "<" and x <= lo):
                    return f"'{w}' can never hold ({c[1]} lies in [{fmt_plain(lo)}, {fmt_plain(hi)}])"
        return None

    def _check_plateau(self) -> None:
        """``plateau.metric`` must be a metric this task and model log; ``plateau.value`` must lie in its range."""
        metric, value, mode = self.plateau.metric, self.plateau.value, self.plateau.mode
        span = metric_range(self, metric)
        if span is None:
            names = sorted(n for n in logged_metrics(self, max_layers=2) if "/H" not in n)
            shown = ", ".join(names[:12]) + (", ..." if len(names) > 12 else "")
            raise ValueError(f"plateau.metric: {metric!r} is not logged by this run; one of {shown}")
        lo, hi = span
        if mode == "fraction":
            if value <= 0:
                raise ValueError(f"plateau.value: must be > 0 in mode 'fraction' (a fraction of {metric} at step 0)")
        elif not lo <= value <= hi:
            span = f"[{fmt_plain(lo)}, {fmt_plain(hi)}]" if math.isfinite(hi) else f">= {fmt_plain(lo)}"
            if not math.isfinite(lo):
                span = "any number"
            raise ValueError(f"plateau.value: {metric} takes values in {span}, got {fmt_plain(value)}")


def _kinds_with(tokens: bool) -> str:
    """The registered task kinds that feed token ids (``tokens``) or vectors, for a message."""
    return ", ".join(name for name, k in TASKS.items() if k.tokens(k.config()) == tokens)


def n_eval_steps(steps: int, every: int) -> int:
    """``len(eval_steps(...))`` without building the list: 0, every, 2 every, ... and the last step."""
    return steps // every + 1 + (1 if steps % every else 0)


_UNIT = (0.0, 1.0)
_NONNEG = (0.0, math.inf)


def metric_range(cfg: "_Experiment", name: str) -> tuple[float, float] | None:
    """The range of metric ``name`` if a run of ``cfg`` logs it, else None (without listing every layer's names)."""
    layers, heads = (cfg.model.n_layers, cfg.model.n_heads) if cfg.model.kind == "transformer" else (1, 1)
    m = re.fullmatch(r"attn/(?:entropy/)?L(\d+)(?:/H(\d+))?(/[a-z]+)?", name)
    if m:
        li, h = int(m.group(1)), m.group(2)
        if not 1 <= li <= layers or (h is not None and not int(h) < heads):
            return None
        name = re.sub(r"L\d+", "L1", name, count=1)
        if h is not None:
            name = name.replace(f"/H{h}/", "/H0/")
    return logged_metrics(cfg, max_layers=1, max_heads=1).get(name)


def logged_metrics(cfg: "_Experiment", max_layers: int | None = None, max_heads: int | None = None
                   ) -> dict[str, tuple[float, float]]:
    """The metrics a run of ``cfg`` logs at its evaluations, each with its range (training/metrics.py,
    models/ode.py); per-layer / per-head names for at most ``max_layers`` / ``max_heads``. The plateau detector can
    watch any of them."""
    out: dict[str, tuple[float, float]] = {"test/loss": _NONNEG, "train/loss": _NONNEG}
    task, model = cfg.task, cfg.model
    if model.kind != "ode":
        out["lr"] = (0.0, math.inf)
    kind = task_kind(task.kind)
    if kind.tokens(task):
        out["test/acc"] = _UNIT
        out["test/ppl"] = (1.0, math.inf)
    layers, heads = (model.n_layers, model.n_heads) if model.kind == "transformer" else (1, 1)
    layers, heads = min(layers, max_layers or layers), min(heads, max_heads or heads)
    for li in range(1, layers + 1):
        out[f"attn/entropy/L{li}"] = _NONNEG
        for probe in kind.probes:
            out[f"attn/L{li}/{probe}"] = _UNIT
            for h in range(heads):
                out[f"attn/L{li}/H{h}/{probe}"] = _UNIT
    for key in scheduled(task):
        out[f"sched/{key}"] = (0.0, math.inf)
    if model.kind in ("toy", "ode"):
        out["toy/w"] = (-math.inf, math.inf)
        out["toy/alpha"] = _UNIT
        if model.kind == "ode" and max(all_values(task.p)) > 0:
            out["toy/w_tilde"] = (-math.inf, math.inf)
    return out


class RunConfig(_Experiment):
    """Everything one run needs: a preset with one seed and its sweep resolved."""

    seed: int = Field(0, ge=0, description="Seed of this run: task sampling, W*, and model init.")


class Preset(_Experiment):
    """A preset file: a RunConfig plus the seeds list and the sweep table."""

    seeds: list[Annotated[int, Field(ge=0)]] = Field(
        default_factory=lambda: [0], min_length=1, description="Seeds; one run per seed."
    )
    sweep: dict[str, list[Any]] = Field(
        default_factory=dict, description="Dotted key -> list of values; runs = product of lists x seeds."
    )

    @field_validator("seeds", mode="before")
    @classmethod
    def _seeds(cls, v: Any) -> Any:
        """Seeds are distinct integers in [0, 2^63) (they are stored as SQLite integers)."""
        if not isinstance(v, list):
            return v
        seen = set()
        for s in v:
            if isinstance(s, bool) or not isinstance(s, int):
                raise ValueError(f"must be a list of integers, got {_show(s)}")
            if not 0 <= s <= INT64_MAX:
                raise ValueError(f"must be integers in [0, 2^63), got {s}")
            if s in seen:
                raise ValueError(f"seed {s} appears twice (two identical runs)")
            seen.add(s)
        return v


def register_task(entry: TaskKind) -> None:
    """Add (or replace) a task kind: presets, runs, ``make_task``, the resource estimate and the console's form
    accept it from now on, in this process (docs/ARCHITECTURE.md, "A new task")."""
    TASKS[entry.name] = entry
    _sync_task_union()


def unregister_task(name: str) -> None:
    """Remove a task kind added by ``register_task``."""
    TASKS.pop(name, None)
    _sync_task_union()


def _sync_task_union() -> None:
    """Rebuild the schema's ``task`` field from ``TASKS`` (pydantic builds a model's validator once, when the class is
    made; the field keeps its discriminator)."""
    global TaskConfig
    TaskConfig = Annotated[_task_union(), Field(discriminator="kind")]
    for cls in (_Experiment, RunConfig, Preset):
        cls.model_fields["task"].annotation = _task_union()
        cls.model_rebuild(force=True)


KIND_SECTIONS = ("task", "model")  # the sections whose fields depend on their ``kind``


def kind_classes(section: str) -> dict[str, type[BaseModel]]:
    """The config class of each kind of ``section`` ("task": the registry; "model": the ``ModelConfig`` union)."""
    if section == "task":
        return {name: k.config for name, k in TASKS.items()}
    return {c.model_fields["kind"].default: c for c in get_args(get_args(ModelConfig)[0])}


def default_kind(section: str) -> str:
    """The kind of ``section`` in a preset that does not name one (recall, transformer)."""
    return _Experiment.model_fields[section].default_factory().kind
