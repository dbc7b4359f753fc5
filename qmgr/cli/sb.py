"""``qmgr sb``: manage the Service Bus namespace a node hosts, shaped like ``az servicebus``.

    qmgr sb queue create NODE orders --max-delivery-count 5 --lock-duration PT30S
    qmgr sb topic create NODE events
    qmgr sb subscription create NODE events audit --forward-to orders
    qmgr sb rule create NODE events audit big --sql-filter "size > 10" --sql-action "SET big = 1"
    qmgr sb rule create NODE events audit eu --label eu --correlation-filter region=west
    qmgr sb queue list NODE
    qmgr sb queue show NODE orders -o json
    qmgr sb import NODE Config.json
    qmgr sb export NODE > Config.json
    qmgr sb send NODE orders '{"id": 1}'     # messages: qmgr.cli.sb_data, through the SDK

NODE is a node name (``qmgr start --name``) or HOST:PORT. Options take the values the
management API documents: durations as ISO 8601 (``PT30S``, ``P1D``) or ``d.hh:mm:ss``; flags
such as ``--enable-session`` alone mean true, or take ``true``/``false``. An update changes only
the options given. Output is a table, or JSON with ``-o json``.

Creating, updating and deleting entities, ``import`` and ``export`` go through the node's Admin
service as an administrator (a user in group ``mqm`` with ``--auth``), with every right:
Service Bus keys do not apply there, so ``--forward-to`` is not checked against them. The
message commands (:mod:`qmgr.cli.sb_data`) use the Service Bus port with a key.
"""

from __future__ import annotations

import importlib
import json
import math
import sys
from collections.abc import Callable, Iterator, Mapping
from contextlib import contextmanager
from dataclasses import dataclass
from typing import Any, TypeVar

import click

from qmgr.cli.auth import Access, client_options
from qmgr.launcher.registry import resolve
from qmgr.servicebus.entities import (
    CORRELATION_FIELDS,
    MAX_TIMESPAN,
    QueueProperties,
    SubscriptionProperties,
    TopicProperties,
)
from qmgr.servicebus.errors import ServiceBusError

F = TypeVar("F", bound=Callable[..., Any])
Props = type[QueueProperties] | type[TopicProperties] | type[SubscriptionProperties]


@dataclass(frozen=True)
class _Option:
    prop: str  # the documented property name
    names: tuple[str, ...]  # az's name first, then ours
    kind: str  # str | int | bool | duration | status
    help: str


OPTIONS = (
    _Option("LockDuration", ("--lock-duration",), "duration", "How long a peek-lock lasts."),
    _Option(
        "MaxDeliveryCount",
        ("--max-delivery-count",),
        "int",
        "Deliveries before a message is dead-lettered.",
    ),
    _Option(
        "DefaultMessageTimeToLive",
        ("--default-message-time-to-live", "--ttl"),
        "duration",
        "TTL of messages that set none.",
    ),
    _Option(
        "DeadLetteringOnMessageExpiration",
        ("--enable-dead-lettering-on-message-expiration", "--dead-lettering-on-expiration"),
        "bool",
        "Expired messages go to the dead-letter queue.",
    ),
    _Option(
        "DeadLetteringOnFilterEvaluationExceptions",
        ("--dead-letter-on-filter-exceptions",),
        "bool",
        "Messages whose rule fails to evaluate go to the dead-letter queue.",
    ),
    _Option(
        "RequiresSession",
        ("--enable-session", "--requires-session"),
        "bool",
        "Session-aware (only when created).",
    ),
    _Option(
        "RequiresDuplicateDetection",
        ("--enable-duplicate-detection", "--requires-duplicate-detection"),
        "bool",
        "Drop messages whose MessageId was seen within the window (only when created).",
    ),
    _Option(
        "DuplicateDetectionHistoryTimeWindow",
        ("--duplicate-detection-history-time-window",),
        "duration",
        "Duplicate detection window.",
    ),
    _Option("ForwardTo", ("--forward-to",), "str", "Queue or topic to forward messages to."),
    _Option(
        "ForwardDeadLetteredMessagesTo",
        ("--forward-dead-lettered-messages-to",),
        "str",
        "Queue or topic to forward dead-lettered messages to.",
    ),
    _Option("MaxSizeInMegabytes", ("--max-size",), "int", "Maximum size in megabytes."),
    _Option(
        "MaxMessageSizeInKilobytes",
        ("--max-message-size",),
        "int",
        "Maximum message size in kilobytes.",
    ),
    _Option(
        "EnablePartitioning", ("--enable-partitioning",), "bool", "Partitioned (accepted only)."
    ),
    _Option(
        "EnableBatchedOperations",
        ("--enable-batched-operations",),
        "bool",
        "Server-side batching (accepted only).",
    ),
    _Option("SupportOrdering", ("--enable-ordering",), "bool", "Topic keeps message order."),
    _Option(
        "AutoDeleteOnIdle", ("--auto-delete-on-idle",), "duration", "Idle time before deletion."
    ),
    _Option("Status", ("--status",), "status", "Active, Disabled, SendDisabled, ReceiveDisabled."),
    _Option("UserMetadata", ("--user-metadata",), "str", "Free text kept with the entity."),
)
_BY_PARAM = {f"p_{o.prop.lower()}": o for o in OPTIONS}
_BY_PROP = {o.prop: o for o in OPTIONS}
_BOOL = click.Choice(["true", "false"], case_sensitive=False)


