"""The `.dlm` frontmatter schema: every key, its type, its default and its bounds.

The frontmatter is YAML read with `yaml.safe_load`, then validated here. Every model
forbids unknown keys (`extra="forbid"`) and is strict: YAML already gives typed
values, so `lora_r: "8"` or `packing: 1` is an error, not a silent coercion. The one
exception is a float written in exponent form without a dot (`2e-4`): YAML 1.1 reads
it as a string, so float fields accept a numeric string.

Defaults live here and only here; `docs/format.md` documents them.
"""

from __future__ import annotations

import math
import re
from typing import Annotated, Any, Literal

from pydantic import BaseModel, BeforeValidator, ConfigDict, Field, field_validator, model_validator

from dlm.defaults import DEFAULT_BASE_MODEL, DEFAULT_CACHE_MAX_BYTES
from dlm.doc.budget import Budget, Every, parse_budget, parse_every

SUPPORTED_DLM_VERSION = 1
# a ULID in canonical form: 26 upper-case Crockford base32 digits (no I, L, O, U), at most
# 7ZZZ... so that it fits 128 bits
CANONICAL_ULID = re.compile(r"[0-7][0-9A-HJKMNP-TV-Z]{25}")

# one source file is one row, held whole in memory as text and tokenized at once
MAX_BYTES_PER_FILE = 1 << 30
_NUMERIC = re.compile(r"[-+]?(?:\d+\.?\d*|\.\d+)(?:[eE][-+]?\d+)?")


def _float_from_yaml(value: Any) -> Any:
    """Accept `2e-4` (a string to YAML 1.1) as the float it looks like; reject NaN/inf."""
    if isinstance(value, str) and _NUMERIC.fullmatch(value.strip()):
        value = float(value)
    if isinstance(value, float) and not math.isfinite(value):
        raise ValueError("should be a finite number")
    return value


YamlFloat = Annotated[float, BeforeValidator(_float_from_yaml)]


class _Strict(BaseModel):
    model_config = ConfigDict(extra="forbid", strict=True, frozen=True)


class SourceDirective(_Strict):
    """One `training.sources` entry: a tree of files, each becoming one training row.

    `path` is relative to the `.dlm` file's folder. `include`/`exclude` are
    gitignore-style globs matched against POSIX paths relative to `path`; a file is
    taken when it matches some include and no exclude. Sizes are bytes.
    """

    path: str = Field(min_length=1)
    include: list[str] = Field(default_factory=lambda: ["**/*"])
    exclude: list[str] = Field(default_factory=list)
    max_bytes_per_file: int = Field(default=1_000_000, gt=0, le=MAX_BYTES_PER_FILE)
    max_files: int | None = Field(default=None, gt=0)


class CacheConfig(_Strict):
    """The tokenized-section cache. `max_bytes`: size cap in bytes of the shared store;
    entries unused for `prune_older_than_days` days are pruned. `trust_stat: false`
    reads and hashes every source file each run (stat-based change detection cannot see
    a write through a shared `mmap`). `remote`: a folder or fsspec URL entries are
    pulled from on a miss and pushed to after a run."""

    enabled: bool = True
    max_bytes: int = Field(default=DEFAULT_CACHE_MAX_BYTES, gt=0)
    prune_older_than_days: YamlFloat = Field(default=90.0, gt=0)
    trust_stat: bool = True
    remote: str | None = Field(default=None, min_length=1)


class EvalConfig(_Strict):
    """The held-out set (`dlm.train.heldout` has the rule) and the evaluation of the
    adapter (`dlm.judge`). `fraction`: share of rows held out of training, 0 turns it
    off; `max_rows`: how many held-out rows are scored; `every_steps`: also score every
    N optimizer steps (None: before and after only). `judge`: end `dlm train` with the
    probe report (instruction pairs and probes on base, adapter and null adapter, the
    general-ability guard; off, the probes are not scored during training either,
    unless `keep_best` needs them); `max_new_tokens`: length of each greedy answer;
    `general_samples`: replies drawn of the base and the adapter for each general probe
    the adapter fails greedily where the base passes, to tell a forgotten probe from a
    greedy reply that only tipped (`dlm.judge.forgetting`; 0: every such probe
    is forgotten); `general_max_increase`: percent rise of the general set's NLL over the base that
    warns; `guard_stop`: measure a sample of the general set during training and stop
    past `general_max_increase` at `guard_patience` measurements in a row (one past it
    early in a run is often a transient the next one is back from), keeping the last
    weights within it (`dlm.judge.guard_stop`); `keep_best`: publish the weights whose probe score was
    best and stop after `patience` scores without gain (off: `dlm.judge.track` says why)."""

    fraction: YamlFloat = Field(default=0.02, ge=0, le=0.5)
    max_rows: int = Field(default=256, gt=0)
    every_steps: int | None = Field(default=None, gt=0)
    judge: bool = True
    max_new_tokens: int = Field(default=48, gt=0, le=1024)
    general_samples: int = Field(default=16, ge=0, le=256)
    general_max_increase: YamlFloat = Field(default=5.0, ge=0)
    guard_stop: bool = True
    guard_patience: int = Field(default=2, gt=0)
    keep_best: bool = False
    patience: int | None = Field(default=4, gt=0)


