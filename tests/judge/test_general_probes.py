"""The general probes (`dlm.judge.forgetting`, `dlm.judge.general.load_general_probes`):
the shipped set is well formed and the real base answers every probe of it; a probe the
base passes and the adapter fails is named, counted and warned; the report's JSON shape."""

from __future__ import annotations

import hashlib
import json
from pathlib import Path

import pytest

from dlm.cli.eval_cmd import print_report, report_lines
from dlm.judge.forgetting import (
    FORGOTTEN_P,
    base_check,
    fewer_passes_p,
    forgotten_warning,
    general_probe_items,
    probe_results,
    replies_nll,
    sample_flips,
)
from dlm.judge.general import GeneralProbe, GeneralProbeSet, load_general_probes, parse_general_probes
from dlm.judge.report import EvalReport, rejudged

PROBES_JSON = Path(__file__).resolve().parents[2] / "src" / "dlm" / "judge" / "general" / "probes.json"

SMALL = GeneralProbeSet(
    (
        GeneralProbe("capital-france", "What is the capital of France?", ("Paris",)),
        GeneralProbe("code-reverse-string", "Write a Python function that reverses a string.", ("def", "[::-1]")),
        GeneralProbe("unit-days-in-week", "How many days are in a week?", ("7",)),
    ),
    "sha256:" + "0" * 64,
)


def test_the_shipped_set_is_sorted_keyed_and_named_by_its_bytes() -> None:
    probe_set = load_general_probes()
    ids = [p.id for p in probe_set.probes]
    assert 12 <= len(ids) <= 16 and ids == sorted(set(ids))
    assert all(p.question.strip() and p.keys for p in probe_set.probes)
    assert probe_set.sha256 == "sha256:" + hashlib.sha256(PROBES_JSON.read_bytes()).hexdigest()
    # an edit to the file is a new set: another sha256, so remembered replies are not reused
    edited = PROBES_JSON.read_bytes().replace(b'"Paris"', b'"Paris", "France"')
    assert parse_general_probes(edited).sha256 != probe_set.sha256


@pytest.mark.parametrize(
    ("text", "problem"),
    [
        ("{not json", "not a general probe file"),
        ('{"probes": [{"id": "a", "question": "Q?", "keys": []}]}', "probe 'a' has no keys"),
        ('{"probes": [{"id": "Bad Id", "question": "Q?", "keys": ["k"]}]}', "is not lowercase words"),
        (
            '{"probes": [{"id": "b", "question": "Q?", "keys": ["k"]}, {"id": "a", "question": "Q?", "keys": ["k"]}]}',
            "not unique and sorted",
        ),
    ],
)
def test_a_damaged_probe_file_is_refused_naming_the_file_and_the_problem(text: str, problem: str) -> None:
    with pytest.raises(ValueError, match=problem) as caught:
        parse_general_probes(text.encode(), "/x/probes.json")
    assert str(caught.value).startswith("/x/probes.json: ")


def test_a_forgotten_probe_is_named_counted_and_warned(smollm2_tokenizer) -> None:
    probes = general_probe_items(smollm2_tokenizer, "You answer briefly.", SMALL)
    base = ["The capital of France is Paris.", "def rev(s):\n    return s[::-1]", "A week has about eight days."]
    adapter = ["Paris.", "See reverse.py in the repository.", "7 days."]
    results = probe_results(probes, base, adapter)
    # the base fails the week: skipped, and the adapter's right answer to it is not counted
    assert results["passed"] == {"base": 2, "adapter": 1} and results["total"] == 3
    assert results["forgotten"] == ["code-reverse-string"] and results["skipped"] == ["unit-days-in-week"]
    warning = forgotten_warning(results)
    assert warning is not None and "fails 1 of the 2 general questions" in warning
    assert "code-reverse-string ('Write a Python function that reverses a string.')" in warning
    report = EvalReport("v0001", {}, [], None, general_probes=results, warnings=[warning])
    lines = report_lines(report.as_dict())
    assert (
        "  general probes: passed base 2/3 -> adapter 1/3; [red]forgotten[/]: code-reverse-string; "
        "skipped (the base fails them): unit-days-in-week"
    ) in lines
    # nothing forgotten, no warning
    assert forgotten_warning(probe_results(probes, base, base)) is None


