"""Definitions in C and C++ through tree-sitter (`dlm.rows.facts.code_c`)."""

from __future__ import annotations

from dlm.rows.facts.files import parsed_facts, source_kind
from dlm.rows.facts.phrasing import phrase, probe_keys

HEADER = """#ifndef QUILL_H
#define QUILL_H

#include <stddef.h>

/* How many times a frame is resent before the link is dropped. */
#define QUILL_MAX_RESENDS 7
#define QUILL_NAME "quill"   /* the name in logs */
#define QUILL_TIMEOUT_MS (2500)
#define QUILL_MIN(a, b) ((a) < (b) ? (a) : (b))
#define QUILL_FLAGS (QUILL_A | QUILL_B)

/** A link to one peer. */
typedef struct quill_link {
    int fd;
} quill_link;

/**
 * quill_open() - Open a link to a peer.
 * @host: the peer's host name
 */
quill_link *quill_open(const char *host, int port) __attribute__((nonnull));

int quill_close(void);

static const int QUILL_WINDOW = -32;
extern const char *quill_version;
#endif
"""

SOURCE = """#include "quill.h"

static int helper(int x) { return x; }

// Sends one frame and waits for the ack.
int quill_send(quill_link *link, const void *buf, size_t len)
{
    return helper((int)len);
}

const unsigned QUILL_PORT = 5150u;  // the port peers dial
"""

CPP = """#include <string>
namespace quill {

constexpr int kMaxPeers = 64;

/// A pool of links, one per peer.
class Pool {
  int hidden_;
 public:
  /// Opens a link.
  int Open(const std::string& host, int port);
  static constexpr double kGrowth = 1.5;
 private:
  int Hidden(int x);
};

template <typename T>
struct Box { T value; void Put(T v); };

int Pool::Open(const std::string& host, int port) { return port; }

}  // namespace quill
"""


def facts(relpath: str, text: str) -> list[tuple[str, int, str, str, str, str]]:
    got = parsed_facts(relpath, text)
    assert isinstance(got, list), got
    return [(f.kind, f.line, f.name, f.what, f.answer, f.subject) for f in got]


def test_header_macros_types_and_prototypes():
    h = "quill/quill.h"
    assert facts(h, HEADER) == [
        ("where", 7, "QUILL_MAX_RESENDS", "macro", h, "QUILL_MAX_RESENDS"),
        (
            "purpose",
            7,
            "QUILL_MAX_RESENDS",
            "macro",
            "How many times a frame is resent before the link is dropped.",
            "QUILL_MAX_RESENDS",
        ),
        ("value", 7, "QUILL_MAX_RESENDS", "constant", "7", "QUILL_MAX_RESENDS"),
        ("where", 8, "QUILL_NAME", "macro", h, "QUILL_NAME"),
        ("purpose", 8, "QUILL_NAME", "macro", "The name in logs.", "QUILL_NAME"),  # the comment after it
        ("value", 8, "QUILL_NAME", "constant", '"quill"', "QUILL_NAME"),
        ("where", 9, "QUILL_TIMEOUT_MS", "macro", h, "QUILL_TIMEOUT_MS"),
        ("value", 9, "QUILL_TIMEOUT_MS", "constant", "2500", "QUILL_TIMEOUT_MS"),  # parentheses off
        # the include guard, a function-like macro and an expression give nothing
        ("where", 14, "quill_link", "type", h, "quill_link"),
        ("purpose", 14, "quill_link", "type", "A link to one peer.", "quill_link"),
        # a prototype: no `where` (a function is defined where its body is); kernel-doc's
        # "quill_open() - " and the attribute after the parameters left out
        ("purpose", 22, "quill_open", "function", "Open a link to a peer.", "quill_open"),
        ("signature", 22, "quill_open", "function", "quill_link *quill_open(const char *host, int port)", "quill_open"),
        ("where", 26, "QUILL_WINDOW", "constant", h, "QUILL_WINDOW"),  # `(void)` tells nothing: no signature
        ("value", 26, "QUILL_WINDOW", "constant", "-32", "QUILL_WINDOW"),
    ]


def test_source_functions_without_static_and_constants():
    c = "quill/quill.c"
    assert facts(c, SOURCE) == [
        ("where", 6, "quill_send", "function", c, "quill_send"),
        ("purpose", 6, "quill_send", "function", "Sends one frame and waits for the ack.", "quill_send"),
        (
            "signature",
            6,
            "quill_send",
            "function",
            "int quill_send(quill_link *link, const void *buf, size_t len)",
            "quill_send",
        ),
        ("where", 11, "QUILL_PORT", "constant", c, "QUILL_PORT"),
        ("purpose", 11, "QUILL_PORT", "constant", "The port peers dial.", "QUILL_PORT"),
        ("value", 11, "QUILL_PORT", "constant", "5150u", "QUILL_PORT"),
    ]