def property_options(cls: Props) -> Callable[[F], F]:
    """The options of the properties ``cls`` has, each passing its value as ``p_<name>``."""

    def decorate(f: F) -> F:
        for option in reversed(OPTIONS):
            if option.prop not in cls.SPECS:
                continue
            param = f"p_{option.prop.lower()}"
            if option.kind == "bool":
                f = click.option(
                    *option.names,
                    param,
                    type=_BOOL,
                    is_flag=False,
                    flag_value="true",
                    default=None,
                    help=option.help + " Alone: true.",
                )(f)
            else:
                f = click.option(
                    *option.names,
                    param,
                    type=click.INT if option.kind == "int" else click.STRING,
                    default=None,
                    help=option.help,
                )(f)
        return f

    return decorate


def properties_from(options: Mapping[str, Any], cls: Props) -> dict[str, Any]:
    """The documented properties the options set (only those given), checked here so a bad
    value names its option; the node checks them again."""
    props: dict[str, Any] = {}
    for param, value in options.items():
        option = _BY_PARAM.get(param)
        if option is None or value is None:
            continue
        if option.kind == "bool":
            value = str(value).lower() == "true"
        props[option.prop] = value
    try:
        cls.from_dict(props)
    except ServiceBusError as exc:
        raise click.BadParameter(exc.text, param_hint=_option_hint(exc.where)) from None
    return props


def _option_hint(where: str) -> str:
    option = _BY_PROP.get(where.rsplit(".", 1)[-1]) if where else None
    return option.names[0] if option is not None else where or "options"


# ---------------------------------------------------------------------- rules


def rule_from(
    sql_filter: str | None,
    sql_action: str | None,
    correlation: tuple[str, ...],
    fields: Mapping[str, str | None],
) -> dict[str, Any]:
    """The Config.json rule form of the options: a SQL filter, or a correlation filter from
    ``--correlation-filter NAME=VALUE`` (a system field such as ``Label``, else an application
    property; ``NAME:=JSON`` gives a typed value: ``n:=5``, ``flag:=true``) and the field
    options; plus an optional SQL action."""
    corr: dict[str, Any] = {}
    user: dict[str, Any] = {}
    system = {f.lower(): f for f in CORRELATION_FIELDS}
    system["subject"] = "Label"
    for item in correlation:
        name, typed, text = name_value(item, "--correlation-filter")
        field = system.get(name.lower())
        if field is not None:
            corr[field] = text
        else:
            user[name] = typed
    for field_name, given in fields.items():
        if given is not None:
            corr[field_name] = given
    if sql_filter is not None and (corr or user):
        raise click.UsageError("give either --sql-filter or a correlation filter, not both")
    rule: dict[str, Any]
    if sql_filter is not None:
        rule = {"FilterType": "Sql", "SqlFilter": {"SqlExpression": sql_filter}}
    elif corr or user:
        body: dict[str, Any] = dict(corr)
        if user:
            body["Properties"] = user
        rule = {"FilterType": "Correlation", "CorrelationFilter": body}
    else:
        raise click.UsageError("a rule needs --sql-filter or a correlation filter")
    if sql_action is not None:
        rule["Action"] = {"SqlExpression": sql_action}
    return rule