def test_the_report_json_holds_the_probes_and_a_remembered_one_is_judged_again(smollm2_tokenizer, capsys) -> None:
    probes = general_probe_items(smollm2_tokenizer, None, SMALL)
    replies = ["Paris.", "def r(s): return s[::-1]", "7."]
    report = EvalReport("v0001", {}, [], None, general_probes=probe_results(probes, replies, replies))
    data = json.loads(json.dumps(report.as_dict()))
    shape = data["general_probes"]
    assert set(shape) == {"set", "total", "passed", "flipped", "forgotten", "samples", "skipped", "items"}
    assert shape["set"] == SMALL.sha256 and shape["forgotten"] == shape["flipped"] == [] and shape["skipped"] == []
    assert shape["items"][1] == {
        "id": "code-reverse-string",
        "question": "Write a Python function that reverses a string.",
        "keys": ["def", "[::-1]"],
        "replies": {"base": replies[1], "adapter": replies[1]},
        "passed": {"base": True, "adapter": True},
    }
    assert EvalReport.from_dict(data) == report
    # a remembered report whose adapter reply no longer passes (say, a stricter rule) is
    # judged again on read: the probe is forgotten and warned
    data["general_probes"]["items"][0]["replies"]["adapter"] = "Not Paris."
    again = rejudged(EvalReport.from_dict(data), [], probes)
    assert again.general_probes is not None and again.general_probes["forgotten"] == ["capital-france"]
    assert any(w.startswith("general probes:") for w in again.warnings)
    with pytest.raises(ValueError, match="another set"):
        rejudged(EvalReport.from_dict(data), [], general_probe_items(smollm2_tokenizer, None, load_general_probes()))
    print_report(again, items=True)
    out = capsys.readouterr()
    assert "general probes: passed base 3/3 -> adapter 2/3" in out.out and "Not Paris." in out.out
    assert "general probes: the adapter fails 1 of the 3" in out.err


@pytest.mark.parametrize(
    ("base", "adapter", "samples", "p"),
    [
        (1, 0, 1, 1 / 2),  # one pass between two draws: either side holds it as likely
        (2, 0, 2, 1 / 6),  # both passes on the base's side: 1 of C(4, 2) ways
        (4, 0, 4, 1 / 70),
        (3, 0, 4, 4 / 56),  # C(4, 3) of C(8, 3): not yet below 0.05
        (12, 6, 16, 0.0366),
        (8, 8, 16, 0.6378),
        (0, 0, 16, 1.0),  # nobody passes: nothing to tell
        (5, 9, 16, 0.9634),
    ],
)
def test_fewer_passes_is_fishers_one_sided_exact_test(base: int, adapter: int, samples: int, p: float) -> None:
    # the larger tables' values are scipy.stats.fisher_exact's, alternative="greater", on
    # [[base passes, base fails], [adapter passes, adapter fails]]
    assert fewer_passes_p(base, adapter, samples) == pytest.approx(p, abs=1e-4)


def test_fewer_passes_refuses_counts_past_the_samples() -> None:
    with pytest.raises(ValueError, match="of 4 samples"):
        fewer_passes_p(5, 0, 4)


