"""``qmgr sb send|receive|peek|dlq|connection-string``: messages through Microsoft's own
azure-servicebus client, against a node's Service Bus port, as an application sees them.

    qmgr sb send QM1 orders '{"id": 1}' -p region=eu --message-id m-1
    qmgr sb receive QM1 orders --max 10               # peek-lock, then complete
    qmgr sb receive QM1 events/Subscriptions/audit --receive-and-delete
    qmgr sb peek QM1 orders -o json                   # or orders/$DeadLetterQueue
    qmgr sb dlq QM1 orders --resubmit                 # back to the queue, then completed
    qmgr sb connection-string QM1                     # what to give an application

NODE is a node name (the registry gives its Service Bus port, sb= on its READY line) or the
HOST:PORT of that port. PATH is a queue, or ``topic/Subscriptions/sub`` to receive from a
subscription; ``/$DeadLetterQueue`` after either reads its dead-letter sub-queue. A node started
with ``--servicebus-keys FILE`` checks SAS tokens: give the same file with ``--keys`` (or
``QMGR_SERVICEBUS_KEYS``), and ``--key-name`` to choose a key (default: one with Manage).
"""

from __future__ import annotations

import datetime as dt
import json
import logging
import sys
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from dataclasses import dataclass
from pathlib import Path
from typing import Any, TypeVar

import click

from qmgr.cli.sb import _console, _time, name_value, output_option, sb
from qmgr.launcher.registry import resolve_servicebus
from qmgr.servicebus.entities import parse_duration
from qmgr.servicebus.errors import ServiceBusError as NamespaceError
from qmgr.servicebus.sas import KeysFileError, Right, SasKeys, parse_keys

F = TypeVar("F", bound=Callable[..., Any])

EMULATOR_KEY_NAME = "RootManageSharedAccessKey"
EMULATOR_KEY = "SAS_KEY_VALUE"  # the key of Microsoft's emulator's connection string
DEAD_LETTER_PROPERTIES = ("DeadLetterReason", "DeadLetterErrorDescription")
MESSAGE_FIELDS = (
    ("message_id", "--message-id"),
    ("correlation_id", "--correlation-id"),
    ("session_id", "--session-id"),
    ("subject", "--subject"),
    ("content_type", "--content-type"),
    ("to", "--to"),
    ("reply_to", "--reply-to"),
)


# ---------------------------------------------------------------------- the connection


def connection_string(address: str, key_name: str, key: str) -> str:
    """The emulator-style connection string of a Service Bus port."""
    return (
        f"Endpoint=sb://{address};SharedAccessKeyName={key_name};SharedAccessKey={key};"
        "UseDevelopmentEmulator=true;"
    )


def read_keys(path: str) -> SasKeys:
    try:
        return parse_keys(Path(path).read_text(encoding="utf-8"))
    except (OSError, UnicodeDecodeError, KeysFileError) as exc:
        raise click.BadParameter(f"{path}: {exc}", param_hint="--keys") from None


def credentials(keys_file: str | None, key_name: str | None) -> tuple[str, str]:
    """(key name, key) to sign with: the emulator's without a keys file; else ``key_name``, or
    the first key with Manage (it can do everything), or the first key."""
    if keys_file is None:
        return key_name or EMULATOR_KEY_NAME, EMULATOR_KEY
    keys = read_keys(keys_file)
    if key_name is not None:
        found = keys.get(key_name)
        if found is None:
            known = ", ".join(k.name for k in keys)
            raise click.BadParameter(
                f"{keys_file} has no key '{key_name}' (it has {known})", param_hint="--key-name"
            )
        return found.name, found.key
    every = list(keys)
    chosen = next((k for k in every if k.rights & Right.MANAGE), every[0])
    return chosen.name, chosen.key


def key_options(f: F) -> F:
    f = click.option(
        "--key-name",
        help="The key of --keys to sign with (default: one with Manage).",
    )(f)
    return click.option(
        "--keys",
        "keys_file",
        type=click.Path(dir_okay=False, exists=True),
        envvar="QMGR_SERVICEBUS_KEYS",
        help="The node's --servicebus-keys file (default: the emulator's key, which a node "
        "without keys accepts).",
    )(f)


