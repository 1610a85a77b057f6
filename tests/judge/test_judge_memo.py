"""The base model's side of an evaluation, and whole reports, remembered
(`dlm.judge.memo`): the report is the same bytes with and without them, they are read
when their key matches, and their keys name every input."""

from __future__ import annotations

import json
from pathlib import Path

import pytest
import torch

from dlm.canonical import canonical_json
from dlm.judge.forgetting import general_probe_items
from dlm.judge.general import GeneralProbe, GeneralProbeSet
from dlm.judge.guard import guard_examples, guard_score
from dlm.judge.memo import GENERAL_KEPT, REPORTS_KEPT, BaseSideMemo, ReportMemo, adapter_files_sha256, report_key
from dlm.judge.report import judge_adapter
from dlm.judge.score import make_item, reference_examples

# the key's scoring and generation settings (any values: the key names them)
KEY_SETTINGS = {
    "pad_id": 2,
    "generation_pad_id": 2,
    "max_new_tokens": 4,
    "generate_batch": 16,
    "generate_cache_bytes": 99,
}
GENERAL = ["The river runs past the mill and under the old stone bridge.", "def add(a, b):\n    return a + b\n"]


def items(tokenizer):
    return [
        make_item(tokenizer, "You answer briefly.", "instruction", "What is the secret word?", "quindlewhump"),
        make_item(tokenizer, "You answer briefly.", "probe", "Which colour is the logo?", "teal", ("teal",)),
    ]


def probe_set(sha: str = "sha256:" + "1" * 64) -> GeneralProbeSet:
    return GeneralProbeSet(
        (
            GeneralProbe("capital-france", "What is the capital of France?", ("Paris",)),
            GeneralProbe("unit-days-in-week", "How many days are in a week?", ("7",)),
        ),
        sha,
    )


def memo_at(path: Path, environment: str = "here", shared: Path | None = None) -> BaseSideMemo:
    return BaseSideMemo(
        path, {"revision": "tiny", "dtype": "torch.float32"}, "sha256:tok", {"machine": environment}, shared
    )


def judge(
    model,
    tokenizer,
    memo=None,
    max_new_tokens: int = 4,
    reports=None,
    adapter="sha256:a",
    version="v0001",
    reuse: bool = True,
    probes=None,
) -> str:
    report = judge_adapter(
        model,
        tokenizer,
        items(tokenizer),
        GENERAL,
        adapter_version=version,
        seed=7,
        max_new_tokens=max_new_tokens,
        memo=memo,
        reports=reports,
        adapter_sha256=adapter,
        reuse=reuse,
        general_probes=probes,
    )
    return canonical_json(report.as_dict())


def test_the_report_is_the_same_bytes_with_and_without_the_memo(tiny_lora, smollm2_tokenizer, tmp_path) -> None:
    memo = memo_at(tmp_path / "judge-base.json")
    fresh = judge(tiny_lora, smollm2_tokenizer)
    written = judge(tiny_lora, smollm2_tokenizer, memo)  # a miss: computes and writes
    assert memo.path.is_file()
    read = judge(tiny_lora, smollm2_tokenizer, memo)  # a hit
    assert fresh == written == read
    stored = json.loads(memo.path.read_text())
    report = json.loads(fresh)
    # the base side keeps its unrounded log-probabilities; its replies come from the batch
    # all three models answer in, so none are kept
    assert [round(i["logprob"], 4) for i in stored["items"]] == [i["logprob"]["base"] for i in report["items"]]
    assert all(set(i) == {"logprob"} for i in stored["items"])
    assert stored["general"]["passages"] == 2 and stored["general"]["tokens"] == report["general"]["tokens"]


