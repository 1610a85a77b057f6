"""Settings of config files (`dlm.rows.facts.config`): dotted keys and their values."""

from __future__ import annotations

from dlm.rows.facts.files import parsed_facts
from dlm.rows.facts.model import Fact
from dlm.rows.facts.phrasing import phrase, probe_keys

YAML = """# ferry settings
server:
  host: 0.0.0.0
  port: 8080
  tls: false
peers:
  - name: alpha
"""


def settings(relpath: str, text: str) -> list[tuple[int, str, str, str]]:
    got = parsed_facts(relpath, text)
    assert isinstance(got, list), got
    assert all(f.kind in ("setting", "purpose") and f.path == relpath for f in got)
    return [(f.line, f.name, f.answer, f.subject) for f in got if f.kind == "setting"]


def test_yaml_keys_by_dotted_path():
    assert settings("config/ferry.yaml", YAML) == [
        (3, "server.host", "0.0.0.0", "server"),
        (4, "server.port", "8080", "server"),
        (5, "server.tls", "false", "server"),
        (7, "peers[0].name", "alpha", "peers[0]"),
    ]
    port = Fact("setting", "config/ferry.yaml", 4, "server.port", "YAML", "8080", "server")
    assert parsed_facts("config/ferry.yaml", YAML)[1] == port  # type: ignore[index]
    assert [(p.question, p.answer) for p in phrase(port, 3)] == [
        ("What is `server.port` set to in `config/ferry.yaml`?", "`8080`."),
        # the key's words, as a user asks for it
        ("What is the server port?", "`8080` (`server.port` in `config/ferry.yaml`)."),
        (
            "What do you know about `server.port`?",
            "`config/ferry.yaml` sets `server.port` to `8080`, the server port.",
        ),
    ]
    assert probe_keys(port) == ("8080",)
    tls = Fact("setting", "config/ferry.yaml", 5, "server.tls", "YAML", "false", "server")
    assert probe_keys(tls) == ()  # any reply may say "false"


def test_toml_json_and_ini():
    toml = '[db]\nurl = "postgres://db/ferry"\npool = 5\n\n[db.retry]\nmax = 3\n'
    assert settings("ferry.toml", toml) == [
        (2, "db.url", "postgres://db/ferry", "db"),
        (3, "db.pool", "5", "db"),
        (6, "db.retry.max", "3", "db.retry"),
    ]
    package = '{\n  "name": "ferry-ui",\n  "scripts": {"build": "tsc -p ."},\n  "private": true\n}\n'
    assert settings("ui/package.json", package) == [
        (2, "name", "ferry-ui", "name"),
        (3, "scripts.build", "tsc -p .", "scripts"),
        (4, "private", "true", "private"),
    ]
    ini = "[DEFAULT]\nlevel = info\n\n[metadata]\nname = ferry\nlevel = info\n\n[log]\nlevel = debug\n"
    assert settings("setup.cfg", ini) == [
        (2, "DEFAULT.level", "info", "DEFAULT"),
        (5, "metadata.name", "ferry", "metadata"),
        (9, "log.level", "debug", "log"),
    ]


def test_a_config_file_that_fails_to_parse_says_why():
    assert parsed_facts("ferry.yaml", "server: [1, 2\nport: 3\n") == "YAML error at line 2"
    assert parsed_facts("ferry.json", '{"a": 1,,}') == "JSON error at line 1"
    assert parsed_facts("ferry.toml", "a = \n") == "TOML error at line 1"
    assert parsed_facts("ferry.ini", "no section\n") == "INI error at line 1"
    assert parsed_facts("ui/package-lock.json", '{"a": 1}') == []  # a lock file is not read


