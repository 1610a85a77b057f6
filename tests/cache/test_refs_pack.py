"""A document's stored references: the packed key list equals sorted unique key bytes."""

from __future__ import annotations

import random

import pytest
from hypothesis import given
from hypothesis import strategies as st

from dlm.cache.schema import key_blob, key_text
from dlm.cache.shared import pack_keys, unpack_keys

blobs = st.binary(min_size=16, max_size=16)


@given(st.lists(blobs, max_size=200), st.randoms())
def test_pack_keys_is_the_sorted_unique_key_bytes(keys: list[bytes], rnd: random.Random) -> None:
    texts = [key_text(b) for b in keys + keys[: len(keys) // 3]]  # duplicates too
    rnd.shuffle(texts)
    packed = pack_keys(iter(texts))
    assert packed == b"".join(sorted(set(keys)))
    assert unpack_keys(packed) == set(keys)


def test_pack_keys_orders_by_bytes_across_the_two_halves() -> None:
    low_first = key_text(bytes(8) + b"\xff" * 8)
    high_first = key_text(b"\x00" * 7 + b"\x01" + bytes(8))
    assert pack_keys([high_first, low_first]) == key_blob(low_first) + key_blob(high_first)


@pytest.mark.parametrize(
    "bad",
    [
        "xxh3_128:" + "zz" * 16,
        "xxh3_128:" + "0" * 31,
        "sha1:" + "0" * 36,
        "xxh3_128:" + "0" * 23 + "xxh3_128:",
        "xxh3_128:" + "0" * 14 + "xxh3_128:" + "0" * 9,
    ],
)
def test_pack_keys_refuses_a_malformed_key(bad: str) -> None:
    with pytest.raises(ValueError, match="row key|hexadecimal"):
        pack_keys([key_text(bytes(16)), bad, bad])


@given(st.lists(st.one_of(st.none(), blobs), max_size=100))
def test_snapshot_digests_are_the_key_bytes(keys: list[bytes | None]) -> None:
    from dlm.cache.statindex import digests

    got = digests([key_text(k) if k is not None else None for k in keys])
    assert got.shape == (len(keys), 16)
    assert got.tobytes() == b"".join(k if k is not None else bytes(16) for k in keys)


@pytest.mark.parametrize("bad", ["xxh3_128:" + "zz" * 16, "xxh3_128:" + "0" * 31, "sha1:" + "0" * 36])
def test_snapshot_digests_refuse_a_malformed_key(bad: str) -> None:
    from dlm.cache.statindex import digests

    with pytest.raises(ValueError, match="row key|hexadecimal|non-hexadecimal"):
        digests([key_text(bytes(16)), bad])


def test_save_refs_rewrites_only_changed_keys(tmp_path) -> None:
    from dlm.cache.schema import connect, write_tx
    from dlm.cache.shared import save_refs

    conn = connect(tmp_path)
    keys = [key_text(bytes([i]) * 16) for i in range(5)]

    def saved() -> tuple[bytes, int]:
        return conn.execute("SELECT keys, updated_ns FROM doc_refs WHERE doc = 'd'").fetchone()

    with write_tx(conn):
        save_refs(conn, "d", keys)
    first = saved()
    assert first[0] == pack_keys(keys)
    with write_tx(conn):
        save_refs(conn, "d", keys)
    assert saved() == first  # the same keys: the row is left as it was
    with write_tx(conn):
        save_refs(conn, "d", keys[:3])
    assert saved()[0] == pack_keys(keys[:3]) and saved()[1] > first[1]
    # a row written before the digest column (or by another writer) is rewritten
    with write_tx(conn):
        conn.execute("UPDATE doc_refs SET keys = ?, keys_xxh3 = NULL WHERE doc = 'd'", (b"",))
        save_refs(conn, "d", keys[:3])
    assert saved()[0] == pack_keys(keys[:3])
    with pytest.raises(ValueError), write_tx(conn):
        save_refs(conn, "d", [*keys, "xxh3_128:zz"])
    assert saved()[0] == pack_keys(keys[:3])  # a malformed key writes nothing
    conn.close()
