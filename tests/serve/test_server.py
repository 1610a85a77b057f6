"""`dlm serve` settings: frontmatter < --config < flags, file errors, bind warning, and
the command's error boundary (no model is loaded: settings fail first)."""

from __future__ import annotations

from pathlib import Path

import pytest
import typer
from typer.testing import CliRunner

from dlm.actions.serving import ServeOptions, read_config_file, resolve_cache_config
from dlm.cli import serve_cmd
from dlm.doc import load_document, new_document
from dlm.errors import ServeError
from dlm.serve.server import bind_warning
from dlm.serve.tokcache import TokenizerCacheConfig, TokenizerCacheConfigError


def write_doc(tmp_path: Path, cache_block: str = "") -> Path:
    head, body = new_document().split("\n---\n", 1)
    if cache_block:
        head += "\nserve:\n  tokenizer_cache:\n" + cache_block
    path = tmp_path / "doc.dlm"
    path.write_text(head + "\n---\n" + body)
    return path


def test_flags_win_over_config_file_over_frontmatter(tmp_path: Path) -> None:
    doc_path = write_doc(tmp_path, "    enable_l1: true\n    l1_max_memory: 1000\n    l0_max_entries: 3\n")
    config = tmp_path / "serve.json"
    config.write_text('{"tokenizer_cache": {"l1_max_memory": 2000, "enable_l0": true}}')
    options = ServeOptions(paths=[doc_path], config_file=config, cache_flags={"l0_max_entries": 9, "enable_l1": None})
    resolved = resolve_cache_config(load_document(doc_path), options)
    assert resolved == TokenizerCacheConfig(enable_l0=True, l0_max_entries=9, enable_l1=True, l1_max_memory=2000)


def test_bad_flag_value_names_the_command_line(tmp_path: Path) -> None:
    options = ServeOptions(paths=[write_doc(tmp_path)], cache_flags={"l1_max_memory": 0})
    with pytest.raises(TokenizerCacheConfigError, match="command line: l1_max_memory: must be an integer >= 1"):
        resolve_cache_config(load_document(options.paths[0]), options)


@pytest.mark.parametrize(
    ("content", "needle"),
    [
        ("{not json", ":1:2: invalid JSON"),
        ("[1, 2]", "must hold a JSON object"),
        ('{"tokenizer_cache": {}, "port": 1}', "unknown key(s) port"),
    ],
)
def test_config_file_errors_name_the_file(tmp_path: Path, content: str, needle: str) -> None:
    path = tmp_path / "serve.json"
    path.write_text(content)
    with pytest.raises(ServeError) as info:
        read_config_file(path)
    assert str(path) in str(info.value) and needle in str(info.value)


def test_missing_config_file(tmp_path: Path) -> None:
    with pytest.raises(ServeError, match="cannot read --config file"):
        read_config_file(tmp_path / "absent.json")


def test_only_non_loopback_hosts_warn() -> None:
    assert bind_warning("127.0.0.1") is None
    assert bind_warning("::1") is None
    assert bind_warning("localhost") is None
    assert "no authentication" in (bind_warning("0.0.0.0") or "")


def test_serve_command_reports_bad_settings_as_one_line(tmp_path: Path) -> None:
    app = typer.Typer()
    app.callback()(lambda: None)
    serve_cmd.register(app)
    doc_path = write_doc(tmp_path)
    result = CliRunner().invoke(app, ["serve", str(doc_path), "--tokenizer-cache-l0-max-entries", "0"])
    assert result.exit_code == 1
    assert "l0_max_entries: must be an integer >= 1" in result.output
    assert "Traceback" not in result.output
    help_text = CliRunner().invoke(app, ["serve", "--help"], env={"COLUMNS": "250"}).output
    for flag in ("--tokenizer-cache-enable-l0", "--tokenizer-cache-l1-max-memory", "--config", "--port"):
        assert flag in help_text


def test_a_busy_port_is_one_line_and_exit_1_before_any_loading(tmp_path: Path) -> None:
    import socket

    app = typer.Typer()
    app.callback()(lambda: None)
    serve_cmd.register(app)
    with socket.socket() as busy:
        busy.bind(("127.0.0.1", 0))
        busy.listen()
        port = busy.getsockname()[1]
        result = CliRunner().invoke(app, ["serve", str(write_doc(tmp_path)), "--port", str(port)])
    assert result.exit_code == 1
    assert f"cannot listen on http://127.0.0.1:{port}" in result.output
    assert "Traceback" not in result.output and "serving" not in result.output


def test_two_documents_with_one_dlm_id_are_refused_before_any_loading(tmp_path: Path) -> None:
    import shutil

    app = typer.Typer()
    app.callback()(lambda: None)
    serve_cmd.register(app)
    original = write_doc(tmp_path)
    copy = tmp_path / "copy.dlm"
    shutil.copyfile(original, copy)
    dlm_id = load_document(original).frontmatter.dlm_id
    result = CliRunner().invoke(app, ["serve", str(original), str(copy), "--port", "0"])
    assert result.exit_code == 1, result.output
    lines = [line for line in result.output.splitlines() if line.strip()]
    assert len(lines) == 1 and dlm_id in lines[0] and str(original) in lines[0] and str(copy) in lines[0]
    assert "Traceback" not in result.output and "serving" not in result.output