def test_a_matching_memo_is_read_and_any_other_is_replaced(tiny_lora, smollm2_tokenizer, tmp_path) -> None:
    memo = memo_at(tmp_path / "judge-base.json")
    honest = json.loads(judge(tiny_lora, smollm2_tokenizer, memo))
    stored = json.loads(memo.path.read_text())
    stored["items"][0]["logprob"] = -0.125
    memo.path.write_text(json.dumps(stored))
    remembered = json.loads(judge(tiny_lora, smollm2_tokenizer, memo))
    assert remembered["items"][0]["logprob"]["base"] == -0.125  # read, not scored
    assert remembered["items"][0]["replies"] == honest["items"][0]["replies"]
    # another machine's memo misses and is replaced by this evaluation's side
    assert json.loads(judge(tiny_lora, smollm2_tokenizer, memo_at(memo.path, "elsewhere"))) == honest
    assert json.loads(memo.path.read_text())["key"] != stored["key"]
    memo.path.write_text("{not json")
    assert json.loads(judge(tiny_lora, smollm2_tokenizer, memo)) == honest  # a broken file is a miss


def test_the_key_names_every_input(smollm2_tokenizer, tmp_path) -> None:
    examples = reference_examples(smollm2_tokenizer, items(smollm2_tokenizer))
    general = guard_examples(smollm2_tokenizer, GENERAL)
    memo = memo_at(tmp_path / "m.json")
    settings = dict(KEY_SETTINGS)
    base = memo.key(examples, general, **settings)
    assert base == memo.key(examples, general, **settings)
    variants = [
        memo.key(examples[:1], general, **settings),
        memo.key(examples, general[:1], **settings),
        memo.key(examples, None, **settings),
        memo.key(examples, general, **{**settings, "pad_id": 0}),
        memo.key(examples, general, **{**settings, "generation_pad_id": 0}),
        memo.key(examples, general, **{**settings, "max_new_tokens": 5}),
        memo.key(examples, general, **{**settings, "generate_batch": 8}),
        memo.key(examples, general, **{**settings, "generate_cache_bytes": 98}),
        memo.key(examples, general, **settings, general_precision="bfloat16"),
        memo_at(memo.path, "elsewhere").key(examples, general, **settings),
        BaseSideMemo(memo.path, {"revision": "other"}, memo.tokenizer, memo.environment).key(
            examples, general, **settings
        ),
        BaseSideMemo(memo.path, memo.model, "sha256:other", memo.environment).key(examples, general, **settings),
    ]
    assert len({base, *variants}) == len(variants) + 1


def test_a_whole_report_is_read_back_by_adapter_and_any_other_adapter_is_scored(
    tiny_lora, smollm2_tokenizer, tmp_path
) -> None:
    memo, reports = memo_at(tmp_path / "judge-base.json"), ReportMemo(tmp_path / "reports")
    fresh = judge(tiny_lora, smollm2_tokenizer)
    assert judge(tiny_lora, smollm2_tokenizer, memo, reports=reports) == fresh  # a miss: scored, written
    (stored,) = reports.folder.glob("*.json")
    data = json.loads(stored.read_text())
    data["report"]["items"][1]["replies"]["adapter"] = "teal, as remembered"
    stored.write_text(json.dumps(data))
    # a hit returns the stored report (the planted reply proves nothing was scored), under
    # the version asked for: a retrain to the same bytes is the same adapter
    again = json.loads(judge(tiny_lora, smollm2_tokenizer, memo, reports=reports, version="v0002"))
    assert again["items"][1]["replies"]["adapter"] == "teal, as remembered" and again["adapter_version"] == "v0002"
    # other adapter files, or no adapter hash at all: scored afresh
    assert judge(tiny_lora, smollm2_tokenizer, memo, reports=reports, adapter="sha256:b") == fresh
    assert judge(tiny_lora, smollm2_tokenizer, memo, reports=reports, adapter=None) == fresh
    data["report"]["kinds"] = "not a summary"
    stored.write_text(json.dumps(data))
    assert judge(tiny_lora, smollm2_tokenizer, memo, reports=reports) == fresh  # a damaged report is a miss