# the fact kinds of `dlm.rows.facts.model` (a lower floor cannot import it; tests/test_facts_files.py
# checks the two agree)
SynthKind = Literal["where", "purpose", "signature", "value", "statement", "setting"]
SYNTH_KINDS: tuple[SynthKind, ...] = ("where", "purpose", "signature", "value", "statement", "setting")


ALL_LINEAR = ("q_proj", "k_proj", "v_proj", "o_proj", "gate_proj", "up_proj", "down_proj")
MLP_LINEAR = ("gate_proj", "up_proj", "down_proj")  # the feed-forward block of a Llama-style layer


class TeacherConfig(_Strict):
    """An OpenAI-compatible endpoint asked for Q/A pairs about each prose section and
    Markdown/text source file (`dlm.rows.teacher` has the rules). `url`: the API's base
    URL (`http://127.0.0.1:11434/v1`); `model`: the name sent in each request;
    `api_key_env`: the name of an environment variable holding a bearer key, never the
    key itself; `pairs`: pairs asked per section; `max_tokens` and `temperature`: sent
    with each request."""

    url: str
    model: str = Field(min_length=1)
    api_key_env: str | None = None
    pairs: int = Field(default=4, ge=1, le=16)
    max_tokens: int = Field(default=512, gt=0, le=32768)
    temperature: YamlFloat = Field(default=0.0, ge=0, le=2)

    @field_validator("url")
    @classmethod
    def _url(cls, value: str) -> str:
        if not re.fullmatch(r"https?://[^\s/]+(/\S*)?", value):
            raise ValueError(
                f"{value!r} is not an http(s) URL; write the API's base URL, e.g. http://127.0.0.1:11434/v1"
            )
        return value.rstrip("/")

    @field_validator("api_key_env")
    @classmethod
    def _env_name(cls, value: str | None) -> str | None:
        if value is not None and not re.fullmatch(r"[A-Za-z_][A-Za-z0-9_]*", value):
            raise ValueError(
                "should name an environment variable holding the key (e.g. OPENAI_API_KEY), never the key itself"
            )
        return value


class SynthConfig(_Strict):
    """Q/A pairs drawn from the sources and the document (`dlm.rows.synth` and
    `dlm.rows.facts` have the rules): from code (Python, Go, Rust, JavaScript,
    TypeScript, Java, C, C++) where a name is defined, its doc comment's first sentence, its
    signature, a constant's value; from prose (the document's sections and answers,
    Markdown and text files) statements about a salient span; from config files (YAML,
    TOML, JSON, INI) a key's value. `phrasings`: training pairs per fact; `probe_share`: share of definitions held out
    as probes instead; `max_facts`: cap on facts, the document's own first, then a hash-chosen sample. `enabled: auto`
    (the default) draws statements, config settings and constants' values, `phrasings`
    each, none held out, at most 48 facts, the sources' code read only when they hold at
    most 64 code files (`dlm.rows.build.AUTO_SYNTH`); `true` draws what these keys say. `teacher`: a model asked for more pairs (None: off);
    it is asked whatever `enabled` says."""

    enabled: bool | Literal["auto"] = "auto"
    kinds: list[SynthKind] = Field(default_factory=lambda: list(SYNTH_KINDS), min_length=1)
    phrasings: int = Field(default=2, ge=1, le=4)
    probe_share: YamlFloat = Field(default=0.25, ge=0, lt=1)
    max_facts: int | None = Field(default=1000, gt=0)
    teacher: TeacherConfig | None = None


def yaml_count(value: object) -> object:
    """`value` unchanged, or a whole YAML float as an int.

    Raises:
        ValueError: a boolean, or a float with a fraction (`0.4`: a number of tokens or
            steps is whole; a time needs its unit, `0.4h`).
    """
    if isinstance(value, bool):
        raise ValueError(f"{value!r} is not a number; write a count (60000, 60k) or a time (90s, 4m, 1h)")
    if isinstance(value, float):
        if not value.is_integer():
            raise ValueError(
                f"{value:g} is not a whole number: a count of tokens or steps is whole, a time needs its unit (90s, 4m)"
            )
        return int(value)
    return value


