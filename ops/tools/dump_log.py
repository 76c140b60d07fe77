"""``strata dump-log FILES...``: Kafka's DumpLogSegments, plus ``--json`` and ``--verify``.

Files are opened read-only and never changed (no ``Log.open``, which recovers). The kind of a file
comes from its name, a temporary suffix (``.cleaned``, ``.swap``, ``.deleted``) stripped first:

    .log, .checkpoint (KRaft snapshot)   record batches, one line per batch; records too with
                                         --deep-iteration or --print-data-log
    .index / .timeindex                  entries, with Kafka's cross-check against the .log beside
    .snapshot                            producer state (kafka-storage.md §2)
    .txnindex                            aborted transactions
    *-offset-checkpoint, leader-epoch-checkpoint    the text checkpoints

Text output is Kafka's, field for field (core/.../tools/DumpLogSegments.scala at the commit of
reference/kafka-storage.md)::

    Dumping 00000000000000000000.log
    Log starting offset: 0
    baseOffset: 0 lastOffset: 0 count: 1 baseSequence: -1 lastSequence: -1 producerId: -1
      producerEpoch: -1 partitionLeaderEpoch: 0 isTransactional: false isControl: false
      deleteHorizonMs: OptionalLong.empty position: 0 CreateTime: 1000 size: 70 magic: 2
      compresscodec: none crc: 1902797193 isvalid: true                       (one line)
    | offset: 0 CreateTime: 1000 keySize: 1 valueSize: 1 sequence: -1 headerKeys: []
      key: k payload: v                                                      (one line)

Index mismatches, time-index errors and non-consecutive offsets go to stderr after the last file,
as Kafka prints them (newest first where Kafka prepends). ``--json`` prints one JSON document per
file instead (see ``_batch_json``/``_record_json`` for the fields, named as in the text).

``--offsets-decoder`` and ``--transaction-log-decoder`` print the records of ``__consumer_offsets``
and ``__transaction_state`` as Kafka's options of those names do (``group_records``,
``transaction_records``); with ``--json`` a record carries the decoded ``key`` and ``payload`` as
objects (payload null for a tombstone), or ``decodeError`` with the line the text would print.

``--verify`` checks instead of dumping: every batch's CRC and offsets (the rules by which
``LogSegment.recover`` would truncate), every offset-index entry (a batch boundary, no earlier
batch reaching its offset), every time-index entry (timestamps increasing, the batch holding its
offset has a max timestamp at or above it), snapshot CRCs and checkpoint syntax. Each problem is
printed as ``<file>: position <byte>: <what>``. ``recover`` runs the same checks (``check_log``,
``check_offset_index``, ``check_time_index``).

Exit codes: 0 clean; 1 when --verify, --index-sanity-check or --verify-index-only finds damage
or a snapshot/checkpoint cannot be parsed (a plain dump shows ``isvalid: false`` and exits 0, as
Kafka does); 2 for usage errors (a missing file).
"""

from __future__ import annotations

import argparse
import sys
from pathlib import Path
from typing import Any, Callable, TextIO

from ops.tools import EXIT_OK, EXIT_PROBLEMS, UsageError
from ops.tools.output import EscapingStream, json_line, printable
from ops.tools.dump_log_common import (
    DECODERS,
    DumpOptions,
    Trailers,
    _positive_int,
    file_kind,
    read_only,
)
from ops.tools.dump_log_files import (
    _dump_checkpoint,
    _dump_index,
    _dump_snapshot,
    _dump_time_index,
    _dump_txn_index,
    parse_producer_snapshot,
    read_checkpoint,
)
from ops.tools.dump_log_records import _dump_log, control_json, control_text, decoder
from ops.tools.dump_log_verify import (
    LogCheck,
    Problem,
    check_log,
    check_offset_index,
    check_time_index,
    verify_file,
)