def test_the_report_key_names_the_adapter_files_the_null_seed_and_the_threshold(tmp_path) -> None:
    base = report_key("sha256:base", "sha256:a", seed=7, general_max_increase=5.0)
    variants = [
        report_key("sha256:other", "sha256:a", seed=7, general_max_increase=5.0),
        report_key("sha256:base", "sha256:b", seed=7, general_max_increase=5.0),
        report_key("sha256:base", "sha256:a", seed=8, general_max_increase=5.0),
        report_key("sha256:base", "sha256:a", seed=7, general_max_increase=None),
    ]
    assert len({base, *variants}) == len(variants) + 1
    folder = tmp_path / "v0001"
    folder.mkdir()
    (folder / "adapter_model.safetensors").write_bytes(b"weights")
    (folder / "adapter_config.json").write_text('{"lora_alpha": 16}')
    first = adapter_files_sha256(folder)
    (folder / "adapter_config.json").write_text('{"lora_alpha": 32}')  # same weights, another scale
    assert adapter_files_sha256(folder) != first


def test_only_the_newest_reports_are_kept(tmp_path) -> None:
    reports = ReportMemo(tmp_path / "reports")
    keys = [
        report_key("sha256:base", f"sha256:{i}", seed=0, general_max_increase=None) for i in range(REPORTS_KEPT + 2)
    ]
    for key in keys:
        reports.write(key, {"n": key})
    assert len(list(reports.folder.glob("*.json"))) == REPORTS_KEPT
    assert reports.read(keys[-1]) == {"n": keys[-1]}


def test_the_general_set_scores_under_bfloat16_autocast_when_asked(tiny_lora, smollm2_tokenizer) -> None:
    general = guard_examples(smollm2_tokenizer, GENERAL)
    fp32 = guard_score(tiny_lora, general, 0)
    bf16 = guard_score(tiny_lora, general, 0, "bfloat16")
    assert bf16.tokens == fp32.tokens and bf16.passages == fp32.passages
    assert bf16.nll != fp32.nll and abs(bf16.nll - fp32.nll) < 0.01 * fp32.nll  # rounded, not another model
    assert next(tiny_lora.parameters()).dtype == torch.float32  # the weights stay as loaded


def test_the_base_models_general_score_is_shared_by_documents_on_one_machine(
    tiny_lora, smollm2_tokenizer, tmp_path
) -> None:
    shared = tmp_path / "models" / "general-scores.json"
    honest = json.loads(judge(tiny_lora, smollm2_tokenizer, memo_at(tmp_path / "a.json", shared=shared)))
    data = json.loads(shared.read_text())
    (key,) = data["entries"]
    assert data["order"] == [key] and data["entries"][key]["nll"] == pytest.approx(
        honest["general"]["base_nll"], abs=1e-4
    )
    # another document (its own per-document memo, empty) reads the score, checked: the
    # guard pass on the base model does not run again
    import dlm.judge.report as report

    scored = []
    with pytest.MonkeyPatch.context() as mp:
        mp.setattr(report, "guard_score", lambda *a, _f=report.guard_score, **k: scored.append(1) or _f(*a, **k))
        other = json.loads(judge(tiny_lora, smollm2_tokenizer, memo_at(tmp_path / "b.json", shared=shared)))
    assert other == honest and len(scored) == 1  # the adapter's pass only
    assert json.loads((tmp_path / "b.json").read_text())["general"] is None  # kept in the shared file only
    # another machine misses and adds its own entry; a damaged file is a miss and is rewritten
    assert json.loads(judge(tiny_lora, smollm2_tokenizer, memo_at(tmp_path / "c.json", "elsewhere", shared))) == honest
    assert len(json.loads(shared.read_text())["entries"]) == 2
    shared.write_text("{not json")
    assert json.loads(judge(tiny_lora, smollm2_tokenizer, memo_at(tmp_path / "d.json", shared=shared))) == honest
    assert list(json.loads(shared.read_text())["entries"]) == [key]