def name_value(item: str, option: str) -> tuple[str, Any, str]:
    """``NAME=VALUE`` as (name, value, text); ``NAME:=JSON`` gives a typed value (``n:=5``,
    ``flag:=true``)."""
    name, sep, text = item.partition("=")
    if not sep or not name or name == ":":
        raise click.BadParameter(f"{item!r} is not NAME=VALUE", param_hint=option)
    if not name.endswith(":"):
        return name, text, text
    try:
        return name[:-1], json.loads(text), text
    except json.JSONDecodeError:
        raise click.BadParameter(
            f"{item!r}: {text!r} is not a JSON value", param_hint=option
        ) from None


_FIELD_OPTIONS = {
    "CorrelationId": "--correlation-id",
    "MessageId": "--message-id",
    "To": "--to",
    "ReplyTo": "--reply-to",
    "Label": "--label",
    "SessionId": "--session-id",
    "ReplyToSessionId": "--reply-to-session-id",
    "ContentType": "--content-type",
}


def rule_options(f: F) -> F:
    for field_name, name in reversed(_FIELD_OPTIONS.items()):
        names = (name, "--subject") if field_name == "Label" else (name,)
        f = click.option(
            *names, f"c_{field_name.lower()}", help=f"Correlation filter: {field_name}."
        )(f)
    f = click.option(
        "--correlation-filter",
        "correlation",
        multiple=True,
        metavar="NAME=VALUE",
        help="Correlation filter field or application property (repeat; NAME:=JSON for a "
        "typed value).",
    )(f)
    f = click.option(
        "--sql-action", "--action-sql-expression", "sql_action", help="SQL rule action."
    )(f)
    f = click.option(
        "--sql-filter", "--filter-sql-expression", "sql_filter", help="SQL filter expression."
    )(f)
    return f


def _when(condition: bool, decorator: Callable[[F], F]) -> Callable[[F], F]:
    return decorator if condition else (lambda f: f)


def _first_rule(options: Mapping[str, Any]) -> tuple[str, dict[str, Any]] | None:
    """``subscription create`` with a filter option: (rule name, rule) to start with instead of
    the ``$Default`` true filter (as NServiceBus does with a ``$default`` false filter)."""
    given = [k for k, v in options.items() if _is_rule_param(k) and v not in (None, ())]
    if not given:
        if options.get("rule_name") not in (None, "$Default"):
            raise click.UsageError("--rule-name needs a filter option (--sql-filter, ...)")
        return None
    return str(options.get("rule_name") or "$Default"), _rule_of(options)


def _is_rule_param(param: str) -> bool:
    return param in ("sql_filter", "sql_action", "correlation") or param.startswith("c_")


def _rule_of(options: Mapping[str, Any]) -> dict[str, Any]:
    fields = {field_name: options.get(f"c_{field_name.lower()}") for field_name in _FIELD_OPTIONS}
    return rule_from(
        options.get("sql_filter"), options.get("sql_action"), options.get("correlation", ()), fields
    )


# ---------------------------------------------------------------------- output


def output_option(f: F) -> F:
    return click.option(
        "-o",
        "--output",
        type=click.Choice(["table", "json"]),
        default="table",
        show_default=True,
        help="Output format.",
    )(f)


def _time(seconds: float) -> str:
    if not seconds:
        return "-"
    import datetime as dt

    return dt.datetime.fromtimestamp(seconds, dt.UTC).strftime("%Y-%m-%d %H:%M:%S")


def _console() -> Any:
    from rich.console import Console

    return Console() if sys.stdout.isatty() else Console(width=200)