# ---- the subcommand ----------------------------------------------------------------------------
def register(subparsers: argparse._SubParsersAction) -> None:
    parser = subparsers.add_parser(
        "dump-log", help="print or verify segment, index, snapshot and checkpoint files",
        description="Kafka's DumpLogSegments: print the batches and records of .log files, the "
                    "entries of .index/.timeindex/.snapshot/.txnindex files and text checkpoints; "
                    "with --verify check them instead. Files are only read.")
    parser.add_argument("files", nargs="*", metavar="FILE", help="files to dump")
    parser.add_argument("--files", dest="files_option", action="append", default=[],
                        metavar="FILE,...", help="comma-separated files (Kafka's option)")
    parser.add_argument("--print-data-log", action="store_true",
                        help="print keys and values (implies --deep-iteration)")
    parser.add_argument("--deep-iteration", action="store_true", help="print every record")
    parser.add_argument("--skip-record-metadata", action="store_true",
                        help="print only keys and values of records")
    parser.add_argument("--index-sanity-check", action="store_true",
                        help="only run the broker's startup sanity check of index files")
    parser.add_argument("--verify-index-only", action="store_true",
                        help="only report index entries that do not match the log")
    parser.add_argument("--max-bytes", type=_positive_int, default=None, metavar="N",
                        help="read at most N bytes of each .log file")
    parser.add_argument("--key-decoder", choices=DECODERS, default=None,
                        help="how keys print (default string; implies --print-data-log)")
    parser.add_argument("--value-decoder", choices=DECODERS, default=None,
                        help="how values print (default string; implies --print-data-log)")
    parser.add_argument("--offsets-decoder", action="store_true",
                        help="print records as __consumer_offsets offset commits and group "
                             "metadata (implies --print-data-log)")
    parser.add_argument("--transaction-log-decoder", action="store_true",
                        help="print records as __transaction_state transaction metadata "
                             "(implies --print-data-log)")
    parser.add_argument("--json", action="store_true", help="one JSON document per file")
    parser.add_argument("--verify", action="store_true",
                        help="check CRCs, offsets, index and time index entries, snapshots and "
                             "checkpoints; exit 1 on any damage")
    parser.set_defaults(handler=run)


def run(args: argparse.Namespace) -> int:
    opts = DumpOptions.from_args(args)
    names = [*args.files, *(n for group in args.files_option for n in group.split(",") if n)]
    if not names:
        raise UsageError("no files given")
    missing = [printable(n) for n in names if not Path(n).is_file()]
    if missing:
        raise UsageError(f"not a file: {', '.join(missing)}")
    out, err = sys.stdout, sys.stderr
    for stream in (out, err):
        try:
            stream.reconfigure(errors="replace")        # type: ignore[attr-defined]
        except (AttributeError, ValueError):
            pass
    trailers = Trailers()
    for name in names:
        path = Path(name)
        # every line naming the file shows control characters of its name escaped
        raw = [name, str(path), str(path.absolute()), path.name]
        file_out, file_err = EscapingStream(out, raw), EscapingStream(err, raw)
        if opts.verify:
            verify_file(path, printable(name), opts, trailers, file_out)
        else:
            dump_file(path, printable(name), opts, trailers, file_out, file_err)
    if not opts.json:
        trailers.write(err)
    if trailers.damaged_files and opts.verify and not opts.json:
        err.write(f"dump-log: damage found in {len(trailers.damaged_files)} of {len(names)} "
                  f"files: {', '.join(trailers.damaged_files)}\n")
    return EXIT_PROBLEMS if trailers.damaged_files else EXIT_OK


# ---- dumping -----------------------------------------------------------------------------------
def dump_file(path: Path, name: str, opts: DumpOptions, trailers: Trailers, out: TextIO,
              err: TextIO) -> None:
    kind = file_kind(path)
    if not opts.json:
        out.write(f"Dumping {name}\n")
    if kind == "unknown":
        if opts.json:
            out.write(json_line({"file": name, "type": kind, "errors": ["unknown file type"]})
                      + "\n")
        else:
            err.write(f"Ignoring unknown file {name}\n")
        return
    dumpers: dict[str, Callable[..., dict[str, Any]]] = {
        "log": _dump_log, "kraft-snapshot": _dump_log, "offset-index": _dump_index,
        "time-index": _dump_time_index, "producer-snapshot": _dump_snapshot,
        "txn-index": _dump_txn_index, "offset-checkpoint": _dump_checkpoint,
        "epoch-checkpoint": _dump_checkpoint}
    doc = dumpers[kind](path, name, kind, opts, trailers, out, err)
    if opts.json:
        out.write(json_line({"file": name, "type": kind, **doc}) + "\n")


__all__ = ["DumpOptions", "LogCheck", "Problem", "check_log", "check_offset_index",
           "check_time_index", "control_json", "control_text", "decoder", "dump_file",
           "file_kind", "parse_producer_snapshot", "read_checkpoint", "read_only", "register",
           "run", "verify_file"]
