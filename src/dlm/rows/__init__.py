"""A document's rows: their types, the source walk, reading files into row text, and
building the rows of one run.

    dlm.rows.types   TextRow, FileRow, RowSet, RowSpec (what the tokenize seam takes)
    dlm.rows.walk    `training.sources` directives -> unread FileRows
    dlm.rows.read    one source file -> row text (binary/lossy/too-large rules)
    dlm.rows.build   a Document -> the RowSet of one run (and its probes)
    dlm.rows.synth   (relpath, Python text) -> facts -> Q/A pairs and probes
    dlm.rows.facts   facts of prose, config files and other languages (its __init__ lists them)
    dlm.rows.synthmemo  the facts of a run's files, remembered by content

This `__init__` imports nothing, so engines that only need the types (the section
cache) do not load the document model.
"""