def print_entity(info: Any, output: str) -> None:
    """One entity: its properties, then (queues, topics, subscriptions) its counts."""
    if output == "json":
        click.echo(json.dumps(info.to_dict(), indent=2))
        return
    from rich.table import Table

    table = Table(title=f"{info.kind} {info.path}", show_header=False, title_justify="left")
    table.add_column("property", style="bold")
    table.add_column("value")
    for name, value in info.properties.items():
        table.add_row(name, _show(value))
    if info.kind != "rule":
        counts = vars(info.counts)
        names = ("active", "deferred", "dead_lettered", "scheduled", "transfer")
        for name in (*names, "transfer_dead_letter"):
            table.add_row(f"count: {name.replace('_', ' ')}", str(counts.get(name, 0)))
        if info.kind == "topic":
            table.add_row("subscriptions", str(counts.get("subscription_count", 0)))
        if info.kind == "subscription":
            table.add_row("rules", str(counts.get("rule_count", 0)))
        table.add_row("size (bytes)", str(info.counts.size_bytes))
        table.add_row("created", _time(info.created_at))
        table.add_row("updated", _time(info.updated_at))
        table.add_row("accessed", _time(info.accessed_at))
    _console().print(table)


def _show(value: Any) -> str:
    if isinstance(value, bool):
        return "true" if value else "false"
    if isinstance(value, dict | list):
        return json.dumps(value)
    if (isinstance(value, float) and math.isinf(value)) or value == MAX_TIMESPAN:
        return "never"
    return str(value)


def _rule_text(props: Mapping[str, Any]) -> tuple[str, str]:
    """(filter, action) of a rule's Config.json form, for a table."""
    if str(props.get("FilterType", "")).lower() == "correlation":
        body = dict(props.get("CorrelationFilter") or {})
        user = body.pop("Properties", {}) or {}
        parts = [f"{k}={v}" for k, v in {**body, **user}.items()]
        text = "correlation: " + ", ".join(parts)
    else:
        text = str((props.get("SqlFilter") or {}).get("SqlExpression", ""))
    action = str((props.get("Action") or {}).get("SqlExpression", "") or "")
    return text, action


def print_list(kind: str, infos: list[Any], output: str) -> None:
    if output == "json":
        click.echo(json.dumps([i.to_dict() for i in infos], indent=2))
        return
    from rich.table import Table

    table = Table(title_justify="left")
    if kind == "rule":
        for column in ("name", "filter", "action"):
            table.add_column(column)
        for info in infos:
            table.add_row(info.name, *_rule_text(info.properties))
    else:
        columns = ["name", "status"]
        columns += ["subscriptions"] if kind == "topic" else ["active", "deferred", "dead-lettered"]
        columns += ["scheduled", "transfer", "size (bytes)"]
        if kind != "topic":
            columns += ["forward to"]
        for column in columns:
            justify = "left" if column in ("name", "status", "forward to") else "right"
            table.add_column(column, justify=justify)  # type: ignore[arg-type]
        for info in infos:
            c = info.counts
            row = [info.name, str(info.properties.get("Status", "Active"))]
            row += (
                [str(c.subscription_count)]
                if kind == "topic"
                else [str(c.active), str(getattr(c, "deferred", 0)), str(c.dead_lettered)]
            )
            row += [str(c.scheduled), str(c.transfer), str(c.size_bytes)]
            if kind != "topic":
                row += [str(info.properties.get("ForwardTo") or "")]
            table.add_row(*row)
    _console().print(table)
    if not infos:
        click.echo(f"no {kind}s", err=True)


# ---------------------------------------------------------------------- the client


@contextmanager
def _admin(node: str, access: Access) -> Iterator[Any]:
    """The node's Service Bus admin calls; a failure is printed as the Service Bus error
    (``MessagingEntityNotFound: queue 'x' does not exist``) and exits 1."""
    from qmgr.client import MQClientError

    try:
        address = resolve(node)
    except LookupError as exc:
        raise click.ClickException(str(exc)) from None
    client = access.client(address)
    try:
        yield client.servicebus
    except MQClientError as exc:
        raise click.ClickException(_error_text(exc)) from None
    finally:
        client.close()