def _address(node: str) -> str:
    try:
        return resolve_servicebus(node.removeprefix("sb://").rstrip("/"))
    except LookupError as exc:
        raise click.ClickException(str(exc)) from None


@contextmanager
def sdk_client(node: str, keys_file: str | None, key_name: str | None) -> Iterator[Any]:
    """A ServiceBusClient on NODE's Service Bus port; the SDK's errors become a message and
    exit code 1."""
    from azure.servicebus import ServiceBusClient
    from azure.servicebus.exceptions import ServiceBusConnectionError, ServiceBusError

    logging.getLogger("azure").setLevel(logging.ERROR)
    name, key = credentials(keys_file, key_name)
    address = _address(node)
    conn = connection_string(address, name, key)
    try:
        with ServiceBusClient.from_connection_string(conn, retry_total=0) as client:
            yield client
    except ServiceBusConnectionError as exc:
        raise click.ClickException(
            f"{type(exc).__name__}: {exc.message} (is {address} the node's Service Bus port, "
            "sb= on its READY line?)"
        ) from None
    except ServiceBusError as exc:
        raise click.ClickException(f"{type(exc).__name__}: {exc.message}") from None


# ---------------------------------------------------------------------- paths


@dataclass(frozen=True)
class EntityPath:
    """A PATH argument: a queue, or a topic's subscription; maybe its dead-letter queue."""

    queue: str | None
    topic: str | None
    subscription: str | None
    sub_queue: str | None  # "deadletter", "transferdeadletter"

    @classmethod
    def parse(cls, text: str) -> EntityPath:
        parts = [p for p in text.split("/") if p]
        low = [p.lower() for p in parts]
        sub_queue = None
        if low[-2:] == ["$transfer", "$deadletterqueue"]:
            parts, low, sub_queue = parts[:-2], low[:-2], "transferdeadletter"
        elif low[-1:] == ["$deadletterqueue"]:
            parts, low, sub_queue = parts[:-1], low[:-1], "deadletter"
        if not parts:
            raise click.BadParameter(f"'{text}' names no entity", param_hint="PATH")
        if "subscriptions" in low[1:]:
            at = low.index("subscriptions", 1)
            topic, sub = "/".join(parts[:at]), "/".join(parts[at + 1 :])
            if not sub:
                raise click.BadParameter(
                    f"'{text}' names no subscription (topic/Subscriptions/NAME)",
                    param_hint="PATH",
                )
            return cls(None, topic, sub, sub_queue)
        return cls("/".join(parts), None, None, sub_queue)

    @property
    def entity(self) -> str:
        """Where a copy goes to reach this entity again: the queue, or the subscription's
        topic."""
        return self.queue or self.topic or ""

    def dead_letter(self) -> EntityPath:
        return EntityPath(self.queue, self.topic, self.subscription, "deadletter")

    def receiver(self, client: Any, **options: Any) -> Any:
        from azure.servicebus import ServiceBusSubQueue

        if self.sub_queue is not None:
            options["sub_queue"] = ServiceBusSubQueue(self.sub_queue)
        if self.queue is not None:
            return client.get_queue_receiver(self.queue, **options)
        return client.get_subscription_receiver(self.topic, self.subscription, **options)


# ---------------------------------------------------------------------- messages out


def _camel(attr: str) -> str:
    first, *rest = attr.split("_")
    return first + "".join(p.capitalize() for p in rest)


def _jsonable(value: Any) -> Any:
    if value is None or isinstance(value, bool | int | float | str):
        return value
    if isinstance(value, bytes):
        try:
            return value.decode()
        except UnicodeDecodeError:
            return value.hex()
    if isinstance(value, dt.datetime):
        return value.timestamp()
    return str(value)


def body_bytes(msg: Any) -> bytes:
    body = msg.body
    if isinstance(body, bytes | bytearray):
        return bytes(body)
    if isinstance(body, str):
        return body.encode()
    if body is None:
        return b""
    try:
        return b"".join(bytes(part) for part in body)
    except TypeError:
        return json.dumps(_jsonable(body)).encode()


