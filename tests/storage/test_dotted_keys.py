"""The three config parsers (storage, cleaner, node) read Kafka's dotted keys through one helper
(``storage.dotted_keys``): the same conversion, the same range checks, the same errors naming the
key."""

from __future__ import annotations

from typing import Any, Callable

import pytest

from cleaner.config import CleanerConfig
from node.config import LogDirConfig
from storage.config import LogConfig
from storage.errors import InvalidConfigError

PARSERS: dict[str, tuple[Callable[[dict[str, Any]], Any], str, str]] = {
    # scope: (parser, an integer key it knows, the scope's words in the unknown-key error)
    "log": (LogConfig.from_properties, "flush.messages", "unknown log config key"),
    "cleaner": (CleanerConfig.from_properties, "log.cleaner.threads",
                "unknown log cleaner config key"),
    "node": (LogDirConfig.from_properties, "log.retention.check.interval.ms",
             "unknown log directory config key"),
}


@pytest.mark.parametrize("scope", sorted(PARSERS))
def test_an_unknown_dotted_key_is_refused_naming_it(scope: str) -> None:
    parse, _, words = PARSERS[scope]
    with pytest.raises(InvalidConfigError) as raised:
        parse({"log.cleaner.no.such.key": "1"})
    assert str(raised.value) == f"{words} 'log.cleaner.no.such.key'"
    assert raised.value.fields["key"] == "log.cleaner.no.such.key"


@pytest.mark.parametrize("scope", sorted(PARSERS))
@pytest.mark.parametrize("text", ["1_000", "١٢", "12.0", "ten"])
def test_integers_are_read_as_java_reads_them_by_every_parser(scope: str, text: str) -> None:
    parse, key, _ = PARSERS[scope]
    with pytest.raises(InvalidConfigError) as raised:
        parse({key: text})
    assert str(raised.value) == f"{key}={text!r} is not an integer"
    assert parse({key: " 2 "}).to_properties()[key] == "2"


@pytest.mark.parametrize("scope", sorted(PARSERS))
def test_to_properties_round_trips_through_from_properties(scope: str) -> None:
    parse, _, _ = PARSERS[scope]
    config = parse({})
    assert parse(config.to_properties()) == config


def test_booleans_and_ratios_convert_alike_in_log_and_cleaner_configs() -> None:
    assert LogConfig.from_properties({"preallocate": " TRUE "}).preallocate is True
    assert CleanerConfig.from_properties({"log.cleaner.enable": "False"}).enable_cleaner is False
    assert LogConfig.from_properties({"min.cleanable.dirty.ratio": 1}).min_cleanable_dirty_ratio \
        == 1.0
    for parse, key in ((LogConfig.from_properties, "preallocate"),
                       (CleanerConfig.from_properties, "log.cleaner.enable")):
        with pytest.raises(InvalidConfigError) as raised:
            parse({key: "yes"})
        assert str(raised.value).startswith(f"{key}='yes' is not a valid ")