class TrainingConfig(_Strict):
    """LoRA training hyperparameters and the data taken from outside the document.

    At most one of `max_steps` and `num_epochs` may be set; with neither, the default
    recipe (`dlm.train.recipe`) chooses the steps and the instruction share within
    `budget` (tokens, `60k`, or time, `4m`). `sequence_len` is in tokens; `batch_size`
    in rows per micro-batch on each rank; `nproc` ranks on this machine (None: one,
    unless `--nproc` says otherwise). `replay`: the share of examples drawn that are general questions answered by the
    base model itself (`dlm.rows.replay`), 0 turns it off. `replay_loss`: what those rows train on, `ce`
    (cross-entropy of the base's own answer tokens) or `kl` (the KL divergence from the base model's
    whole next-token distribution at each answer position, `dlm.train.replay_kl`).
    `replay_weight`: the factor on a replay position's loss in the step's loss. `recast`: each prose sentence is also trained as
    a Q/A pair (a cloze question, the sentence as the answer); off by default, as it
    costs paraphrases and teaches a small model no prose fact (docs/benchmarks.md,
    "Recipe sweep"). `checkpoint_every`: optimizer steps (`200`) or training time
    (`2m`) between checkpoints a Ctrl-C'd run resumes from (`dlm train --resume`); None
    writes none. LoRA on attention alone does not make Q/A pairs stick on a small model
    (docs/benchmarks.md, "Recipe sweep"); on the MLP's three linear layers at rank 16 it
    learns the pairs, their rewordings and the facts at least as well as on every linear
    layer at rank 8, forgets about as much and trains faster (docs/evaluation.md, "LoRA
    on the MLP alone"), in keeping with factual associations being stored in the
    feed-forward layers (Geva et al. 2021; Meng et al. 2022). At learning rate 3e-3 the
    recipe's dozen sightings also bind the synth's facts, which 1e-3 left mostly
    unlearned (docs/evaluation.md, "The learning rate").
    """

    adapter: Literal["lora"] = "lora"
    lora_r: int = Field(default=16, gt=0)
    lora_alpha: int = Field(default=32, gt=0)
    # 0, as in peft: dropout did not change what the demo and the ferry document learned,
    # and its masks and their input copies cost step time (docs/benchmarks.md, "LoRA dropout")
    lora_dropout: YamlFloat = Field(default=0.0, ge=0, lt=1)
    target_modules: list[str] = Field(default_factory=lambda: list(MLP_LINEAR), min_length=1)
    learning_rate: YamlFloat = Field(default=3e-3, gt=0)
    max_steps: int | None = Field(default=None, gt=0)
    num_epochs: YamlFloat | None = Field(default=None, gt=0)
    batch_size: int = Field(default=4, gt=0)
    gradient_accumulation_steps: int = Field(default=1, gt=0)
    nproc: int | None = Field(default=None, gt=0)  # ranks on this machine (dlm.train.distributed)
    sequence_len: int = Field(default=2048, ge=16)
    seed: int = Field(default=42, ge=0, lt=2**32)  # numpy's seed range (set_seed seeds numpy)
    packing: bool = True  # whole examples packed into blocks, no attention across them (dlm.train.dataset)
    precision: Literal["fp32", "bf16", "auto"] = "auto"  # bf16 where the hardware has it (dlm.train.precision)
    # recompute activations in backward: less memory, slower; auto: on unless a CPU has room (dlm.train.lora)
    gradient_checkpointing: bool | Literal["auto"] = "auto"
    instruction_share: YamlFloat | None = Field(default=None, gt=0, lt=1)
    # share of the examples drawn that replay the base model's own answers to general
    # questions (dlm.rows.replay), so the adapter keeps what the base could do; 0: none
    replay: YamlFloat = Field(default=0.25, ge=0, lt=1)
    # what a replay row's loss positions train on: `kl`, KL(p_base || p_adapter) over the
    # whole vocabulary, the base model's full next-token distribution as the target
    # (dlm.train.replay_kl): it kept general NLL closer to the base than `ce`, the
    # cross-entropy of the base's greedy answer tokens (docs/evaluation.md, "Replay")
    replay_loss: Literal["ce", "kl"] = "kl"
    # what a replay position's loss counts for against a document position's in each
    # step's loss (dlm.train.loop): above 1 the pull back to the base is stronger at
    # no extra step (docs/evaluation.md, "Replay's share and weight")
    replay_weight: YamlFloat = Field(default=1.0, gt=0)
    budget: str | int | None = None
    recast: bool = False
    checkpoint_every: str | int | None = "5m"
    sources: list[SourceDirective] = Field(default_factory=list)
    cache: CacheConfig = Field(default_factory=CacheConfig)
    eval: EvalConfig = Field(default_factory=EvalConfig)
    synth: SynthConfig = Field(default_factory=SynthConfig)

    @field_validator("budget", "checkpoint_every", mode="before")
    @classmethod
    def _whole_number(cls, value: object) -> object:
        """A YAML number is taken whole (`60000.0` is 60000); a fraction or a boolean is one
        clear error, not one per member of the field's type."""
        return yaml_count(value)

    @field_validator("budget")
    @classmethod
    def _budget(cls, value: str | int | None) -> str | int | None:
        if value is not None:
            parse_budget(value)  # ValueError: a one-line field error
        return value

    @field_validator("checkpoint_every")
    @classmethod
    def _checkpoint_every(cls, value: str | int | None) -> str | int | None:
        if value is not None:
            parse_every(value)
        return value

    @property
    def parsed_checkpoint_every(self) -> Every | None:
        """`checkpoint_every` as steps or seconds (None: no checkpoints)."""
        return parse_every(self.checkpoint_every) if self.checkpoint_every is not None else None

    @property
    def parsed_budget(self) -> Budget | None:
        """`budget` as tokens or seconds (None: no budget set)."""
        return parse_budget(self.budget) if self.budget is not None else None

    @model_validator(mode="after")
    def _one_stop_rule(self) -> TrainingConfig:
        if self.max_steps is not None and self.num_epochs is not None:
            raise ValueError("set max_steps or num_epochs, not both")
        return self

    @property
    def effective_epochs(self) -> float:
        """Epochs to train: `num_epochs`, else 1.0. When `max_steps` is set it bounds
        the run instead and this value is only the trainer's nominal epoch count."""
        return self.num_epochs if self.num_epochs is not None else 1.0