def test_a_comment_right_above_a_key_is_what_its_setting_is_asked_by():
    from dlm.rows.synth import synthesize

    toml = (
        "[status]\n# The port the small status page listens on. Change it per host.\nstatus_port = 7419\n\n"
        "# a comment a blank line away\n\nenabled = true\n"
    )
    got = parsed_facts("tarnwick.toml", toml)
    assert isinstance(got, list)
    assert [(f.kind, f.name, f.answer) for f in got] == [
        ("setting", "status.status_port", "7419"),
        ("purpose", "status.status_port", "The port the small status page listens on."),
        ("setting", "status.enabled", "true"),  # the blank line parts it from the comment
    ]
    pairs = synthesize(got, kinds=("setting",), phrasings=3, probe_share=0).train
    assert [(p.question, p.answer) for _, p in pairs][1:3] == [
        ("What is the port the small status page listens on?", "`7419` (`status.status_port` in `tarnwick.toml`)."),
        (
            "What do you know about `status.status_port`?",
            "`tarnwick.toml` sets `status.status_port` to `7419`: the port the small status page listens on.",
        ),
    ]


def test_the_cap_counts_settings_not_their_comments():
    from dlm.rows.facts.config import MAX_SETTINGS

    toml = "".join(f"# key number {i}.\nk{i} = {i}\n" for i in range(MAX_SETTINGS + 5))
    got = parsed_facts("many.toml", toml)
    assert isinstance(got, list)
    assert sum(f.kind == "setting" for f in got) == MAX_SETTINGS
    assert sum(f.kind == "purpose" for f in got) == MAX_SETTINGS


def test_a_manifests_dependency_lists_are_not_facts():
    """Version pins a package manager keeps are not what a project says about itself:
    `package.json`'s dependency maps and `pyproject.toml`'s build requirements and
    dependency lists give nothing; the rest of each manifest is read."""
    package = '{"name": "thirlby", "engines": {"node": ">=18"}, "dependencies": {"nodemailer": "^6.9.14"},\n'
    package += ' "devDependencies": {"eslint": "^9.8.0"}, "scripts": {"test": "node --test"}}\n'
    assert [name for _, name, _, _ in settings("package.json", package)] == ["name", "engines.node", "scripts.test"]
    pyproject = '[build-system]\nrequires = ["setuptools>=68"]\n\n[project]\nname = "ostwick"\n'
    pyproject += 'dependencies = ["qrcode>=7.4"]\n\n[tool.ostwick]\ndepot = "Pellow Yard"\n'
    assert [name for _, name, _, _ in settings("pyproject.toml", pyproject)] == ["project.name", "tool.ostwick.depot"]
    # the same keys in a file that is no manifest are settings like any other
    assert [name for _, name, _, _ in settings("config/app.json", package)][2] == "dependencies.nodemailer"


def test_a_list_of_scalars_is_one_setting():
    yaml_text = "floor:\n  dryers: [D1, D2, D3]\n  ports:\n    - 7020\n    - 7021\nhosts:\n  - name: a\n  - b\n"
    assert settings("pellworth.yaml", yaml_text) == [
        (2, "floor.dryers", "D1, D2, D3", "floor"),
        (3, "floor.ports", "7020, 7021", "floor"),
        # a list holding a mapping keeps its items apart
        (7, "hosts[0].name", "a", "hosts[0]"),
        (6, "hosts[1]", "b", "hosts[1]"),
    ]
    toml = 'keywords = ["bus", "timetable"]\nempty = []\nlong = ["' + "x" * 50 + '", "' + "y" * 50 + '"]\n'
    # too long as one value: its items stay apart, each a value of its own
    assert settings("pyproject.toml", toml) == [
        (1, "keywords", "bus, timetable", "keywords"),
        (3, "long[0]", "x" * 50, "long[0]"),
        (3, "long[1]", "y" * 50, "long[1]"),
    ]


def test_a_list_under_a_plural_name_is_asked_with_are():
    from dlm.rows.facts.phrasing import phrase

    facts = parsed_facts("pellworth.yaml", "floor:\n  dryers: [D1, D2, D3]\n  max_retries: 5\n  hosts: a, b\n")
    assert isinstance(facts, list)
    asked = {f.name: phrase(f, 2)[1].question for f in facts if f.kind == "setting"}
    assert asked == {
        "floor.dryers": "What are the floor dryers?",
        "floor.max_retries": "What is the floor max retries?",  # one value: the setting is one thing
        "floor.hosts": "What are the floor hosts?",
    }
