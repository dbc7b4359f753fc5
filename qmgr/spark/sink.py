"""One partition of ``df.write.format("qmgr")``: its rows published on one stream publisher,
batched, paced to the partition's rate, each acknowledgement recorded in the ack log."""

from __future__ import annotations

import json
import os
import time
from collections.abc import Iterable, Iterator, Sequence
from dataclasses import asdict, dataclass
from itertools import islice
from pathlib import Path
from typing import IO, Any

import pyarrow as pa

from qmgr.client import MQClientError, QueueManagerClient
from qmgr.spark.options import QmgrSourceError, Security, WriteOptions

PUBLISHER_PROPERTY = "LoadPublisher"
SEQ_PROPERTY = "LoadSeq"
RATE_BATCH_SECONDS = 0.01  # with a rate, a batch holds at most this long's worth of messages


class QmgrWriteError(RuntimeError):
    """A partition could not publish everything (the node failed or refused a message)."""


Message = tuple[Any, Any, Any, Any]  # (topic, body, properties, persistent) of one row
COLUMNS = ("topic", "body", "properties", "persistent")


@dataclass(frozen=True)
class Columns:
    """The written DataFrame's columns (by their lower-case names) that the sink uses."""

    names: tuple[str | None, ...]  # the DataFrame's name for each of COLUMNS, None if absent

    @classmethod
    def of(cls, names: Sequence[str]) -> Columns:
        where = {n.lower(): n for n in names}
        if "body" not in where:
            raise QmgrSourceError(
                f"the DataFrame needs a body column (binary or string); it has {list(names)}"
            )
        return cls(tuple(where.get(c) for c in COLUMNS))

    @property
    def has_topic(self) -> bool:
        return self.names[0] is not None

    def messages(self, batches: Iterable[Any]) -> Iterator[Message]:
        """The rows of Arrow record batches as (topic, body, properties, persistent), the
        properties a dict of their own per row (None when null)."""
        for batch in batches:
            n = batch.num_rows
            columns = [
                [None] * n
                if name is None
                else _dicts(batch.column(name))
                if i == _PROPERTIES
                else batch.column(name).to_pylist()
                for i, name in enumerate(self.names)
            ]
            yield from zip(*columns, strict=True)


_PROPERTIES = COLUMNS.index("properties")


def _dicts(column: Any) -> list[dict[Any, Any] | None]:
    """A map column's rows as dicts, built from its flat keys and values: Arrow's own
    ``to_pylist`` makes a Python object of each entry on the way (a list of pairs per row),
    which took more CPU than publishing the row (1.6 against 0.3 us a row of two entries)."""
    if not isinstance(column, pa.MapArray):
        return [None if row is None else dict(row) for row in column.to_pylist()]
    offsets = column.offsets.to_pylist()  # absolute in the flat arrays, also in a slice
    first, last = offsets[0], offsets[-1]
    pairs = iter(
        zip(column.keys.to_pylist()[first:last], column.items.to_pylist()[first:last], strict=True)
    )
    rows: list[dict[Any, Any] | None] = [
        dict(islice(pairs, end - start)) for start, end in zip(offsets, offsets[1:], strict=False)
    ]
    if column.null_count:
        rows = [
            row if valid else None
            for row, valid in zip(rows, column.is_valid().to_pylist(), strict=True)
        ]
    return rows


@dataclass
class WriteResult:
    """What a partition did (the commit message sent back to the driver)."""

    partition: int
    attempt: int
    sent: int
    acknowledged: int


def client(address: str, security: Security, timeout: float = 30.0) -> QueueManagerClient:
    return QueueManagerClient(address, timeout, **asdict(security))