def test_only_the_newest_general_scores_are_kept(tmp_path) -> None:
    from dlm.judge.guard import GuardScore

    memo = memo_at(tmp_path / "m.json", shared=tmp_path / "general-scores.json")
    keys = [f"sha256:{i:04d}" for i in range(GENERAL_KEPT + 3)]
    for i, key in enumerate(keys):
        memo.write_general(key, GuardScore(float(i), 1, 2))
    memo.write_general(keys[5], GuardScore(5.5, 1, 2))  # rewritten: the newest again
    data = json.loads(memo.general_path.read_text())
    assert data["order"][-1] == keys[5] and len(data["entries"]) == GENERAL_KEPT
    assert memo.read_general(keys[0]) is None and memo.read_general(keys[5]) == GuardScore(5.5, 1, 2)


def test_without_reuse_nothing_remembered_is_read_and_what_is_scored_is_written(
    tiny_lora, smollm2_tokenizer, tmp_path
) -> None:
    shared = tmp_path / "general-scores.json"
    memo, reports = memo_at(tmp_path / "judge-base.json", shared=shared), ReportMemo(tmp_path / "reports")
    honest = judge(tiny_lora, smollm2_tokenizer, memo, reports=reports)
    (stored,) = reports.folder.glob("*.json")
    planted = json.loads(stored.read_text())
    planted["report"]["items"][0]["replies"]["adapter"] = "planted"
    stored.write_text(json.dumps(planted))
    side = json.loads(memo.path.read_text())
    side["items"][0]["logprob"] = -0.125
    memo.path.write_text(json.dumps(side))
    general = json.loads(shared.read_text())
    (key,) = general["entries"]
    general["entries"][key]["nll"] = 9.5
    shared.write_text(json.dumps(general))
    assert judge(tiny_lora, smollm2_tokenizer, memo, reports=reports, reuse=False) == honest
    # and each memo now holds what was scored again, not what was planted
    assert judge(tiny_lora, smollm2_tokenizer, memo, reports=reports) == honest
    assert json.loads(memo.path.read_text())["items"][0]["logprob"] != -0.125
    assert json.loads(shared.read_text())["entries"][key]["nll"] != 9.5


def test_one_batch_answers_on_each_adapter_named(tiny_lora, smollm2_tokenizer) -> None:
    from dlm.judge.score import BASE, greedy_replies

    prompts = [item.prompt_text for item in items(smollm2_tokenizer)]
    tiny_lora.train()
    base, adapter, base_again = greedy_replies(tiny_lora, smollm2_tokenizer, prompts, 6, (BASE, "default", BASE))
    assert base == base_again  # a row's answer depends on its own tokens, not on its place in the batch
    assert base != adapter  # the adapter's rows run through the adapter, the base rows do not
    (alone,) = greedy_replies(tiny_lora, smollm2_tokenizer, prompts, 6, ("default",))
    assert alone == greedy_replies(tiny_lora, smollm2_tokenizer, prompts, 6, ("default",))[0]  # same inputs, same bytes
    assert tiny_lora.training  # the mode it was in is restored


def test_answer_batches_are_bounded_in_rows_and_keep_a_prompts_rows_together(
    tiny_lora, smollm2_tokenizer, monkeypatch
) -> None:
    # the key/value cache grows with a batch's rows, so a batch is bounded in rows, not prompts
    from dlm.judge.score import BASE, greedy_rows

    questions = ["What is the secret word?", "Which colour is the logo?", "Who wrote it?", "Where is it kept?"]
    prompts = [make_item(smollm2_tokenizer, "You answer briefly.", "probe", q, "x").prompt_text for q in questions]
    rows = [(p, adapter) for p in prompts for adapter in (BASE, "default", BASE)]
    whole = greedy_rows(tiny_lora, smollm2_tokenizer, rows, 3)  # one batch
    batches: list[list[str]] = []
    generate = tiny_lora.generate
    monkeypatch.setattr(
        tiny_lora,
        "generate",
        lambda **kw: (
            batches.append(smollm2_tokenizer.batch_decode(kw["input_ids"], skip_special_tokens=True)) or generate(**kw)
        ),
    )
    replies = greedy_rows(tiny_lora, smollm2_tokenizer, rows, 3, batch=4)
    assert [len(b) for b in batches] == [3, 3, 3, 3]  # a fourth row would split the next prompt's three
    assert all(len(set(b)) == 1 for b in batches)
    assert replies[0] == replies[2] and replies[0] != replies[1]  # each row through its own adapter
    assert len(replies) == len(whole) == len(rows)


