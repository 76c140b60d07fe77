"""``ServedDir``: what the request handlers of one served directory share."""

from __future__ import annotations

from dataclasses import dataclass

from node.kafka.append_signal import AppendSignal
from node.kafka.broker_view import BrokerView
from node.kafka.config import KafkaServerConfig
from node.kafka.producer_ids import ProducerIdAllocator
from node.logdir import LogDir


@dataclass(frozen=True)
class ServedDir:
    """The directory a server serves (``logdir``), the cluster as this broker sees it
    (``view``), the settings, the producer id allocator and the append signal long-polling
    fetches wait on."""

    logdir: LogDir
    view: BrokerView
    config: KafkaServerConfig
    producer_ids: ProducerIdAllocator
    signal: AppendSignal
