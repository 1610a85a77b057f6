"""The remembered base-model score: its key, its file, and the tracker reading it."""

from __future__ import annotations

import json
from dataclasses import replace
from pathlib import Path

import numpy as np
import pytest
import torch
from uniformlm import UniformLM

from dlm.metrics import MetricsDB
from dlm.train.base_score import (
    FORMAT,
    BaseScoreMemo,
    cpu_model,
    eval_set_sha256,
    model_identity,
    score_key,
    scoring_environment,
)
from dlm.train.evaluate import EvalExample, EvalResult, EvalSet, heldout_loss
from dlm.train.tracking import HeldOutTracker


def example(ids: list[int], n_prompt: int = 0, kind: str = "prose") -> EvalExample:
    a = np.array(ids, dtype=np.int64)
    return EvalExample(a, np.where(np.arange(len(ids)) >= n_prompt, a, -100), kind)


EVAL_SET = EvalSet([example([1, 2, 3, 4]), example([5, 6, 7], n_prompt=2, kind="instruction")])
RESULT = EvalResult(
    loss=0.1 + 0.2,
    perplexity=1 / 3,
    rows=2,
    tokens=7,
    loss_tokens=4,
    by_kind={"instruction": 2.0**-40, "prose": 3.0211981133255366},
)


class Sink:
    def __init__(self) -> None:
        self.evals: list[tuple[str, int, EvalResult]] = []

    def on_eval(self, phase: str, step: int, result: EvalResult) -> None:
        self.evals.append((phase, step, result))


def test_memo_gives_back_the_very_floats_it_was_given(tmp_path: Path):
    memo = BaseScoreMemo(tmp_path / "heldout-base.json", "sha256:" + "a" * 64)
    assert memo.read() is None  # no file yet
    memo.write(RESULT)
    assert memo.read() == RESULT  # dataclass equality: every float bit for bit


@pytest.mark.parametrize(
    "text",
    [
        "",
        "{",
        "[]",
        '{"format": 1}',
        '{"format": 2, "key": "k", "result": {}}',
        '{"format": 1, "key": "k", "result": {"loss": "x"}}',
    ],
)
def test_an_unreadable_or_foreign_file_is_a_miss(tmp_path: Path, text: str):
    path = tmp_path / "heldout-base.json"
    path.write_text(text)
    assert BaseScoreMemo(path, "k").read() is None


def test_another_key_is_a_miss_and_writing_replaces_it(tmp_path: Path):
    path = tmp_path / "heldout-base.json"
    BaseScoreMemo(path, "old").write(RESULT)
    assert BaseScoreMemo(path, "new").read() is None
    BaseScoreMemo(path, "new").write(replace(RESULT, loss=1.5))
    assert BaseScoreMemo(path, "old").read() is None
    assert BaseScoreMemo(path, "new").read() == replace(RESULT, loss=1.5)
    assert json.loads(path.read_text())["format"] == FORMAT


def test_eval_set_digest_covers_ids_labels_kinds_order_and_pad():
    base = eval_set_sha256(EVAL_SET, 0)
    assert base == eval_set_sha256(EvalSet(list(EVAL_SET.examples)), 0)
    first, second = EVAL_SET.examples
    variants = [
        EvalSet([example([1, 2, 3, 5]), second]),  # one id
        EvalSet([example([1, 2, 3, 4], n_prompt=1), second]),  # one label masked
        EvalSet([example([1, 2, 3, 4], kind="source"), second]),  # a kind
        EvalSet([second, first]),  # the order
        EvalSet([first]),  # an example fewer
        EvalSet([example([1, 2]), example([3, 4, 5, 6, 7], n_prompt=4, kind="instruction")]),  # the cut
    ]
    digests = {base, eval_set_sha256(EVAL_SET, 2), *(eval_set_sha256(v, 0) for v in variants)}
    assert len(digests) == 2 + len(variants)


def test_score_key_changes_with_each_part(tmp_path: Path):
    (tmp_path / "config.json").write_text('{"hidden_size": 8}')
    model = model_identity("sha256:" + "0" * 64, tmp_path, "torch.float32")
    env = {"torch_threads": 2, "cpu_capability": "AVX2"}
    key = score_key(model, "sha256:e", env)
    assert key == score_key(dict(model), "sha256:e", dict(env))
    others = {
        score_key({**model, "revision": "sha256:" + "1" * 64}, "sha256:e", env),
        score_key({**model, "dtype": "torch.bfloat16"}, "sha256:e", env),
        score_key(model, "sha256:f", env),
        score_key(model, "sha256:e", {**env, "torch_threads": 1}),
        score_key(model, "sha256:e", env, "bfloat16"),  # scored under bf16 autocast
    }
    (tmp_path / "config.json").write_text('{"hidden_size": 16}')  # same weights, another model
    others.add(score_key(model_identity("sha256:" + "0" * 64, tmp_path, "torch.float32"), "sha256:e", env))
    assert key not in others and len(others) == 6
    assert score_key(model, "sha256:e", env, "float32") == key


def test_scoring_environment_names_threads_kernels_and_cpu():
    env = scoring_environment()
    assert env["torch_threads"] == torch.get_num_threads()
    assert env["cpu_capability"] == torch.backends.cpu.get_cpu_capability()
    assert env["versions"]["torch"] and "cpu_model" in env and "determinism_flags" in env
    assert env["scoring_device"] == "cpu"  # where this machine trains, and so scores


def test_cpu_model_reads_the_first_model_name(tmp_path: Path):
    info = tmp_path / "cpuinfo"
    info.write_text("processor\t: 0\nmodel name\t: AMD EPYC 7B13\n\nprocessor\t: 1\nmodel name\t: other\n")
    assert cpu_model(str(info)) == "AMD EPYC 7B13"
    assert isinstance(cpu_model(str(tmp_path / "absent")), str)


def tracker(tmp_path: Path, memo: BaseScoreMemo | None) -> tuple[HeldOutTracker, Sink, MetricsDB]:
    sink, db = Sink(), MetricsDB(tmp_path / "metrics.sqlite")
    db.start_run("r1", base_model="m", max_steps=1, rows=2, files_taken=0, files_skipped={}, heldout_rows=2)
    return HeldOutTracker(EVAL_SET, db, "r1", sink, memo=memo), sink, db


def test_tracker_computes_and_remembers_the_before_score_then_reads_it(tmp_path: Path):
    memo = BaseScoreMemo(tmp_path / "heldout-base.json", "k")
    model = UniformLM(11)
    first, sink, db = tracker(tmp_path / "a", memo)
    first.measure(model, "before", 0)
    computed = heldout_loss(UniformLM(11), EVAL_SET)
    assert sink.evals == [("before", 0, computed)] and memo.read() == computed and model.calls == 1
    db.close()

    second, sink, db = tracker(tmp_path / "b", memo)
    second.measure(model, "before", 0)
    assert model.calls == 1  # not scored again
    assert sink.evals == [("before", 0, computed)]
    assert [(e["phase"], e["loss"]) for e in db.runs()[0]["evals"]] == [("before", computed.loss)]
    second.measure(model, "after", 1)  # only the base model's score is remembered
    assert model.calls == 2 and memo.read() == computed
    db.close()


def test_tracker_without_memo_always_scores(tmp_path: Path):
    model = UniformLM(11)
    plain, sink, db = tracker(tmp_path, None)
    plain.measure(model, "before", 0)
    plain.measure(model, "before", 0)
    assert model.calls == 2 and len(sink.evals) == 2
    db.close()