def test_generation_batches_take_whole_prompts_within_rows_and_cache_positions() -> None:
    from dlm.judge.score import generation_batches

    groups = [(10, [0, 1]), (10, [2, 3]), (20, [4, 5]), (40, [6, 7]), (90, [8, 9, 10])]
    # 4 rows x (20 + 5) positions fit in 100, a fifth row would not; 2 x (40 + 5) fit; 3 x 95
    # do not: a prompt over the bound by itself goes in chunks within it, one row at least
    assert generation_batches(groups, 5, 4, 100) == [[0, 1, 2, 3], [4, 5], [6, 7], [8], [9], [10]]
    assert generation_batches([(20, [0, 1, 2, 3, 4, 5])], 5, 8, 100) == [[0, 1, 2, 3], [4, 5]]
    assert generation_batches(groups, 5, 2, None) == [[0, 1], [2, 3], [4, 5], [6, 7], [8, 9], [10]]
    assert generation_batches(groups, 5, 8, None) == [[0, 1, 2, 3, 4, 5, 6, 7], [8, 9, 10]]
    assert generation_batches([], 5, 4, 100) == []


def test_the_cache_bound_follows_the_model(tiny_lora) -> None:
    from dlm.judge.score import GENERATE_CACHE_BYTES, cache_bytes_per_position, cache_positions

    config = tiny_lora.config
    head_dim = config.hidden_size // config.num_attention_heads
    expected = config.num_hidden_layers * 2 * config.num_key_value_heads * head_dim * 4  # float32
    assert cache_bytes_per_position(tiny_lora) == expected
    assert cache_bytes_per_position(object()) is None
    assert cache_positions(tiny_lora) == GENERATE_CACHE_BYTES // expected and cache_positions(object()) is None


def test_a_wrong_shared_general_score_is_never_reported_nor_copied(tiny_lora, smollm2_tokenizer, tmp_path) -> None:
    shared = tmp_path / "models" / "general-scores.json"
    honest = json.loads(judge(tiny_lora, smollm2_tokenizer, memo_at(tmp_path / "a.json", shared=shared)))
    data = json.loads(shared.read_text())
    (key,) = data["entries"]
    data["entries"][key]["nll"] = 1.5  # a hand edit: its check no longer matches
    shared.write_text(json.dumps(data))
    other = memo_at(tmp_path / "b.json", shared=shared)
    assert json.loads(judge(tiny_lora, smollm2_tokenizer, other)) == honest  # scored afresh, not 1.5
    assert json.loads(shared.read_text())["entries"][key]["nll"] != 1.5  # and the entry repaired
    assert json.loads(other.path.read_text())["general"] is None  # never copied into a document's memo


