"""Definitions in Go, Rust, TypeScript and Java through tree-sitter (`dlm.rows.facts.code_ts`)."""

from __future__ import annotations

from dlm.rows.facts.files import parsed_facts
from dlm.rows.facts.phrasing import phrase, probe_keys

GO = """package retry

// MaxRetries is how many times Do tries a call.
const MaxRetries = 5

const (
	// DefaultHost is the host dialled when none is given.
	DefaultHost = "localhost"
	hidden = 2
)

// Do calls fn until it succeeds or the attempts run out. More text.
func Do(ctx context.Context, fn func() error) (int, error) { return 0, nil }

// Start begins serving on addr.
func (s *Server) Start(addr string) error { return nil }

func helper() {}
"""


def facts(relpath: str, text: str) -> list[tuple[str, int, str, str, str, str]]:
    got = parsed_facts(relpath, text)
    assert isinstance(got, list), got
    return [(f.kind, f.line, f.name, f.what, f.answer, f.subject) for f in got]


def test_go_constants_and_exported_functions_with_their_doc_comments():
    assert facts("retry/retry.go", GO) == [
        ("where", 4, "MaxRetries", "constant", "retry/retry.go", "MaxRetries"),
        ("purpose", 4, "MaxRetries", "constant", "MaxRetries is how many times Do tries a call.", "MaxRetries"),
        ("value", 4, "MaxRetries", "constant", "5", "MaxRetries"),
        ("where", 8, "DefaultHost", "constant", "retry/retry.go", "DefaultHost"),
        ("purpose", 8, "DefaultHost", "constant", "DefaultHost is the host dialled when none is given.", "DefaultHost"),
        ("value", 8, "DefaultHost", "constant", '"localhost"', "DefaultHost"),
        ("where", 13, "Do", "function", "retry/retry.go", "Do"),
        ("purpose", 13, "Do", "function", "Do calls fn until it succeeds or the attempts run out.", "Do"),
        ("signature", 13, "Do", "function", "Do(ctx context.Context, fn func() error) (int, error)", "Do"),
        ("purpose", 16, "Server.Start", "method", "Start begins serving on addr.", "Server"),
        ("signature", 16, "Server.Start", "method", "Start(addr string) error", "Server"),
    ]


def test_go_pairs_and_probe_keys():
    got = parsed_facts("retry/retry.go", GO)
    assert isinstance(got, list)
    value = next(f for f in got if f.kind == "value" and f.name == "MaxRetries")
    assert phrase(value, 4)[3].answer == "`MaxRetries = 5`."
    # asked by its doc comment, the name it opens with left out (Go's convention)
    gloss = next(f.answer for f in got if f.kind == "purpose" and f.name == "MaxRetries")
    assert [(p.question, p.answer) for p in phrase(value, 3, gloss)[1:]] == [
        ("How many times Do tries a call?", "`5` (`MaxRetries` in `retry/retry.go`)."),
        (
            "What do you know about `MaxRetries`?",
            "`MaxRetries` in `retry/retry.go` is `5`: how many times Do tries a call.",
        ),
    ]
    assert phrase(value, 2)[1].question == "What is the max retries?"  # no gloss: the name's words
    # a gloss that is a clause about "this many" is asked as how many, not "What is the ...?"
    counted = phrase(value, 2, "Deliveries are retried this many times before they are dropped.")[1]
    assert counted.question == "How many times are deliveries retried before they are dropped?"
    # an aside after a semicolon is left out; "this large" is asked as how large; a gloss
    # that is a clause ("Weights are stored ...") asks nothing as "What is the ...?": the name's words
    asides = phrase(value, 2, "The heaviest weight a scale reports, in decagrams; anything above is a fault.")
    assert asides[1].question == "What is the heaviest weight a scale reports, in decagrams?"
    measured = phrase(value, 2, "A fall in weight at least this large counts as a swarm.")[1]
    assert measured.question == "A fall in weight at least how large counts as a swarm?"
    clause = phrase(value, 4, "Weights are stored as whole decagrams; this is the unit's symbol.")
    assert clause[1].question == "What is the max retries?"
    assert clause[2].answer == "`MaxRetries` in `retry/retry.go` is `5`: weights are stored as whole decagrams."
    assert probe_keys(value) == ()  # "5": one character, any reply may hold it
    host = next(f for f in got if f.kind == "value" and f.name == "DefaultHost")
    assert probe_keys(host) == ("localhost",)
    signature = next(f for f in got if f.kind == "signature" and f.name == "Do")
    assert probe_keys(signature) == ("ctx", "fn")  # Go writes the name first


def test_go_test_files_are_not_read():
    assert parsed_facts("retry/retry_test.go", GO) == []


RUST = """/// The port the daemon listens on.
pub const PORT: u16 = 8080;
const SECRET: u8 = 1;
/// Retry a call `n` times.
#[inline]
pub fn retry(count: u32, delay: Duration) -> Result<(), Error> { Ok(()) }
pub(crate) fn internal() {}
"""


