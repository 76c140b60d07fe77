"""The aborted-transaction index ``.txnindex``: ports of Kafka's TransactionIndexTest on real
files, plus its byte layout."""

from __future__ import annotations

import os
from pathlib import Path

import pytest

from storage import files
from storage.errors import CorruptIndexError, InvalidOffsetError
from storage.txn_index import ENTRY_SIZE, AbortedTxn, TransactionIndex

TXNS = [AbortedTxn(0, 0, 10, 11), AbortedTxn(1, 5, 15, 13), AbortedTxn(2, 18, 35, 25),
        AbortedTxn(3, 32, 50, 40)]


@pytest.fixture
def index(tmp_path: Path) -> TransactionIndex:
    return TransactionIndex(files.txn_index_file(tmp_path, 0), 0)


def fill(index: TransactionIndex, txns: list[AbortedTxn]) -> None:
    for txn in txns:
        index.append(txn)


def test_entry_is_kafkas_34_byte_layout() -> None:
    data = AbortedTxn(983493, 137, 299, 200).encode()
    assert ENTRY_SIZE == 34 and len(data) == 34
    assert data == (b"\x00\x00" + (983493).to_bytes(8, "big") + (137).to_bytes(8, "big")
                    + (299).to_bytes(8, "big") + (200).to_bytes(8, "big"))


def test_aborted_txn_serde() -> None:
    """Kafka's TransactionIndexTest.testAbortedTxnSerde."""
    txn = AbortedTxn.decode(AbortedTxn(983493, 137, 299, 200).encode())
    assert (txn.version, txn.producer_id, txn.first_offset, txn.last_offset,
            txn.last_stable_offset) == (0, 983493, 137, 299, 200)


def test_the_file_is_created_by_the_first_entry(index: TransactionIndex) -> None:
    assert not index.exists()
    assert index.all_aborted_txns() == []
    index.append(TXNS[0])
    assert index.path.stat().st_size == ENTRY_SIZE


def test_position_set_correctly_when_opened(index: TransactionIndex) -> None:
    """Kafka's TransactionIndexTest.testPositionSetCorrectlyWhenOpened."""
    fill(index, TXNS)
    index.close()
    reopened = TransactionIndex(index.path, 0)
    another = AbortedTxn(3, 50, 60, 55)
    reopened.append(another)
    assert reopened.all_aborted_txns() == TXNS + [another]


def test_sanity_check(index: TransactionIndex) -> None:
    """Kafka's TransactionIndexTest.testSanityCheck: opened with a later start offset."""
    fill(index, TXNS)
    index.sanity_check()
    with pytest.raises(CorruptIndexError, match="below the start offset 100"):
        TransactionIndex(index.path, 100).sanity_check()


def test_sanity_check_refuses_a_torn_entry_and_an_unknown_version(index: TransactionIndex) -> None:
    fill(index, TXNS[:1])
    with open(index.path, "ab") as f:
        f.write(b"\x00" * 5)
    with pytest.raises(CorruptIndexError, match="not a multiple of 34"):
        index.sanity_check()
    assert index.all_aborted_txns() == TXNS[:1]     # readers skip the torn piece
    index.path.write_bytes(AbortedTxn(0, 0, 10, 11, version=1).encode())
    with pytest.raises(CorruptIndexError, match="version 1"):
        TransactionIndex(index.path, 0).all_aborted_txns()


def test_last_offset_must_increase(index: TransactionIndex) -> None:
    """Kafka's TransactionIndexTest.testLastOffsetMustIncrease and testLastOffsetCannotDecrease."""
    index.append(AbortedTxn(1, 5, 15, 13))
    with pytest.raises(InvalidOffsetError, match="not above the previous entry's 15"):
        index.append(AbortedTxn(0, 0, 15, 11))
    with pytest.raises(InvalidOffsetError):
        index.append(AbortedTxn(0, 0, 10, 11))
    with pytest.raises(InvalidOffsetError):               # also after a reopen
        TransactionIndex(index.path, 0).append(AbortedTxn(0, 0, 10, 11))


def test_collect_aborted_transactions(index: TransactionIndex) -> None:
    """Kafka's TransactionIndexTest.testCollectAbortedTransactions."""
    fill(index, TXNS)
    assert index.collect_aborted_txns(0, 100) == (TXNS, False)
    assert index.collect_aborted_txns(0, 32) == (TXNS[:3], True)
    assert index.collect_aborted_txns(0, 35) == (TXNS, True)
    assert index.collect_aborted_txns(10, 35) == (TXNS, True)
    assert index.collect_aborted_txns(11, 35) == (TXNS[1:4], True)
    assert index.collect_aborted_txns(20, 41) == (TXNS[2:4], False)


def test_truncate(index: TransactionIndex) -> None:
    """Kafka's TransactionIndexTest.testTruncate."""
    txns = [AbortedTxn(0, 0, 10, 2), AbortedTxn(1, 5, 15, 16), AbortedTxn(2, 18, 35, 25),
            AbortedTxn(3, 32, 50, 40)]
    fill(index, txns)
    index.truncate_to(51)
    assert index.collect_aborted_txns(0, 100).aborted_transactions == txns
    index.truncate_to(50)
    assert index.collect_aborted_txns(0, 100).aborted_transactions == txns[:3]
    index.append(AbortedTxn(4, 40, 45, 46))                # the last offset is 35 again
    index.reset()
    assert index.collect_aborted_txns(0, 100).aborted_transactions == []


def test_rename_index(index: TransactionIndex, tmp_path: Path) -> None:
    """Kafka's TransactionIndexTest.testRenameIndex."""
    index.append(AbortedTxn(0, 0, 10, 2))
    renamed = files.txn_index_file(tmp_path, 0, files.DELETED_SUFFIX)
    index.rename_to(renamed)
    index.append(AbortedTxn(1, 5, 15, 16))
    assert [t.first_offset for t in index.collect_aborted_txns(0, 100).aborted_transactions] \
        == [0, 5]
    assert renamed.exists() and not files.txn_index_file(tmp_path, 0).exists()


def test_update_parent_dir(index: TransactionIndex, tmp_path: Path) -> None:
    """Kafka's TransactionIndexTest.testUpdateParentDir."""
    parent = tmp_path / "parent"
    parent.mkdir()
    index.update_parent_dir(parent)
    assert index.path.parent == parent


def test_flush(index: TransactionIndex) -> None:
    """Kafka's TransactionIndexTest.testFlush: flushing a missing file is a no-op."""
    index.flush()
    assert not index.exists()
    index.append(AbortedTxn(0, 0, 10, 2))
    index.flush()
    assert index.path.stat().st_size != 0


def test_delete_if_exists(index: TransactionIndex) -> None:
    """Kafka's TransactionIndexTest.testDeleteIfExists."""
    index.append(AbortedTxn(0, 0, 10, 2))
    assert index.delete_if_exists()
    assert not os.path.exists(index.path)
    assert not index.delete_if_exists()