class TokenizerCacheSettings(_Strict):
    """Serving-time tokenizer cache. L0: exact-prompt entries (count and bytes);
    L1: prefix cache, `l1_max_memory` bytes, used for prompts of at least
    `l1_min_prompt_chars` characters."""

    enable_l0: bool = False
    l0_max_entries: int = Field(default=10_000, gt=0)
    l0_max_memory: int = Field(default=64 * 2**20, gt=0)
    enable_l1: bool = False
    l1_max_memory: int = Field(default=50 * 2**20, gt=0)
    l1_min_prompt_chars: int = Field(default=512, ge=0)


class ServeConfig(_Strict):
    """Settings for `dlm serve`."""

    tokenizer_cache: TokenizerCacheSettings = Field(default_factory=TokenizerCacheSettings)


class Frontmatter(_Strict):
    """The whole frontmatter of a `.dlm` document.

    `dlm_id` is a ULID naming the document's store; it is kept in canonical form
    (26 upper-case Crockford base32 characters).
    """

    dlm_id: str
    dlm_version: int = SUPPORTED_DLM_VERSION
    base_model: str = Field(default=DEFAULT_BASE_MODEL, min_length=1)
    system_prompt: str | None = None
    training: TrainingConfig = Field(default_factory=TrainingConfig)
    serve: ServeConfig = Field(default_factory=ServeConfig)

    @field_validator("dlm_id")
    @classmethod
    def _ulid(cls, value: str) -> str:
        if CANONICAL_ULID.fullmatch(value):  # already canonical: what ULID.from_str gives back
            return value
        from ulid import ULID  # imported here: it reads its own package metadata on import

        try:
            return str(ULID.from_str(value))
        except ValueError as exc:
            reason = str(exc).rstrip(".")
            raise ValueError(
                f"{value!r} is not a ULID ({reason[:1].lower()}{reason[1:]}); "
                f"use 26 Crockford base32 characters, e.g. {ULID()}"
            ) from None

    @field_validator("dlm_version")
    @classmethod
    def _version(cls, value: int) -> int:
        if value != SUPPORTED_DLM_VERSION:
            raise ValueError(version_message(value))
        return value


def version_message(value: object) -> str:
    """Why `dlm_version: value` is refused, and the way out."""
    if isinstance(value, int) and not isinstance(value, bool) and value > SUPPORTED_DLM_VERSION:
        return f"format version {value} is newer than this dlm reads (up to {SUPPORTED_DLM_VERSION}); upgrade dlm"
    return f"unsupported format version {value!r}; this dlm reads version {SUPPORTED_DLM_VERSION}"
