"""The "qmgr" Spark data source (PySpark's Python Data Source API, Spark 4).

Writing publishes each row on an MQ node, one stream publisher per partition::

    df.write.format("qmgr").mode("append").option("node", "QM1").option("topic", "Prices/A").save()

Reading drains MQ durable subscriptions or queues, or Service Bus queues or topic
subscriptions (through azure-servicebus), one partition per source, in order::

    spark.read.format("qmgr").option("node", "QM1").option("subscription", "S1").load()
    spark.read.format("qmgr").option("servicebus", "127.0.0.1:5672").option("queue", "q").load()

The options are described in the README ("Spark") and checked on the driver, before any
message is sent or read (:class:`qmgr.spark.options.QmgrSourceError`). Clients are created in
the partitions: the reader and writer objects only carry options."""

from __future__ import annotations

import os
from collections.abc import Iterator, Sequence
from dataclasses import replace
from typing import Any

from pyspark import TaskContext
from pyspark.sql.datasource import (
    DataSource,
    DataSourceArrowWriter,
    DataSourceReader,
    InputPartition,
    SimpleDataSourceStreamReader,
    WriterCommitMessage,
)
from pyspark.sql.types import BinaryType, BooleanType, MapType, StringType, StructType

from qmgr.client import MQClientError
from qmgr.spark.drain import READ_SCHEMA, MqStream, drain
from qmgr.spark.options import (
    MqSource,
    QmgrSourceError,
    ReadOptions,
    WriteOptions,
    read_options,
    write_options,
)
from qmgr.spark.sink import Columns, WriteResult, client, publish_rows

FORMAT = "qmgr"
STREAM_BATCH = 10_000  # the most messages in one micro-batch unless max_messages says
CONNECT_TIMEOUT = 10.0
COLUMN_TYPES: dict[str, tuple[Any, ...]] = {
    "body": (BinaryType(), StringType()),
    "topic": (StringType(),),
    "properties": (
        MapType(StringType(), StringType(), True),
        MapType(StringType(), StringType(), False),
    ),
    "persistent": (BooleanType(),),
}


class QmgrCommitMessage(WriterCommitMessage):
    def __init__(self, result: WriteResult) -> None:
        self.result = result


def _check_columns(schema: StructType) -> Columns:
    for field in schema.fields:
        allowed = COLUMN_TYPES.get(field.name.lower())
        if allowed is not None and field.dataType not in allowed:
            want = " or ".join(t.simpleString() for t in allowed)
            raise QmgrSourceError(
                f"column {field.name} is {field.dataType.simpleString()}, it must be {want}"
            )
    return Columns.of(schema.fieldNames())


def _check_node(opts: WriteOptions) -> None:
    """The node answers and accepts the credentials (before any partition starts publishing):
    a connection is opened and closed."""
    with client(opts.address, opts.security, CONNECT_TIMEOUT) as qm:
        try:
            qm.wait_ready(CONNECT_TIMEOUT)
        except MQClientError as exc:
            raise QmgrSourceError(
                f"node {opts.node} ({opts.address}) does not answer: {exc}"
            ) from None
        try:
            qm.connection_id()
        except MQClientError as exc:
            raise QmgrSourceError(f"node {opts.node} ({opts.address}) refused: {exc}") from None


def _subscription_queue(src: MqSource) -> MqSource:
    """The queue of the durable subscription ``src.subscription`` (checked on the driver),
    asked with the partitions' own deadline: a node that has just taken a large load answers
    slowly, and the check must not give up sooner than the read it precedes."""
    with client(src.address, src.security) as qm:
        try:
            if src.subscription is None:
                ok, _ = qm.mqsc_ok(f"DISPLAY QLOCAL('{src.queue}')")
                if not ok:
                    raise QmgrSourceError(f"no queue {src.queue} on node {src.address}")
                return src
            ok, records = qm.mqsc_ok(f"DISPLAY SUB('{src.subscription}') DEST")
        except MQClientError as exc:
            raise QmgrSourceError(f"node {src.address} refused the read: {exc}") from None
    if not ok or not records or not records[0].attrs.get("DEST"):
        raise QmgrSourceError(f"no subscription {src.subscription} on node {src.address}")
    return replace(src, queue=records[0].attrs["DEST"])