def message_dict(msg: Any) -> dict[str, Any]:
    """A received or peeked message as JSON (the shape ``qmgr sb peek -o json`` prints)."""
    state = getattr(msg, "state", None)
    out: dict[str, Any] = {
        "sequenceNumber": msg.sequence_number,
        "state": state.name.capitalize() if state is not None else "Active",
        "deliveryCount": msg.delivery_count,
        "enqueuedTime": _jsonable(msg.enqueued_time_utc),
    }
    try:
        out["expiresAt"] = _jsonable(msg.expires_at_utc)
    except (OverflowError, ValueError):
        out["expiresAt"] = None
    for attr, _ in MESSAGE_FIELDS:
        value = getattr(msg, attr, None)
        if value is not None:
            out[_camel(attr)] = value
    for attr in ("dead_letter_reason", "dead_letter_error_description", "dead_letter_source"):
        value = getattr(msg, attr, None)
        if value is not None:
            out[_camel(attr)] = value
    out["properties"] = {
        _jsonable(k): _jsonable(v) for k, v in (msg.application_properties or {}).items()
    }
    body = body_bytes(msg)
    try:
        out["body"] = body.decode()
    except UnicodeDecodeError:
        out["bodyHex"] = body.hex()
    return out


BODY_ON_TERMINAL = 80  # characters of a body a table on a terminal shows


def print_messages(title: str, items: list[dict[str, Any]], output: str, empty: str) -> None:
    if output == "json":
        click.echo(json.dumps(items, indent=2))
        return
    from rich.table import Table

    dead = any("deadLetterReason" in i for i in items)
    table = Table(title=title, title_justify="left")
    for column in ("seq", "state", "deliveries", "enqueued"):
        table.add_column(column, no_wrap=True)
    for column in ("message id", "subject", "properties", *(["reason"] if dead else [])):
        table.add_column(column, overflow="fold")
    table.add_column("body", overflow="fold")
    on_terminal = sys.stdout.isatty()
    cut = False
    for item in items:
        body = str(item.get("body", item.get("bodyHex", "")))
        props = {k: v for k, v in item["properties"].items() if k not in DEAD_LETTER_PROPERTIES}
        row = [
            str(item["sequenceNumber"]),
            item["state"],
            str(item["deliveryCount"]),
            _time(item["enqueuedTime"] or 0),
            str(item.get("messageId", "")),
            str(item.get("subject", "")),
            json.dumps(props) if props else "",
        ]
        if dead:
            row.append(str(item.get("deadLetterReason", "")))
        if on_terminal and len(body) > BODY_ON_TERMINAL:
            body = body[: BODY_ON_TERMINAL - 3] + "..."
            cut = True
        table.add_row(*row, body)
    _console().print(table)
    if cut:
        click.echo(
            f"bodies cut at {BODY_ON_TERMINAL} characters; -o json shows them whole", err=True
        )
    if not items:
        click.echo(empty, err=True)


# ---------------------------------------------------------------------- messages in


def application_properties(items: tuple[str, ...]) -> dict[str, Any]:
    """``NAME=VALUE`` (a string) or ``NAME:=JSON`` (typed: ``n:=5``, ``ok:=true``)."""
    props: dict[str, Any] = {}
    for item in items:
        name, typed, _ = name_value(item, "--property")
        if isinstance(typed, dict | list):
            raise click.BadParameter(
                f"{item!r}: an application property is a single value", param_hint="--property"
            )
        props[name] = typed
    return props


def copy_of(msg: Any) -> Any:
    """A new message with what ``msg`` was sent with (not its dead-letter reason)."""
    from azure.servicebus import ServiceBusMessage

    props = {
        _jsonable(k): v
        for k, v in (msg.application_properties or {}).items()
        if _jsonable(k) not in DEAD_LETTER_PROPERTIES
    }
    fields = {attr: getattr(msg, attr, None) for attr, _ in MESSAGE_FIELDS}
    return ServiceBusMessage(
        body_bytes(msg),
        application_properties=props or None,
        time_to_live=msg.time_to_live,
        reply_to_session_id=msg.reply_to_session_id,
        **{k: v for k, v in fields.items() if v is not None},
    )