def test_a_remembered_report_is_judged_again_for_the_keys_as_they_are_now(
    tiny_lora, smollm2_tokenizer, tmp_path
) -> None:
    memo, reports = memo_at(tmp_path / "judge-base.json"), ReportMemo(tmp_path / "reports")

    def verdict(keys: tuple[str, ...]) -> dict:
        probe = make_item(smollm2_tokenizer, "You answer briefly.", "probe", "Which colour is the logo?", "teal", keys)
        report = judge_adapter(
            tiny_lora,
            smollm2_tokenizer,
            [probe],
            GENERAL,
            adapter_version="v0001",
            seed=7,
            max_new_tokens=4,
            memo=memo,
            reports=reports,
            adapter_sha256="sha256:a",
        )
        return report.as_dict()

    verdict(("teal",))
    (stored,) = reports.folder.glob("*.json")
    data = json.loads(stored.read_text())
    data["report"]["items"][0]["replies"]["adapter"] = "It is teal."  # planted: proves the report is read
    stored.write_text(json.dumps(data))
    assert verdict(("teal",))["kinds"]["probe"]["passed"]["adapter"] == 1
    # the keys edited, the same tokens: the remembered reply is judged by the new keys
    changed = verdict(("crimson",))
    assert changed["items"][0]["replies"]["adapter"] == "It is teal." and changed["items"][0]["keys"] == ("crimson",)
    assert changed["kinds"]["probe"]["passed"]["adapter"] == 0 and not changed["items"][0]["passed"]["adapter"]


def test_general_probe_replies_of_the_base_are_remembered_under_the_probe_set(
    tiny_lora, smollm2_tokenizer, tmp_path
) -> None:
    probes = general_probe_items(smollm2_tokenizer, "You answer briefly.", probe_set())
    memo = memo_at(tmp_path / "judge-base.json")
    fresh = judge(tiny_lora, smollm2_tokenizer, probes=probes)
    written = judge(tiny_lora, smollm2_tokenizer, memo, probes=probes)  # a miss: the base answers, kept
    read = judge(tiny_lora, smollm2_tokenizer, memo, probes=probes)  # a hit: the base's replies read
    assert fresh == written == read
    report = json.loads(fresh)["general_probes"]
    assert report["set"] == "sha256:" + "1" * 64 and report["total"] == 2
    stored = json.loads(memo.path.read_text())
    assert stored["probes"] == [row["replies"]["base"] for row in report["items"]]
    # a hit reads the replies (and judges them): a right answer planted in the memo shows
    stored["probes"][0] = "The capital of France is Paris."
    memo.path.write_text(json.dumps(stored))
    planted = json.loads(judge(tiny_lora, smollm2_tokenizer, memo, probes=probes))["general_probes"]
    assert planted["items"][0]["replies"]["base"] == "The capital of France is Paris."
    assert planted["items"][0]["passed"]["base"] and planted["passed"]["base"] == report["passed"]["base"] + 1
    # another probe file (edited: another sha256) misses: the base answers afresh
    edited = general_probe_items(smollm2_tokenizer, "You answer briefly.", probe_set("sha256:" + "2" * 64))
    afresh = json.loads(judge(tiny_lora, smollm2_tokenizer, memo, probes=edited))["general_probes"]
    assert afresh["items"] == report["items"] and afresh["set"] == "sha256:" + "2" * 64
    assert json.loads(memo.path.read_text())["key"] != stored["key"]


def test_the_key_names_the_general_probe_set(smollm2_tokenizer, tmp_path) -> None:
    examples = reference_examples(smollm2_tokenizer, items(smollm2_tokenizer))
    memo = memo_at(tmp_path / "m.json")
    settings = dict(KEY_SETTINGS)
    ours = general_probe_items(smollm2_tokenizer, None, probe_set())
    keys = {
        memo.key(examples, None, **settings),
        memo.key(examples, None, **settings, probes=ours.key(smollm2_tokenizer)),
        # the file's bytes changed (same questions): another key
        memo.key(
            examples,
            None,
            **settings,
            probes=general_probe_items(smollm2_tokenizer, None, probe_set("sha256:" + "3" * 64)).key(smollm2_tokenizer),
        ),
        # the same file under another system prompt: other prompt ids, another key
        memo.key(
            examples,
            None,
            **settings,
            probes=general_probe_items(smollm2_tokenizer, "Be brief.", probe_set()).key(smollm2_tokenizer),
        ),
    }
    assert len(keys) == 4
    assert memo.key(examples, None, **settings, probes=ours.key(smollm2_tokenizer)) in keys  # stable
