"""Facts drawn from every part of a document for `training.synth`: pure functions of
`(relpath, text)` that give `dlm.rows.facts.model.Fact`s, phrased and split into
training pairs and probes by `dlm.rows.synth`.

    dlm.rows.facts.model     Fact, Pair, the fact kinds, strong probe keys
    dlm.rows.facts.phrasing  each kind's phrasings, a fact's probe keys
    dlm.rows.facts.files     which reader takes a file (by its path), and dispatch
    dlm.rows.facts.prose     prose (Markdown, text, the document's sections) -> statements
    dlm.rows.facts.config    YAML, TOML, JSON, INI -> a key's dotted path and its value
    dlm.rows.facts.code_ts   Go, Rust, JavaScript, TypeScript, Java (tree-sitter) -> definitions
    dlm.rows.facts.code_c    C, C++ (tree-sitter) -> definitions
    dlm.rows.synth           Python (`ast`) -> definitions; facts -> pairs and probes

This `__init__` imports nothing, so `dlm.rows.synth` can import the model without a cycle.
"""