def test_rust_pub_items_only():
    assert facts("src/lib.rs", RUST) == [
        ("where", 2, "PORT", "constant", "src/lib.rs", "PORT"),
        ("purpose", 2, "PORT", "constant", "The port the daemon listens on.", "PORT"),
        ("value", 2, "PORT", "constant", "8080", "PORT"),
        ("where", 6, "retry", "function", "src/lib.rs", "retry"),
        ("purpose", 6, "retry", "function", "Retry a call `n` times.", "retry"),
        ("signature", 6, "retry", "function", "retry(count: u32, delay: Duration) -> Result<(), Error>", "retry"),
    ]
    got = parsed_facts("src/lib.rs", RUST)
    assert isinstance(got, list) and probe_keys(got[5]) == ("count", "delay")


TS = """/** The most attempts a call gets. */
export const MAX_RETRIES = 5;
const hidden = 3;
/**
 * Retry a call until it succeeds.
 * @param times how often
 */
export function retry(times: number, delay = 100): Promise<void> { return run(); }
export const add = (left: number, right: number): number => left + right;
"""


def test_typescript_exports():
    assert facts("src/retry.ts", TS) == [
        ("where", 2, "MAX_RETRIES", "constant", "src/retry.ts", "MAX_RETRIES"),
        ("purpose", 2, "MAX_RETRIES", "constant", "The most attempts a call gets.", "MAX_RETRIES"),
        ("value", 2, "MAX_RETRIES", "constant", "5", "MAX_RETRIES"),
        ("where", 8, "retry", "function", "src/retry.ts", "retry"),
        ("purpose", 8, "retry", "function", "Retry a call until it succeeds.", "retry"),
        ("signature", 8, "retry", "function", "retry(times: number, delay = 100): Promise<void>", "retry"),
        ("where", 9, "add", "function", "src/retry.ts", "add"),
        ("signature", 9, "add", "function", "add(left: number, right: number): number", "add"),
    ]
    assert parsed_facts("src/retry.test.ts", TS) == [] and parsed_facts("types/retry.d.ts", TS) == []
    assert facts("src/retry.js", "export const PORT = 8080;\n") == [
        ("where", 1, "PORT", "constant", "src/retry.js", "PORT"),
        ("value", 1, "PORT", "constant", "8080", "PORT"),
    ]


def test_java_public_members():
    java = (
        "package x;\n/** A ferry client. */\npublic class Client {\n"
        "    public static final int PORT = 8080;\n    /** Connect to a host. */\n"
        "    public void connect(String host, int port) {}\n    private void hidden() {}\n}\n"
    )
    assert facts("src/Client.java", java) == [
        ("where", 3, "Client", "class", "src/Client.java", "Client"),
        ("purpose", 3, "Client", "class", "A ferry client.", "Client"),
        ("value", 4, "Client.PORT", "constant", "8080", "Client"),
        ("purpose", 6, "Client.connect", "method", "Connect to a host.", "Client"),
        ("signature", 6, "Client.connect", "method", "void connect(String host, int port)", "Client"),
    ]


def test_a_file_that_fails_to_parse_says_where():
    assert parsed_facts("cmd/main.go", "package main\n\nfunc main( {\n") == "syntax error at line 3"
    assert parsed_facts("src/lib.rs", "pub const X: u8 = ;\n") == "syntax error at line 1"


COMMONJS = """'use strict';

// Days a book may be borrowed before it is overdue.
const LOAN_DAYS = 21;
const LOCAL_ONLY = 4;

/** The overdue loans of one morning. */
class ReminderQueue {}

/** The fine of one loan, in pence. */
function fineFor(loan) { return 0; }

function helper() {}

module.exports = { ReminderQueue, LOAN_DAYS, fine: fineFor };
exports.SENT = SENT;
"""


def test_commonjs_exports_name_what_is_public():
    """`module.exports = { ... }` makes its names public as `export` does: their
    definitions, doc comments and values are read; what it does not name stays out."""
    got = facts("lib/queue.js", COMMONJS)
    assert ("value", 4, "LOAN_DAYS", "constant", "21", "LOAN_DAYS") in got
    assert ("where", 8, "ReminderQueue", "class", "lib/queue.js", "ReminderQueue") in got
    assert ("purpose", 11, "fineFor", "function", "The fine of one loan, in pence.", "fineFor") in got
    assert ("signature", 11, "fineFor", "function", "fineFor(loan)", "fineFor") in got
    assert {name for _, _, name, *_ in got} == {"LOAN_DAYS", "ReminderQueue", "fineFor"}


def test_an_es_module_export_list_and_default_export():
    text = """const PORT = 8080;
const hidden = 1;
function start(port) {}
class Server {}
export { PORT as DEFAULT_PORT, start };
export default Server;
export { other } from './other.js';
"""
    got = facts("src/server.mjs", text)
    assert ("value", 1, "PORT", "constant", "8080", "PORT") in got
    assert {name for _, _, name, *_ in got} == {"PORT", "start", "Server"}


def test_without_exports_a_script_states_nothing():
    assert facts("bin/run.js", "const LIMIT = 5;\nfunction main() {}\nmain();\n") == []