def test_a_flip_is_forgotten_only_when_the_drawn_replies_say_so(smollm2_tokenizer, capsys) -> None:
    probes = general_probe_items(smollm2_tokenizer, None, SMALL)
    base = ["Paris.", "def r(s): return s[::-1]", "7 days."]
    adapter = ["Lyon.", "See reverse.py.", "7 days."]  # two flips
    drawn = {
        "capital-france": {"base": ["Paris."] * 12 + ["Lyon."] * 4, "adapter": ["Paris."] + ["Lyon."] * 15},
        "code-reverse-string": {
            "base": ["def r(s): s[::-1]"] * 4 + ["no"] * 12,
            "adapter": ["def r(s): s[::-1]"] * 4 + ["no"] * 12,
        },
    }
    results = probe_results(probes, base, adapter, drawn)
    assert results["flipped"] == ["capital-france", "code-reverse-string"] and results["samples"] == 16
    # 12 of 16 against 1 of 16 is forgotten; 4 against 4 is a greedy reply that only tipped
    assert results["forgotten"] == ["capital-france"]
    france, code = results["items"][0]["sampled"], results["items"][1]["sampled"]
    assert france["passed"] == {"base": 12, "adapter": 1} and france["p"] < FORGOTTEN_P
    assert code["passed"] == {"base": 4, "adapter": 4} and code["p"] > 0.5
    assert "sampled" not in results["items"][2]  # not a flip: nothing drawn
    warning = forgotten_warning(results)
    assert warning is not None and "fails 1 of the 3" in warning and "fewer of 16 drawn replies" in warning
    report = EvalReport("v0001", {}, [], None, general_probes=results, warnings=[warning])
    assert (
        "  general probes: passed base 3/3 -> adapter 1/3; [red]forgotten[/]: capital-france (drawn 12/16 -> 1/16); "
        "not confirmed by drawn replies: code-reverse-string (drawn 4/16 -> 4/16)"
    ) in report_lines(report.as_dict())
    # remembered and judged again: the drawn replies are judged again too
    data = json.loads(json.dumps(report.as_dict()))
    again = rejudged(EvalReport.from_dict(data), [], probes)
    assert again.general_probes == results
    # without drawn replies (general_samples 0) every flip is forgotten
    assert probe_results(probes, base, adapter)["forgotten"] == ["capital-france", "code-reverse-string"]
    # no flip confirmed: nothing forgotten, no warning
    tipped = {**drawn, "capital-france": {"base": ["Paris."] * 3 + ["x"] * 13, "adapter": ["Paris."] * 2 + ["x"] * 14}}
    assert forgotten_warning(probe_results(probes, base, adapter, tipped)) is None


@pytest.mark.integration
def test_drawn_replies_are_seeded_and_tell_a_wrecked_adapter_from_the_base(smollm2_ref, smollm2_tokenizer) -> None:
    import torch
    from peft import LoraConfig, get_peft_model

    from dlm.models import load_model

    model = load_model(smollm2_ref, device=torch.device("cpu"))
    config = LoraConfig(r=4, lora_alpha=8, target_modules=["gate_proj", "up_proj", "down_proj"])
    peft = get_peft_model(model, config, adapter_name="trained")
    one = GeneralProbeSet((GeneralProbe("capital-japan", "What is the capital of Japan?", ("Tokyo",)),), SMALL.sha256)
    probes = general_probe_items(smollm2_tokenizer, None, one)
    torch.manual_seed(5)
    state = torch.random.get_rng_state()
    first = sample_flips(peft, smollm2_tokenizer, probes, ["capital-japan"], "trained", 8, 16, seed=1)
    assert torch.equal(torch.random.get_rng_state(), state)  # the caller's generator is left as it was
    assert sample_flips(peft, smollm2_tokenizer, probes, ["capital-japan"], "trained", 8, 16, seed=1) == first
    assert sample_flips(peft, smollm2_tokenizer, probes, ["capital-japan"], "trained", 8, 16, seed=2) != first
    assert len(set(first["capital-japan"]["base"])) > 1  # drawn, not greedy: the replies differ
    with torch.no_grad():  # an adapter that wrecks every MLP
        for name, param in peft.named_parameters():
            if "lora_B" in name:
                param.normal_(0.0, 1.0)
    wrecked = sample_flips(peft, smollm2_tokenizer, probes, ["capital-japan"], "trained", 8, 16, seed=1)
    results = probe_results(probes, ["Tokyo."], ["Kyoto."], wrecked)
    sampled = results["items"][0]["sampled"]
    assert sampled["passed"]["adapter"] == 0 and sampled["passed"]["base"] >= 5
    assert results["forgotten"] == ["capital-japan"]


