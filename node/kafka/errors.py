"""Typed errors of the Kafka protocol front end, and the Kafka error code of every error a
request can meet.

Two kinds. A ``KafkaProtocolError`` is about the connection: the bytes cannot be answered
(a frame size out of bounds, an API key or version we do not serve, a body that does not parse),
and Kafka's answer is to close that connection without a response (``SocketServer``). Every other
error is about one partition or one request and becomes the Kafka error code of
``error_code_for`` in the response, as Kafka's ``Errors.forException`` does.

All of them extend ``storage.errors.StorageError``: structured fields, and they pickle.
"""

from __future__ import annotations

from kio.schema.errors import ErrorCode

from node.kafka.transactions import (
    ConcurrentTransactionsError,
    CoordinatorNotAvailableError,
    InvalidProducerIdMappingError,
    InvalidTransactionTimeoutError,
    ProducerFencedError,
    TransactionStateError,
)
from node.errors import (
    LogDirClosedError,
    LogDirNotFoundError,
    LogDirOfflineError,
    PartitionMovedError,
    PartitionSkippedError,
    PolicyViolationError,
    UnknownPartitionError,
)
from storage.errors import (
    CorruptRecordError,
    InvalidOffsetError,
    InvalidProducerEpochError,
    InvalidRecordError,
    InvalidTopicError,
    InvalidTxnStateError,
    OffsetOutOfRangeError,
    OutOfOrderSequenceError,
    RecordTooLargeError,
    StorageError,
    TransactionCoordinatorFencedError,
)

__all__ = [
    "IllegalSaslStateError",
    "InvalidFrameSizeError",
    "KafkaProtocolError",
    "MalformedRequestError",
    "SaslAuthenticationError",
    "NotLeaderOrFollowerError",
    "TopicAlreadyExistsError",
    "UnsupportedCompressionTypeError",
    "UnsupportedRequestError",
    "error_code_for",
]


class KafkaProtocolError(StorageError):
    """A request the server cannot answer at all; the connection it came on is closed (Kafka
    sends no error response, since it cannot know the layout the client expects). Other
    connections are not affected."""


class InvalidFrameSizeError(KafkaProtocolError):
    """A frame whose int32 size is negative or above ``socket.request.max.bytes`` (``size``,
    ``limit``): Kafka's ``InvalidReceiveException``. A TLS hello or an HTTP request sent to the
    port reads as one."""


class UnsupportedRequestError(KafkaProtocolError):
    """A request header naming an API key this server does not serve, or a version outside the
    advertised range (``api_key``, ``api_version``). ApiVersions above its range is not this
    error: it is answered in v0 format with UNSUPPORTED_VERSION (KIP-511)."""


class MalformedRequestError(KafkaProtocolError):
    """A frame with a served API key and version whose header or body does not decode
    (``api_key``, ``api_version``, ``reason``): truncated, a bad length, an unknown tagged
    field. Unlike ``UnsupportedRequestError`` the client claimed a layout we speak."""


class UnsupportedCompressionTypeError(StorageError):
    """A produced batch compressed with a codec its request version predates (zstd before
    Produce v7: ``version``, ``compression``), Kafka's ``UnsupportedCompressionTypeException``.
    Unlike ``InvalidRecordError`` the batch is well formed; the client must use a newer
    version."""


class NotLeaderOrFollowerError(StorageError):
    """A produce, fetch or offset lookup of a partition (``topic``, ``partition``) that the
    cluster holds, but in another broker's directory (Kafka's ``NotLeaderOrFollowerException``):
    the client asks for metadata again and goes to the leader. Unlike ``UnknownPartitionError``
    the partition exists; unlike ``PartitionMovedError`` this broker may never have held it."""


class TopicAlreadyExistsError(StorageError):
    """A topic creation (``topic``) that found the topic created meanwhile by another client
    (Kafka's ``TopicExistsException``): CreateTopics answers TOPIC_ALREADY_EXISTS, and a
    Metadata auto-creation answers the topic as it now is."""


# most specific first: the first class in an exception's MRO found here gives its code
_CODES: dict[type[BaseException], ErrorCode] = {
    OffsetOutOfRangeError: ErrorCode.offset_out_of_range,
    CorruptRecordError: ErrorCode.corrupt_message,
    UnknownPartitionError: ErrorCode.unknown_topic_or_partition,
    PartitionSkippedError: ErrorCode.kafka_storage_error,
    PartitionMovedError: ErrorCode.not_leader_or_follower,
    RecordTooLargeError: ErrorCode.message_too_large,
    InvalidTopicError: ErrorCode.invalid_topic_exception,
    OutOfOrderSequenceError: ErrorCode.out_of_order_sequence_number,
    InvalidProducerEpochError: ErrorCode.invalid_producer_epoch,
    InvalidTxnStateError: ErrorCode.invalid_txn_state,
    TransactionCoordinatorFencedError: ErrorCode.transaction_coordinator_fenced,
    InvalidRecordError: ErrorCode.invalid_record,
    InvalidOffsetError: ErrorCode.invalid_request,
    PolicyViolationError: ErrorCode.policy_violation,
    UnsupportedCompressionTypeError: ErrorCode.unsupported_compression_type,
    LogDirOfflineError: ErrorCode.kafka_storage_error,
    LogDirClosedError: ErrorCode.kafka_storage_error,
    LogDirNotFoundError: ErrorCode.log_dir_not_found,
    NotLeaderOrFollowerError: ErrorCode.not_leader_or_follower,
    TopicAlreadyExistsError: ErrorCode.topic_already_exists,
    # the transaction coordinator's errors (node.kafka.transactions)
    ProducerFencedError: ErrorCode.producer_fenced,
    TransactionStateError: ErrorCode.invalid_txn_state,
    ConcurrentTransactionsError: ErrorCode.concurrent_transactions,
    InvalidProducerIdMappingError: ErrorCode.invalid_producer_id_mapping,
    InvalidTransactionTimeoutError: ErrorCode.invalid_transaction_timeout,
    CoordinatorNotAvailableError: ErrorCode.coordinator_not_available,
}


def error_code_for(error: BaseException) -> ErrorCode:
    """The Kafka error code a client sees for ``error`` (Kafka's ``Errors.forException``):
    the code of its most specific class in the table, else UNKNOWN_SERVER_ERROR."""
    for cls in type(error).__mro__:
        code = _CODES.get(cls)
        if code is not None:
            return code
    return ErrorCode.unknown_server_error



class SaslAuthenticationError(StorageError):
    """A SASL exchange that failed (``mechanism``, ``reason``): a wrong password, an unknown
    user, a token that does not parse, a nonce or proof that does not match. Kafka's
    ``SaslAuthenticationException``: its message is what the client is told (SaslAuthenticate's
    error_message, with SASL_AUTHENTICATION_FAILED), so it never says whether the user exists;
    ``reason`` says what went wrong, for the log only. The connection is closed after the answer.
    Unlike ``IllegalSaslStateError`` the client followed the protocol; its credentials failed."""


class IllegalSaslStateError(KafkaProtocolError):
    """A request that the authentication state of its connection does not admit (``api_key``,
    ``state``): anything but ApiVersions and SaslHandshake before the handshake, anything but
    SaslAuthenticate after it, a second ApiVersions. Kafka's ``IllegalSaslStateException``: the
    connection is closed without an answer."""