class AckLog:
    """``ack-<partition>-<attempt>.jsonl``: one line per acknowledged message, written as each
    acknowledgement arrives (so it holds what was acknowledged even when the task fails).

    The sender records each message under the batch it goes in before publishing it; the
    stream's reader thread takes a batch's records once the node has answered it."""

    def __init__(self, directory: str | None, partition: int, attempt: int) -> None:
        self._file: IO[str] | None = None
        if directory is not None:
            Path(directory).mkdir(parents=True, exist_ok=True)
            path = os.path.join(directory, f"ack-{partition}-{attempt}.jsonl")
            self._file = open(path, "w", encoding="utf-8")  # noqa: SIM115 - closed in close()
        self._batches: dict[int, list[tuple[str, str, str, int]]] = {}
        self._json: dict[str | None, str] = {None: "null"}
        self.acknowledged = 0

    def sending(
        self, batch_id: int, publisher: str | None, seq: str | None, topic: str, sent_ns: int
    ) -> None:
        if self._file is None:
            return
        batch = self._batches.get(batch_id)
        if batch is None:
            batch = self._batches[batch_id] = []
        head = self._json.get(publisher)
        if head is None:
            head = self._json[publisher] = json.dumps(publisher)
        tail = self._json.get(topic)
        if tail is None:
            tail = self._json[topic] = json.dumps(topic)
        batch.append((head, _seq(seq), tail, sent_ns))  # one line made of it when acknowledged

    def acked(self, batch_id: int, accepted: int) -> None:
        """The node answered batch ``batch_id``: its first ``accepted`` messages are published."""
        ack_ns = time.time_ns()
        self.acknowledged += accepted
        if self._file is None:
            return
        entries = self._batches.pop(batch_id, [])[:accepted]
        self._file.write(
            "".join(
                f'{{"publisher": {publisher}, "seq": {seq}, "topic": {topic}, '
                f'"ack_ns": {ack_ns}, "sent_ns": {sent_ns}}}\n'
                for publisher, seq, topic, sent_ns in entries
            )
        )
        self._file.flush()

    def close(self) -> None:
        if self._file is not None:
            self._file.close()


def _seq(value: str | None) -> str:
    """LoadSeq as a JSON integer (null when it is not one)."""
    try:
        return str(int(value))  # type: ignore[arg-type]
    except (TypeError, ValueError):
        return "null"


def _body(value: Any) -> bytes:
    if isinstance(value, bytes | bytearray | memoryview):
        return bytes(value)
    if isinstance(value, str):
        return value.encode()
    raise QmgrSourceError(f"a row's body is {type(value).__name__}, not binary or string")


def publish_rows(
    opts: WriteOptions, rows: Iterable[Message], partition: int, attempt: int
) -> WriteResult:
    """Publish every (topic, body, properties, persistent) row; raises
    :class:`QmgrWriteError` (the ack log holding what was acknowledged) when the node fails."""
    batch_size = opts.batch_size
    if opts.rate > 0:
        batch_size = max(1, min(batch_size, int(opts.rate * RATE_BATCH_SECONDS)))
    log = AckLog(opts.ack_log, partition, attempt)
    sent = 0
    qm = client(opts.address, opts.security)
    try:
        pub = qm.stream_publisher(batch_size, opts.window, on_ack=log.acked)
        start = 0.0  # when the first message went: the n-th goes n / rate seconds after it
        for topic, body, properties, persistent in rows:
            topic = topic or opts.topic
            if not topic:
                raise QmgrSourceError(
                    f"row {sent + 1} of partition {partition} has no topic and there is no "
                    "topic option"
                )
            if body is None:
                raise QmgrSourceError(f"row {sent + 1} of partition {partition} has no body")
            props = properties if properties is not None else {}  # the row's own dict
            if persistent is None:
                persistent = opts.persistent
            if opts.rate > 0 and sent > 0:
                delay = start + sent / opts.rate - time.monotonic()
                if delay > 0:
                    time.sleep(delay)
            sent_ns = time.time_ns()
            if sent == 0:  # read after the first's sent_ns: no later one is stamped early
                start = time.monotonic()
            if opts.sent_property:
                props[opts.sent_property] = str(sent_ns)
            log.sending(
                pub.pending_batch_id,
                props.get(PUBLISHER_PROPERTY),
                props.get(SEQ_PROPERTY),
                topic,
                sent_ns,
            )
            pub.publish(topic, _body(body), properties=props, persistent=persistent)
            sent += 1
        pub.flush()
    except MQClientError as exc:
        raise QmgrWriteError(
            f"qmgr data source: partition {partition} (attempt {attempt}) publishing to node "
            f"{opts.node} ({opts.address}) failed after {sent} messages sent, "
            f"{log.acknowledged} acknowledged: {exc}"
        ) from exc
    except QmgrSourceError:
        raise
    except ValueError as exc:  # a property the node cannot carry
        raise QmgrSourceError(f"row {sent + 1} of partition {partition}: {exc}") from exc
    finally:
        qm.close()
        log.close()
    return WriteResult(partition, attempt, sent, log.acknowledged)
