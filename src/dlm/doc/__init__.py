"""The `.dlm` document format: YAML frontmatter plus a markdown body of sections.

See `docs/format.md` for the reference. `parse_document`/`load_document` read it,
`serialize_document` writes it back, `new_document` is what `dlm init` writes.
"""

from dlm.doc.model import (
    Document,
    InstructionSection,
    ProbeSection,
    ProseSection,
    QAPair,
    Section,
    document_sha256,
)
from dlm.doc.parser import field_where, load_document, parse_document
from dlm.doc.problems import DocParseError, DocProblem
from dlm.doc.schema import (
    DEFAULT_BASE_MODEL,
    SUPPORTED_DLM_VERSION,
    CacheConfig,
    EvalConfig,
    Frontmatter,
    ServeConfig,
    SourceDirective,
    TokenizerCacheSettings,
    TrainingConfig,
)
from dlm.doc.serialize import DEFAULT_SOURCE_EXCLUDES, new_document, serialize_document

__all__ = [
    "DEFAULT_BASE_MODEL",
    "DEFAULT_SOURCE_EXCLUDES",
    "SUPPORTED_DLM_VERSION",
    "CacheConfig",
    "EvalConfig",
    "DocParseError",
    "DocProblem",
    "Document",
    "Frontmatter",
    "InstructionSection",
    "ProbeSection",
    "ProseSection",
    "QAPair",
    "Section",
    "ServeConfig",
    "SourceDirective",
    "TokenizerCacheSettings",
    "TrainingConfig",
    "document_sha256",
    "field_where",
    "load_document",
    "new_document",
    "parse_document",
    "serialize_document",
]
