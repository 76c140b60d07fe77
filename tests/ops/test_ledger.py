"""The verifier: it finds every kind of loss, so a drill cannot pass vacuously."""

from __future__ import annotations

from ops.drills.ledger import Ledger, LogRecord, verify


def reader(logs: dict[tuple[str, int], list[tuple[int, bytes, bytes]]]):
    return lambda topic, partition: [LogRecord(o, k, v) for o, k, v in
                                     logs.get((topic, partition), [])]


def acked_ledger() -> Ledger:
    ledger = Ledger(compacted_topics=["kv"])
    ledger.acknowledge("t", 0, 0, [(b"a", b"v0"), (b"b", b"v1")])
    ledger.acknowledge("kv", 0, 0, [(b"k", b"old"), (b"k", b"new")])
    return ledger


def test_a_log_holding_every_acknowledged_record_verifies_clean() -> None:
    result = verify(acked_ledger(), reader({("t", 0): [(0, b"a", b"v0"), (1, b"b", b"v1")],
                                            ("kv", 0): [(1, b"k", b"new")]}))
    assert result.ok and result.acknowledged == 4 and result.log_records == 3


def test_an_acknowledged_record_missing_from_the_log_is_lost() -> None:
    result = verify(acked_ledger(), reader({("t", 0): [(0, b"a", b"v0")],
                                            ("kv", 0): [(1, b"k", b"new")]}))
    assert not result.ok and result.lost == 1
    assert result.examples["lost"][0]["offset"] == 1


def test_the_latest_value_of_a_compacted_key_missing_is_lost() -> None:
    result = verify(acked_ledger(), reader({("t", 0): [(0, b"a", b"v0"), (1, b"b", b"v1")],
                                            ("kv", 0): [(0, b"k", b"old")]}))
    assert result.lost == 1 and result.examples["lost"][0]["value"] == "new"


def test_a_record_stored_twice_is_a_duplicate() -> None:
    result = verify(acked_ledger(), reader({("t", 0): [(0, b"a", b"v0"), (1, b"b", b"v1"),
                                                       (2, b"b", b"v1")],
                                            ("kv", 0): [(1, b"k", b"new")]}))
    assert not result.ok and result.duplicated == 1 and result.misplaced == 0


def test_a_record_at_another_offset_is_misplaced_and_an_unknown_one_a_phantom() -> None:
    result = verify(acked_ledger(), reader({("t", 0): [(0, b"a", b"v0"), (5, b"b", b"v1"),
                                                       (6, b"z", b"never sent")],
                                            ("kv", 0): [(1, b"k", b"new")]}))
    assert result.misplaced == 1 and result.phantom == 1 and not result.ok


def test_in_doubt_records_are_neither_loss_nor_phantoms_but_count_as_duplicates() -> None:
    ledger = acked_ledger()
    ledger.in_doubt("t", 0, [(b"c", b"maybe"), (b"d", b"maybe-not")])
    logs = {("t", 0): [(0, b"a", b"v0"), (1, b"b", b"v1"), (2, b"c", b"maybe")],
            ("kv", 0): [(1, b"k", b"new")]}
    result = verify(ledger, reader(logs))
    assert result.ok and result.in_doubt_present == 1 and result.in_doubt_absent == 1
    logs[("t", 0)].append((3, b"c", b"maybe"))
    assert verify(ledger, reader(logs)).duplicated == 1


def test_a_later_in_doubt_value_present_excuses_a_compacted_away_latest() -> None:
    ledger = acked_ledger()
    ledger.in_doubt("kv", 0, [(b"k", b"newest")])
    result = verify(ledger, reader({("t", 0): [(0, b"a", b"v0"), (1, b"b", b"v1")],
                                    ("kv", 0): [(7, b"k", b"newest")]}))
    assert result.ok and result.lost == 0


def test_an_acknowledgement_settles_a_doubt_and_excuse_spares_destroyed_records() -> None:
    ledger = Ledger()
    ledger.in_doubt("t", 0, [(b"a", b"v0")])
    ledger.acknowledge("t", 0, 0, [(b"a", b"v0")])
    assert ledger.doubtful() == [] and ledger.summary()["acknowledged_records"] == 1
    result = verify(ledger, reader({}), excuse=lambda r: r.offset == 0)
    assert result.ok and result.excused == 1


def producing_reader(ledger: Ledger, logs: dict[tuple[str, int], list[tuple[int, bytes, bytes]]],
                     sent: dict[tuple[str, int], list[tuple[int, bytes, bytes]]]):
    """A reader whose partitions receive, while they are read, a batch a producer writes down as
    in doubt, sends, and has acknowledged before the read ends (a drill verifies while its
    producers run)."""
    def read(topic: str, partition: int):
        yield from (LogRecord(o, k, v) for o, k, v in logs.get((topic, partition), []))
        for offset, key, value in sent.get((topic, partition), []):
            ledger.in_doubt(topic, partition, [(key, value)])
            yield LogRecord(offset, key, value)
            ledger.acknowledge(topic, partition, offset, [(key, value)])
    return read


def test_a_record_produced_and_acknowledged_during_the_read_is_no_phantom() -> None:
    """The kill-cleaner drill's mid-clean check failed once in CI with nothing lost or
    duplicated: a batch sent after ``verify`` took its snapshots was read back as a value the
    ledger had never heard of. What the read finds is judged by the ledger as it stands after
    the read; what must be there, by the ledger before it."""
    ledger = acked_ledger()
    result = verify(ledger, producing_reader(
        ledger, {("t", 0): [(0, b"a", b"v0"), (1, b"b", b"v1")], ("kv", 0): [(1, b"k", b"new")]},
        {("t", 0): [(2, b"a", b"during")]}))
    assert result.ok and result.phantom == 0 and result.in_doubt_present == 1
    assert result.acknowledged == 4          # acknowledged before the read


def test_a_compacted_latest_replaced_by_a_record_acknowledged_during_the_read_is_not_lost() -> None:
    ledger = acked_ledger()
    result = verify(ledger, producing_reader(
        ledger, {("t", 0): [(0, b"a", b"v0"), (1, b"b", b"v1")]},
        {("kv", 0): [(2, b"k", b"newest")]}))      # the cleaner kept only the newest of k
    assert result.ok and result.lost == 0


def test_a_value_nobody_sent_is_a_phantom_even_while_producers_run() -> None:
    ledger = acked_ledger()
    result = verify(ledger, producing_reader(
        ledger, {("t", 0): [(0, b"a", b"v0"), (1, b"b", b"v1"), (5, b"x", b"from nowhere")],
                 ("kv", 0): [(1, b"k", b"new")]},
        {("t", 0): [(2, b"a", b"during")]}))
    assert not result.ok and result.phantom == 1
    assert result.examples["phantom"][0]["value"] == "from nowhere"
