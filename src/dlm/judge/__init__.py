"""Evaluation of adapters: does the adapter know its document, and what did it break?

    dlm.judge.match    the pass rule: keys, or the reference's salient strings
    dlm.judge.score    greedy answers and reference log-likelihood of items on one model
    dlm.judge.null     the null adapter (random LoRA with the trained per-module norms)
    dlm.judge.guard    the general-ability guard (NLL change on a fixed general set)
    dlm.judge.general  the general set itself (passages written for dlm; package data)
    dlm.judge.report   one evaluation: base vs adapter vs null, the `EvalReport`
    dlm.judge.memo     the base model's side of an evaluation, remembered under its inputs
    dlm.judge.estimate what judging many questions costs, said before it starts

An engine: it takes models, tokenizers and items, never documents.
"""