class QmgrWriter(DataSourceArrowWriter):
    def __init__(self, opts: WriteOptions, columns: Columns) -> None:
        self.opts = opts
        self.columns = columns

    def write(self, iterator: Iterator[Any]) -> QmgrCommitMessage:
        ctx = TaskContext.get()
        partition = ctx.partitionId() if ctx is not None else 0
        attempt = ctx.attemptNumber() if ctx is not None else 0
        rows = self.columns.messages(iterator)
        return QmgrCommitMessage(publish_rows(self.opts, rows, partition, attempt))


class QmgrReader(DataSourceReader):
    def __init__(self, opts: ReadOptions) -> None:
        self.opts = opts

    def partitions(self) -> Sequence[InputPartition]:
        return [InputPartition(src) for src in self.opts.sources]

    def read(self, partition: InputPartition) -> Iterator[tuple[Any, ...]]:
        o = self.opts
        return drain(partition.value, o.idle, o.max_messages, o.batch_size)


class QmgrStreamReader(SimpleDataSourceStreamReader):
    """``spark.readStream.format("qmgr")`` of one MQ subscription or queue: each micro-batch
    takes what has arrived (see :class:`qmgr.spark.drain.MqStream`)."""

    def __init__(self, stream: MqStream) -> None:
        self.stream = stream

    def initialOffset(self) -> dict[str, int]:
        return {"taken": 0}

    def read(self, start: dict[str, int]) -> tuple[Iterator[tuple[Any, ...]], dict[str, int]]:
        rows = self.stream.batch(start["taken"])
        return iter(rows), {"taken": start["taken"] + len(rows)}

    def readBetweenOffsets(
        self, start: dict[str, int], end: dict[str, int]
    ) -> Iterator[tuple[Any, ...]]:
        return iter(self.stream.replay(start["taken"], end["taken"]))

    def commit(self, end: dict[str, int]) -> None:
        self.stream.commit(end["taken"])


class QmgrDataSource(DataSource):
    """``format("qmgr")``: see the module documentation."""

    # QMGR_HOME of the driver that registered the source (see :func:`for_driver`)
    driver_home: str | None = None

    def _with_driver_home(self) -> None:
        """Node names resolve in the worker as they do on the driver: Spark's Python workers
        keep the environment Spark's JVM started with, which may predate the driver's
        QMGR_HOME."""
        if self.driver_home is not None:
            os.environ["QMGR_HOME"] = self.driver_home

    @classmethod
    def name(cls) -> str:
        return FORMAT

    def schema(self) -> str:
        return READ_SCHEMA

    def reader(self, schema: StructType) -> QmgrReader:
        self._with_driver_home()
        opts = read_options(self.options)
        sources = tuple(
            _subscription_queue(src) if isinstance(src, MqSource) else src for src in opts.sources
        )
        return QmgrReader(replace(opts, sources=sources))

    def simpleStreamReader(self, schema: StructType) -> QmgrStreamReader:
        reader = self.reader(schema)
        sources = reader.opts.sources
        if len(sources) != 1 or not isinstance(sources[0], MqSource):
            raise QmgrSourceError(
                "readStream takes one MQ subscription or queue (option node with one "
                "subscription or queue)"
            )
        o = reader.opts
        stream = MqStream(sources[0], o.idle, o.max_messages or STREAM_BATCH, o.batch_size)
        return QmgrStreamReader(stream)

    def writer(self, schema: StructType, overwrite: bool) -> QmgrWriter:
        if overwrite:
            raise QmgrSourceError("messages can only be appended: use mode('append')")
        self._with_driver_home()
        opts = write_options(self.options)
        columns = _check_columns(schema)
        if not columns.has_topic and opts.topic is None:
            raise QmgrSourceError("the DataFrame has no topic column and there is no topic option")
        _check_node(opts)
        return QmgrWriter(opts, columns)


def for_driver(home: str | None) -> type[QmgrDataSource]:
    """The data source to register from a driver whose QMGR_HOME is ``home``: a subclass that
    carries it to Spark's Python workers (pickled by value with the class)."""
    return type("QmgrDataSourceOfDriver", (QmgrDataSource,), {"driver_home": home})