def _error_text(exc: Exception) -> str:
    code = getattr(exc, "code", None)
    if code is None or not hasattr(code, "reason"):
        return str(exc)
    text = str(getattr(exc, "text", exc))
    prefix = f"{code.reason}: "
    if text.startswith(prefix):
        return text
    where = getattr(exc, "where", "")
    if where and where not in text:
        text = f"{_option_hint(where) if where in _BY_PROP else where}: {text}"
    return prefix + text


# ---------------------------------------------------------------------- commands


@click.group(name="sb")
def sb() -> None:
    """Manage the Service Bus namespace of a node started with --servicebus (queues, topics,
    subscriptions, rules; Config.json import and export), and its messages (send, receive, peek,
    dlq) through Microsoft's azure-servicebus client on the node's Service Bus port."""


def _entity_group(kind: str, cls: Props, parents: tuple[str, ...]) -> click.Group:
    """queue/topic/subscription × create/show/list/update/delete; ``parents`` are the
    positional names before the entity's own (``TOPIC`` for a subscription)."""

    @click.group(name=kind, help=f"{kind.capitalize()}s of the namespace.")
    def group() -> None:
        pass

    def parent_args(f: F) -> F:
        for name in reversed(parents):
            f = click.argument(name)(f)
        return f

    def call(admin: Any, verb: str, *args: Any) -> Any:
        return getattr(admin, f"{verb}_{kind}")(*args)

    def writer(verb: str, help_: str) -> None:
        first_rule = kind == "subscription" and verb == "create"

        @group.command(name=verb, help=help_)
        @click.argument("node")
        @parent_args
        @click.argument("name")
        @property_options(cls)
        @_when(first_rule, rule_options)
        @_when(
            first_rule,
            click.option(
                "--rule-name",
                default="$Default",
                show_default=True,
                help="With a filter option: the name of the rule the subscription starts with.",
            ),
        )
        @output_option
        @client_options
        def command(node: str, name: str, output: str, access: Access, **options: Any) -> None:
            parents_ = [options.pop(p) for p in parents]
            props = properties_from(options, cls)
            if verb == "update" and not props:
                raise click.UsageError("nothing to update: give at least one property option")
            rule = _first_rule(options) if first_rule else None
            with _admin(node, access) as admin:
                if rule is not None:
                    info = admin.create_subscription(*parents_, name, props, rule=rule)
                else:
                    info = call(admin, verb, *parents_, name, props)
            print_entity(info, output)

    writer("create", f"Create a {kind}.")
    writer("update", f"Change the given properties of a {kind}.")

    @group.command(help=f"Show a {kind}: properties and message counts.")
    @click.argument("node")
    @parent_args
    @click.argument("name")
    @output_option
    @client_options
    def show(node: str, name: str, output: str, access: Access, **options: Any) -> None:
        parents_ = [options.pop(p) for p in parents]
        with _admin(node, access) as admin:
            info = call(admin, "get", *parents_, name)
        print_entity(info, output)

    @group.command(name="list", help=f"List the {kind}s.")
    @click.argument("node")
    @parent_args
    @output_option
    @client_options
    def list_(node: str, output: str, access: Access, **options: Any) -> None:
        parents_ = [options.pop(p) for p in parents]
        with _admin(node, access) as admin:
            infos = getattr(admin, f"list_{kind}s")(*parents_)
        print_list(kind, infos, output)

    @group.command(help=f"Delete a {kind} and its messages.")
    @click.argument("node")
    @parent_args
    @click.argument("name")
    @client_options
    def delete(node: str, name: str, access: Access, **options: Any) -> None:
        parents_ = [options.pop(p) for p in parents]
        with _admin(node, access) as admin:
            call(admin, "delete", *parents_, name)
        click.echo(f"deleted {kind} {'/'.join([*parents_, name])}")

    return group


sb.add_command(_entity_group("queue", QueueProperties, ()))
sb.add_command(_entity_group("topic", TopicProperties, ()))
sb.add_command(_entity_group("subscription", SubscriptionProperties, ("topic",)))


