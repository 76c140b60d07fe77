"""InitProducerId (key 22, v0-4) for idempotent producers.

Without a transactional id Kafka's ``TransactionCoordinator.handleInitProducerId`` hands out a
new producer id with epoch 0, whatever producer id and epoch a v3+ request carries (an
idempotent producer asks again after a fatal sequence error). Ids come from the directory's
``ProducerIdAllocator``, never reused. With a transactional id the transaction coordinator
answers (``txn_apis.init_transactional_producer_id``).
"""

from __future__ import annotations

from typing import Any

from kio.schema.errors import ErrorCode

from node.kafka.codec import Request, build, response_class
from node.kafka.context import ServedDir
from node.kafka.txn_apis import init_transactional_producer_id
from node.kafka.versions import ApiKey


def handle_init_producer_id(served: ServedDir, request: Request) -> Any:
    """The InitProducerId response to ``request``."""
    cls = response_class(ApiKey.INIT_PRODUCER_ID, request.api_version)
    if request.body.transactional_id is not None:
        return init_transactional_producer_id(served, request)
    return build(cls, {"throttle_time": 0, "error_code": ErrorCode.none,
                       "producer_id": served.producer_ids.allocate(), "producer_epoch": 0})