def test_the_base_replies_nll_is_zero_change_for_an_untrained_adapter_and_rises_for_a_wrecked_one(
    smollm2_ref, smollm2_tokenizer, capsys
) -> None:
    import torch
    from peft import LoraConfig, get_peft_model

    from dlm.models import load_model

    model = load_model(smollm2_ref, device=torch.device("cpu"))
    peft = get_peft_model(model, LoraConfig(r=4, lora_alpha=8, target_modules=["up_proj"]), adapter_name="trained")
    probes = general_probe_items(smollm2_tokenizer, None, SMALL)
    with peft.disable_adapter():
        base_replies = [row["reply"] for row in base_check(peft, smollm2_tokenizer, probes, 16)]
    fresh = replies_nll(peft, smollm2_tokenizer, probes, base_replies, "trained", 0)
    # LoRA's B starts at 0: the adapter is the base, bit for bit
    assert fresh is not None and fresh["change_pct"] == 0.0 and fresh["base_nll"] == fresh["adapter_nll"]
    assert 0.0 < fresh["base_nll"] < 1.0  # greedy replies are the base's likeliest tokens
    assert fresh["tokens"] == sum(
        len(smollm2_tokenizer(r, add_special_tokens=False)["input_ids"]) for r in base_replies
    )
    with torch.no_grad():
        for name, param in peft.named_parameters():
            if "lora_B" in name:
                param.normal_(0.0, 0.5, generator=torch.Generator().manual_seed(3))
    drifted = replies_nll(peft, smollm2_tokenizer, probes, base_replies, "trained", 0)
    assert drifted is not None and drifted["base_nll"] == fresh["base_nll"] and drifted["change_pct"] > 50.0
    assert peft.active_adapter == "trained"
    # kept in the report's JSON, through a remembered report judged again, and printed
    results = probe_results(probes, base_replies, base_replies, reply_nll=drifted)
    data = EvalReport("v0001", {}, [], None, general_probes=results).as_dict()
    again = rejudged(EvalReport.from_dict(json.loads(json.dumps(data))), [], probes)
    assert again.general_probes is not None and again.general_probes["reply_nll"] == drifted
    print_report(again)
    assert f"({drifted['change_pct']:+.1f}%)" in capsys.readouterr().out
    assert replies_nll(peft, smollm2_tokenizer, probes, ["", "", ""], "trained", 0) is None


@pytest.mark.integration
def test_the_real_base_answers_every_shipped_probe(smollm2_ref, smollm2_tokenizer) -> None:
    # what scripts/check-general-probes.py checks: greedy, chat template, no system prompt,
    # the report's default reply length
    from dlm.doc.schema import EvalConfig
    from dlm.models import load_model

    probes = general_probe_items(smollm2_tokenizer, None, load_general_probes())
    max_new_tokens = EvalConfig.model_fields["max_new_tokens"].default
    results = base_check(load_model(smollm2_ref), smollm2_tokenizer, probes, max_new_tokens)
    assert [r["id"] for r in results if not r["passed"]] == [], results


@pytest.mark.parametrize(
    ("files", "said"),
    [
        ({"probes.json": '{"version": 1, "probes": [}'}, "not a general probe file"),
        ({"probes.json": '{"version": 1, "probes": [{"id": "a", "question": "q", "keys": []}]}'}, "has no keys"),
        ({}, "missing"),
    ],
)
def test_a_damaged_install_is_one_dlm_error_naming_the_file_and_the_way_out(tmp_path, monkeypatch, files, said):
    import dlm.judge.general as general
    from dlm.errors import DlmError, InstallError

    for name, text in files.items():
        (tmp_path / name).write_text(text)
    monkeypatch.setattr(general.resources, "files", lambda package: tmp_path)
    with pytest.raises(InstallError) as err:
        load_general_probes()
    message = str(err.value)
    assert isinstance(err.value, DlmError) and err.value.exit_code == 1  # the CLI prints it, no traceback
    assert str(tmp_path / "probes.json") in message and said in message and "reinstall dlm" in message
    assert "\n" not in message
    with pytest.raises(InstallError, match="no passages in .*reinstall dlm"):
        general.load_general_set()  # the guard's passages, from the same (empty) folder