@sb.group()
def rule() -> None:
    """Rules of a subscription: a SQL or correlation filter and an optional SQL action."""


def _rule_writer(verb: str, help_: str) -> None:
    @rule.command(name=verb, help=help_)
    @click.argument("node")
    @click.argument("topic")
    @click.argument("subscription")
    @click.argument("name")
    @rule_options
    @output_option
    @client_options
    def command(
        node: str,
        topic: str,
        subscription: str,
        name: str,
        output: str,
        access: Access,
        **options: Any,
    ) -> None:
        body = _rule_of(options)
        with _admin(node, access) as admin:
            info = getattr(admin, f"{verb}_rule")(topic, subscription, name, body)
        print_entity(info, output)


_rule_writer("create", "Add a rule to a subscription.")
_rule_writer("update", "Replace a rule's filter and action.")


@rule.command(name="show")
@click.argument("node")
@click.argument("topic")
@click.argument("subscription")
@click.argument("name")
@output_option
@client_options
def rule_show(
    node: str, topic: str, subscription: str, name: str, output: str, access: Access
) -> None:
    """Show a rule."""
    with _admin(node, access) as admin:
        info = admin.get_rule(topic, subscription, name)
    print_entity(info, output)


@rule.command(name="list")
@click.argument("node")
@click.argument("topic")
@click.argument("subscription")
@output_option
@client_options
def rule_list(node: str, topic: str, subscription: str, output: str, access: Access) -> None:
    """List the rules of a subscription."""
    with _admin(node, access) as admin:
        infos = admin.list_rules(topic, subscription)
    print_list("rule", infos, output)


@rule.command(name="delete")
@click.argument("node")
@click.argument("topic")
@click.argument("subscription")
@click.argument("name")
@client_options
def rule_delete(node: str, topic: str, subscription: str, name: str, access: Access) -> None:
    """Delete a rule."""
    with _admin(node, access) as admin:
        admin.delete_rule(topic, subscription, name)
    click.echo(f"deleted rule {topic}/{subscription}/{name}")


@sb.command(name="import")
@click.argument("node")
@click.argument("path", type=click.File("r"))
@click.option("--check", is_flag=True, help="Only check the file; change nothing.")
@client_options
def import_(node: str, path: Any, check: bool, access: Access) -> None:
    """Create or update the entities of an emulator Config.json (PATH, or - for stdin).

    Entities and rules the file does not name are left alone; importing the same file twice
    changes nothing the second time. A file with any error changes nothing."""
    from qmgr.servicebus import config_json

    text = path.read()
    try:
        config = config_json.loads(text)
    except ServiceBusError as exc:
        raise click.ClickException(f"{path.name}: {exc}") from None
    if check:
        count = len(config.namespace.queues) + len(config.namespace.topics)
        click.echo(f"{path.name}: valid ({count} queues and topics)")
        return
    with _admin(node, access) as admin:
        changes = admin.import_config(text)
    for line in changes:
        click.echo(line)
    click.echo(f"{len(changes)} changes" if changes else "nothing to change")


@sb.command()
@click.argument("node")
@click.option(
    "-f", "--file", "path", type=click.File("w"), help="Write here instead of standard output."
)
@click.option(
    "--emulator",
    is_flag=True,
    help="Only the properties the official emulator's schema knows (to run it there).",
)
@client_options
def export(node: str, path: Any, emulator: bool, access: Access) -> None:
    """Write the namespace's entities as an emulator Config.json."""
    from qmgr.servicebus.config_json import for_emulator

    with _admin(node, access) as admin:
        data = admin.export_config()
    if emulator:
        data = for_emulator(data)
    text = json.dumps(data, indent=2) + "\n"
    if path is None:
        click.echo(text, nl=False)
    else:
        path.write(text)


# ---------------------------------------------------------------------- messages

# send, receive, peek, dlq and connection-string go through Microsoft's SDK (qmgr.cli.sb_data,
# which adds them to this group)
importlib.import_module("qmgr.cli.sb_data")