# ---------------------------------------------------------------------- commands


def max_option(default: int) -> Callable[[F], F]:
    return click.option(
        "--max",
        "max_count",
        default=default,
        show_default=True,
        type=click.IntRange(1),
        help="At most this many messages.",
    )


def _message_options(f: F) -> F:
    for attr, name in reversed(MESSAGE_FIELDS):
        f = click.option(name, f"m_{attr}", help=f"The message's {attr.replace('_', ' ')}.")(f)
    return f


@sb.command()
@click.argument("node")
@click.argument("path")
@click.argument("body", required=False)
@click.option(
    "-p",
    "--property",
    "properties",
    multiple=True,
    metavar="NAME=VALUE",
    help="Application property (repeat; NAME:=JSON for a typed value).",
)
@_message_options
@click.option("--ttl", help="Time to live (ISO 8601 or d.hh:mm:ss).")
@click.option(
    "--count", default=1, show_default=True, type=click.IntRange(1), help="Send this many."
)
@key_options
def send(
    node: str,
    path: str,
    body: str | None,
    properties: tuple[str, ...],
    ttl: str | None,
    count: int,
    keys_file: str | None,
    key_name: str | None,
    **fields: Any,
) -> None:
    """Send a message (BODY, or standard input) to the queue or topic PATH, in one batch of
    --count messages; it is stored once the command returns."""
    from azure.servicebus import ServiceBusMessage

    text = body if body is not None else sys.stdin.read()
    props: Any = application_properties(properties)
    options: dict[str, Any] = {
        attr: fields[f"m_{attr}"] for attr, _ in MESSAGE_FIELDS if fields.get(f"m_{attr}")
    }
    if ttl is not None:
        try:
            options["time_to_live"] = dt.timedelta(seconds=parse_duration(ttl))
        except NamespaceError as exc:
            raise click.BadParameter(exc.text, param_hint="--ttl") from None
    messages = [
        ServiceBusMessage(text, application_properties=props or None, **options)
        for _ in range(count)
    ]
    with sdk_client(node, keys_file, key_name) as client, client.get_queue_sender(path) as sender:
        sender.send_messages(messages)
    click.echo(f"sent {count} message{'s' if count != 1 else ''} to {path}")


@sb.command()
@click.argument("node")
@click.argument("path")
@max_option(1)
@click.option(
    "--wait", default=5.0, show_default=True, help="Seconds to wait for the first message."
)
@click.option(
    "--receive-and-delete",
    is_flag=True,
    help="Remove the messages as they are handed out (default: peek-lock, then complete).",
)
@click.option("--session", help="Receive this session's messages (session-enabled entities).")
@output_option
@key_options
def receive(
    node: str,
    path: str,
    max_count: int,
    wait: float,
    receive_and_delete: bool,
    session: str | None,
    output: str,
    keys_file: str | None,
    key_name: str | None,
) -> None:
    """Receive up to --max messages from a queue or subscription PATH (peek-lock and complete
    each, or --receive-and-delete) and print them."""
    from azure.servicebus import ServiceBusReceiveMode

    mode = (
        ServiceBusReceiveMode.RECEIVE_AND_DELETE
        if receive_and_delete
        else ServiceBusReceiveMode.PEEK_LOCK
    )
    target = EntityPath.parse(path)
    items: list[dict[str, Any]] = []
    with (
        sdk_client(node, keys_file, key_name) as client,
        target.receiver(client, receive_mode=mode, session_id=session, max_wait_time=wait) as r,
    ):
        while len(items) < max_count:
            got = r.receive_messages(max_message_count=max_count - len(items), max_wait_time=wait)
            if not got:
                break
            for msg in got:
                items.append(message_dict(msg))
                if not receive_and_delete:
                    r.complete_message(msg)
    print_messages(path, items, output, f"no messages in {path}")


