"""Our typed errors as the Kafka error codes clients see, and the protocol errors' pickling."""

from __future__ import annotations

import pickle

import pytest
from kio.schema.errors import ErrorCode

from node.errors import (
    LogDirNotFoundError,
    LogDirOfflineError,
    PartitionMovedError,
    UnknownPartitionError,
)
from node.kafka.errors import (
    InvalidFrameSizeError,
    MalformedRequestError,
    UnsupportedCompressionTypeError,
    UnsupportedRequestError,
    error_code_for,
)
from storage.errors import (
    CorruptRecordError,
    InvalidRecordError,
    OffsetOutOfRangeError,
    RecordTooLargeError,
    StorageError,
)
from storage.producer_state import (
    InvalidProducerEpochError,
    InvalidTxnStateError,
    OutOfOrderSequenceError,
)


@pytest.mark.parametrize("error, code", [
    (OffsetOutOfRangeError("x"), ErrorCode.offset_out_of_range),
    (CorruptRecordError("x"), ErrorCode.corrupt_message),
    (UnknownPartitionError("x"), ErrorCode.unknown_topic_or_partition),
    (PartitionMovedError("x"), ErrorCode.not_leader_or_follower),
    (RecordTooLargeError("x"), ErrorCode.message_too_large),
    (OutOfOrderSequenceError("x"), ErrorCode.out_of_order_sequence_number),
    (InvalidProducerEpochError("x"), ErrorCode.invalid_producer_epoch),
    (InvalidTxnStateError("x"), ErrorCode.invalid_txn_state),
    (InvalidRecordError("x"), ErrorCode.invalid_record),
    (UnsupportedCompressionTypeError("x"), ErrorCode.unsupported_compression_type),
    (LogDirOfflineError("x"), ErrorCode.kafka_storage_error),
    (LogDirNotFoundError("x", log_dir="/d"), ErrorCode.log_dir_not_found),
    (StorageError("x"), ErrorCode.unknown_server_error),
    (RuntimeError("x"), ErrorCode.unknown_server_error),
])
def test_each_error_maps_to_kafkas_code_most_specific_first(error: Exception,
                                                            code: ErrorCode) -> None:
    assert error_code_for(error) == code


@pytest.mark.parametrize("error", [
    InvalidFrameSizeError("frame", size=-1, limit=100),
    UnsupportedRequestError("api", api_key=99, api_version=0),
    MalformedRequestError("body", api_key=0, api_version=9, reason="short"),
    UnsupportedCompressionTypeError("zstd", version=3, compression="zstd"),
])
def test_protocol_errors_pickle_with_their_fields(error: StorageError) -> None:
    copy = pickle.loads(pickle.dumps(error))
    assert type(copy) is type(error) and str(copy) == str(error)
    assert vars(copy) == vars(error)