def test_cpp_namespaces_public_members_and_templates():
    cc = "src/pool.cpp"
    assert facts(cc, CPP) == [
        ("where", 4, "kMaxPeers", "constant", cc, "kMaxPeers"),
        ("value", 4, "kMaxPeers", "constant", "64", "kMaxPeers"),
        ("where", 7, "Pool", "class", cc, "Pool"),
        ("purpose", 7, "Pool", "class", "A pool of links, one per peer.", "Pool"),
        ("purpose", 11, "Pool::Open", "method", "Opens a link.", "Pool"),
        ("signature", 11, "Pool::Open", "method", "int Open(const std::string& host, int port)", "Pool"),
        ("value", 12, "Pool::kGrowth", "constant", "1.5", "Pool"),
        # `Hidden` is private; `Pool::Open` defined outside the class is read in it
        ("where", 17, "Box", "struct", cc, "Box"),
        ("signature", 18, "Box::Put", "method", "void Put(T v)", "Box"),
    ]


def test_cpp_pairs_name_the_parameters_and_the_gloss():
    got = parsed_facts("src/pool.cpp", CPP)
    assert isinstance(got, list)
    signature = next(f for f in got if f.kind == "signature" and f.name == "Pool::Open")
    assert probe_keys(signature) == ("host", "port")  # not `std` of `std::string`
    header = parsed_facts("quill/quill.h", HEADER)
    assert isinstance(header, list)
    value = next(f for f in header if f.kind == "value" and f.name == "QUILL_MAX_RESENDS")
    gloss = next(f.answer for f in header if f.kind == "purpose" and f.name == "QUILL_MAX_RESENDS")
    assert phrase(value, 2, gloss)[1].question == "How many times is a frame resent before the link is dropped?"


def test_a_header_with_macros_c_cannot_parse_keeps_its_clean_definitions():
    text = """#include <features.h>
__BEGIN_DECLS
/* Size of the ring, in frames. */
#define RING_FRAMES 256
extern int ring_push (int __fd, const void *__buf) __THROW __nonnull ((2));
__END_DECLS
"""
    got = facts("ring.h", text)
    assert ("value", 4, "RING_FRAMES", "constant", "256", "RING_FRAMES") in got
    assert ("purpose", 4, "RING_FRAMES", "macro", "Size of the ring, in frames.", "RING_FRAMES") in got


def test_a_cpp_header_named_h_is_read_as_cpp():
    text = "/// A ring of frames.\nclass Ring {\n public:\n  int Push(int frame);\n};\n"
    assert source_kind("ring.h") == "c"
    assert facts("ring.h", text) == [
        ("where", 2, "Ring", "class", "ring.h", "Ring"),
        ("purpose", 2, "Ring", "class", "A ring of frames.", "Ring"),
        ("signature", 4, "Ring::Push", "method", "int Push(int frame)", "Ring"),
    ]


def test_a_file_with_nothing_readable_says_where_it_fails():
    assert parsed_facts("bad.c", "int main( {\n  return ;\n") == "syntax error at line 1"


def test_kinds_by_suffix():
    assert [source_kind(p) for p in ("a.c", "a.h", "a.cc", "a.cpp", "a.cxx", "a.hpp", "a.hh")] == [
        "c",
        "c",
        "cpp",
        "cpp",
        "cpp",
        "cpp",
        "cpp",
    ]


def test_a_plural_gloss_of_a_number_asks_how_many():
    from dlm.rows.facts.model import Fact

    slots = Fact("value", "bh.h", 3, "BH_RING_SLOTS", "constant", "4096", "BH_RING_SLOTS")
    gloss = "Readings the ring buffer holds before the oldest is overwritten."
    assert (
        phrase(slots, 2, gloss)[1].question
        == "How many readings does the ring buffer hold before the oldest is overwritten?"
    )
    named = Fact("value", "bh.h", 4, "BH_DEVICES", "constant", '"/dev/ttyAMA0"', "BH_DEVICES")
    assert not phrase(named, 2, "Devices tried first.")[1].question.startswith("How many")  # a string counts nothing


def test_a_licence_header_right_above_a_definition_is_no_doc_comment():
    text = "/*\n * Copyright (c) 2024 Brackenhold authors\n */\n#define BH_PORT 6100\n"
    assert facts("bh.h", text) == [
        ("where", 4, "BH_PORT", "macro", "bh.h", "BH_PORT"),
        ("value", 4, "BH_PORT", "constant", "6100", "BH_PORT"),
    ]