@sb.command()
@click.argument("node")
@click.argument("path")
@click.option(
    "--from", "from_sequence", default=0, show_default=True, help="First sequence number."
)
@max_option(100)
@click.option("--session", help="Only this session's messages.")
@output_option
@key_options
def peek(
    node: str,
    path: str,
    from_sequence: int,
    max_count: int,
    session: str | None,
    output: str,
    keys_file: str | None,
    key_name: str | None,
) -> None:
    """Look at the messages of a queue or subscription PATH without locking them (active,
    deferred and scheduled); PATH may end in /$DeadLetterQueue."""
    items = _peek(
        node, EntityPath.parse(path), from_sequence, max_count, session, keys_file, key_name
    )
    print_messages(path, items, output, f"no messages in {path}")


def _peek(
    node: str,
    target: EntityPath,
    from_sequence: int,
    max_count: int,
    session: str | None,
    keys_file: str | None,
    key_name: str | None,
) -> list[dict[str, Any]]:
    items: list[dict[str, Any]] = []
    with (
        sdk_client(node, keys_file, key_name) as client,
        target.receiver(client, session_id=session) as receiver,
    ):
        seq = from_sequence
        while len(items) < max_count:
            got = receiver.peek_messages(
                max_message_count=max_count - len(items), sequence_number=seq
            )
            if not got:
                break
            items += [message_dict(m) for m in got]
            seq = got[-1].sequence_number + 1
    return items


@sb.command()
@click.argument("node")
@click.argument("path")
@max_option(100)
@click.option(
    "--resubmit",
    is_flag=True,
    help="Send each message back (to the queue, or the subscription's topic) and complete it.",
)
@click.option(
    "--to", "destination", help="With --resubmit: send them to this queue or topic instead."
)
@click.option(
    "--wait", default=2.0, show_default=True, help="With --resubmit: seconds to wait for more."
)
@output_option
@key_options
def dlq(
    node: str,
    path: str,
    max_count: int,
    resubmit: bool,
    destination: str | None,
    wait: float,
    output: str,
    keys_file: str | None,
    key_name: str | None,
) -> None:
    """Read the dead-letter queue of a queue or subscription PATH (with each message's reason),
    or --resubmit its messages: each is sent again as it was first sent (without its
    dead-letter reason) and then completed, so none is lost if the command is interrupted."""
    target = EntityPath.parse(path)
    if target.sub_queue is not None:
        raise click.BadParameter("give the queue or subscription, not its /$DeadLetterQueue")
    title = f"{path}/$DeadLetterQueue"
    if destination is not None and not resubmit:
        raise click.UsageError("--to goes with --resubmit")
    if not resubmit:
        items = _peek(node, target.dead_letter(), 0, max_count, None, keys_file, key_name)
        print_messages(title, items, output, f"no dead-lettered messages in {path}")
        return
    to = destination or target.entity
    done: list[dict[str, Any]] = []
    with (
        sdk_client(node, keys_file, key_name) as client,
        target.dead_letter().receiver(client, max_wait_time=wait) as receiver,
        client.get_queue_sender(to) as sender,
    ):
        while len(done) < max_count:
            got = receiver.receive_messages(
                max_message_count=min(100, max_count - len(done)), max_wait_time=wait
            )
            if not got:
                break
            sender.send_messages([copy_of(m) for m in got])
            for msg in got:
                receiver.complete_message(msg)
                done.append(message_dict(msg))
    if output == "json":
        click.echo(json.dumps(done, indent=2))
    else:
        print_messages(title, done, output, f"no dead-lettered messages in {path}")
        click.echo(f"resubmitted {len(done)} message{'s' if len(done) != 1 else ''} to {to}")


@sb.command(name="connection-string")
@click.argument("node")
@key_options
def connection_string_(node: str, keys_file: str | None, key_name: str | None) -> None:
    """Print the connection string of NODE's Service Bus port, to give an application (with
    --keys: signed with a key of the node's keys file)."""
    name, key = credentials(keys_file, key_name)
    click.echo(connection_string(_address(node), name, key))
