"""The qmgr command line: start a node, speak MQSC, put/get/publish/subscribe."""

from __future__ import annotations

import contextlib
import json
import os
import sys
from pathlib import Path
from typing import Any

import click

from qmgr.cli.auth import Access, auth, client_options
from qmgr.cli.edge import LaunchGroup
from qmgr.launcher.registry import register, resolve, unregister


def _client(node: str, access: Access) -> Any:
    try:
        return access.client(resolve(node))
    except LookupError as exc:
        raise click.ClickException(str(exc)) from None


def _fail(exc: Exception) -> click.ClickException:
    return click.ClickException(str(exc))


@click.group(cls=LaunchGroup, context_settings={"help_option_names": ["-h", "--help"]})
@click.version_option(package_name="qmgr")
def cli() -> None:
    """qmgr: an emulator of IBM MQ-style clustered publish/subscribe."""


@cli.command()
@click.option("--name", required=True, help="Queue manager name (1-48 characters).")
@click.option(
    "--listen",
    default="127.0.0.1:0",
    show_default=True,
    help="HOST:PORT to serve gRPC on (port 0 = any free port).",
)
@click.option(
    "--data-dir",
    type=click.Path(file_okay=False),
    help="Directory for the node's SQLite store; without it nothing survives a restart.",
)
@click.option(
    "--cluster",
    help="Name of the cluster this node belongs to (or leave it out and define CLUSRCVR and "
    "CLUSSDR channels with MQSC).",
)
@click.option(
    "--full-repository", is_flag=True, help="This node is a full repository (needs --raft)."
)
@click.option("--raft", help="Full repositories: HOST:PORT the Raft transport binds to.")
@click.option(
    "--raft-peers", help="Full repositories: Raft addresses of every FR, comma-separated."
)
@click.option(
    "--join", help="gRPC addresses of full repositories to join through, comma-separated."
)
@click.option(
    "--cluster-secret-file",
    type=click.Path(dir_okay=False, exists=True),
    envvar="QMGR_CLUSTER_SECRET_FILE",
    help="File (mode 0600) holding the cluster secret (full repositories) or the member secret "
    "(partial repositories: qmgr cluster secret --member); QMGR_CLUSTER_SECRET may hold it "
    "instead. Without --cluster it is kept for a cluster joined with DEFINE CHANNEL.",
)
@click.option(
    "--insecure",
    is_flag=True,
    help="Run a cluster member without a secret: nothing between members is authenticated.",
)
@click.option(
    "--tls-cert", type=click.Path(dir_okay=False, exists=True), help="PEM certificate for TLS."
)
@click.option(
    "--tls-key", type=click.Path(dir_okay=False, exists=True), help="PEM key of --tls-cert."
)
@click.option(
    "--tls-ca",
    type=click.Path(dir_okay=False, exists=True),
    help="PEM CA: require client certificates it issued (in a cluster: the cluster CA).",
)
@click.option(
    "--auth",
    "auth_file",
    type=click.Path(dir_okay=False, exists=True),
    help="Users file (qmgr auth): every application call needs a user and password.",
)
@click.option(
    "--servicebus",
    "servicebus",
    is_flag=False,
    flag_value="",
    default=None,
    metavar="[NAME]",
    help="Host a Service Bus namespace (default name: sbemulatorns, or the one --servicebus-config "
    "names) in the node's store. A node whose store holds a namespace hosts it without this.",
)
@click.option(
    "--servicebus-config",
    type=click.Path(dir_okay=False, exists=True),
    help="The Service Bus emulator's Config.json: its entities are created, or updated to "
    "match, at every start (implies --servicebus).",
)
@click.option(
    "--servicebus-limit",
    "servicebus_limits",
    multiple=True,
    metavar="NAME=N",
    help="A quota of the namespace instead of Service Bus's (repeatable): "
    "max_subscriptions_per_topic (2000), max_sql_rules_per_topic (2000), "
    "max_correlation_rules_per_topic (100000); or what one client may hold on the port: "
    "connections (5000, on the port at once), sessions_per_connection (256), "
    "links_per_session (256), links_per_connection (1024), partial_bytes_per_connection "
    "(2097152, unfinished deliveries), tokens_per_connection (1024, CBS tokens), "
    "http_request_seconds (30, to receive one HTTP request).",
)
@click.option(
    "--servicebus-port",
    metavar="HOST:PORT",
    help="Where the Service Bus namespace serves AMQP, HTTPS and HTTP (the admin API) on one "
    "port (default 127.0.0.1:5672, as the emulator's connection string says; 0 for any free "
    "port). Printed on the READY line as sb=HOST:PORT. Implies --servicebus: given alone, the "
    "node hosts the namespace its store holds, else one named sbemulatorns.",
)
@click.option(
    "--servicebus-keys",
    type=click.Path(dir_okay=False, exists=True),
    envvar="QMGR_SERVICEBUS_KEYS",
    help="JSON file (mode 0600) of shared access keys: name -> {key, rights: Manage/Send/"
    "Listen}. With it every SAS token (AMQP CBS, the HTTP admin API) is verified and rights "
    "are enforced; without it every token is accepted, as by Microsoft's emulator.",
)
def start(
    name: str,
    listen: str,
    data_dir: str | None,
    cluster: str | None,
    full_repository: bool,
    raft: str | None,
    raft_peers: str | None,
    join: str | None,
    cluster_secret_file: str | None,
    insecure: bool,
    tls_cert: str | None,
    tls_key: str | None,
    tls_ca: str | None,
    auth_file: str | None,
    servicebus: str | None,
    servicebus_config: str | None,
    servicebus_limits: tuple[str, ...],
    servicebus_port: str | None,
    servicebus_keys: str | None,
) -> None:
    """Run a queue manager node until SIGTERM. Prints READY name=.. addr=.. when serving (in a
    cluster: once it has joined)."""
    import logging

    from qmgr.node.config import (
        ConfigError,
        make_cluster_settings,
        make_config,
        make_tls,
        start_credentials,
    )
    from qmgr.node.server import run
    from qmgr.security.files import SecretError, read_secret

    logging.basicConfig(
        level=os.environ.get("QMGR_LOG", "WARNING"),
        format="%(asctime)s %(name)s %(levelname)s %(message)s",
    )
    try:
        secret = (
            read_secret(Path(cluster_secret_file))
            if cluster_secret_file
            else os.environ.get("QMGR_CLUSTER_SECRET") or None
        )
        tls = make_tls(tls_cert, tls_key, tls_ca)
        settings = make_cluster_settings(
            cluster,
            full_repository=full_repository,
            raft=raft,
            raft_peers=raft_peers,
            join=join,
            password=secret,
            insecure=insecure,
            tls=tls,
        )
        held, held_insecure = start_credentials(cluster, secret, insecure)
        config = make_config(
            name,
            listen,
            data_dir,
            settings,
            tls=tls,
            auth_file=auth_file,
            secret=held,
            insecure=held_insecure,
            servicebus=servicebus,
            servicebus_config=servicebus_config,
            servicebus_limits=servicebus_limits,
            servicebus_port=servicebus_port,
            servicebus_keys=servicebus_keys,
        )
    except (ConfigError, SecretError) as exc:
        raise _fail(exc) from None
    pid = os.getpid()

    def on_ready(address: str, servicebus: str) -> None:
        register(name, address, pid, servicebus)

    try:
        run(config, on_ready=on_ready)
    finally:
        unregister(name, pid)


@cli.command()
@click.argument("node")
@click.option(
    "-f",
    "--file",
    "path",
    type=click.File("r"),
    help="Read commands from this file instead of stdin.",
)
@click.option("--output", type=click.Choice(["text", "json"]), default="text", show_default=True)
@click.option("-e", "--echo/--no-echo", default=True, help="Echo each command before its output.")
@client_options
def runmqsc(node: str, path: Any, output: str, echo: bool, access: Access) -> None:
    """Read MQSC commands (stdin or --file) and run them on NODE (a name or HOST:PORT).

    Exit code 0: every command succeeded; 10: some failed; 20: nothing could be run."""
    from qmgr.client import MQClientError
    from qmgr.mqsc import MqscError, split_commands

    text = (path or sys.stdin).read()
    try:
        commands = split_commands(text)
    except MqscError as exc:
        click.echo(f"{exc.code}: {exc.message}", err=True)
        sys.exit(20)
    client = _client(node, access)
    results: list[dict[str, Any]] = []
    failed = 0
    if output == "text":
        click.echo("Starting MQSC for queue manager " + node + ".\n")
    for n, command in enumerate(commands, 1):
        if command.text.strip().upper() == "END":
            break
        try:
            ok, records = client.mqsc_ok(command.text)
        except MQClientError as exc:
            click.echo(f"AMQ8146E: IBM MQ queue manager not available. {exc}", err=True)
            sys.exit(20)
        failed += 0 if ok else 1
        if output == "json":
            results.append(
                {
                    "command": command.text,
                    "line": command.line,
                    "ok": ok,
                    "records": [
                        {"code": r.code, "text": r.text, "attrs": r.attrs} for r in records
                    ],
                }
            )
            continue
        if echo:
            click.echo(f"{n:6d} : {command.text}")
        for r in records:
            click.echo(r.render())
    if output == "json":
        click.echo(json.dumps(results, indent=2))
    else:
        click.echo(f"{len(commands)} MQSC commands read.")
        click.echo(
            "No commands have a syntax error." if not failed else f"{failed} commands failed."
        )
        click.echo("All valid MQSC commands were processed.")
    sys.exit(10 if failed else 0)


def _props(items: tuple[str, ...]) -> dict[str, Any]:
    props: dict[str, Any] = {}
    for item in items:
        key, sep, value = item.partition("=")
        if not sep:
            raise click.BadParameter(f"'{item}' is not NAME=VALUE", param_hint="--property")
        props[key] = int(value) if value.lstrip("-").isdigit() else value
    return props


@cli.command()
@click.argument("node")
@click.argument("topic")
@click.argument("message", required=False)
@click.option(
    "-p", "--property", "properties", multiple=True, help="NAME=VALUE (integers become int64)."
)
@click.option("--persistent/--non-persistent", default=None, help="Default: the topic's DEFPSIST.")
@click.option("--retain", is_flag=True, help="Keep as the topic's retained publication.")
@click.option("--count", default=1, show_default=True, help="Publish the message this many times.")
@client_options
def pub(
    node: str,
    topic: str,
    message: str | None,
    properties: tuple[str, ...],
    persistent: bool | None,
    retain: bool,
    count: int,
    access: Access,
) -> None:
    """Publish MESSAGE (or each line of stdin) on TOPIC."""
    from qmgr.client import MQClientError, OutgoingMessage

    client = _client(node, access)
    bodies = [message] * count if message is not None else [line.rstrip("\n") for line in sys.stdin]
    props = _props(properties)
    try:
        result = client.publish_many(
            [(topic, OutgoingMessage(b, dict(props), persistent)) for b in bodies], retain=retain
        )
    except MQClientError as exc:
        raise _fail(exc) from None
    click.echo(f"published {result.accepted} on '{topic}': {_where_to(result)}")


def _where_to(result: Any) -> str:
    """Where the publications of ``result`` (a PublishResult) went: the copies delivered on the
    node, and the copies it sent into its cluster and to whom; or that they reached nobody."""
    here = f"{result.deliveries} local deliveries"
    peers = ", ".join(result.forwarded_to)
    if result.forwards:
        copies = "" if result.forwards == 1 else f"{result.forwards} copies "
        return f"{here}, {copies}sent into cluster {result.cluster} to {peers}"
    into = f" and none sent into cluster {result.cluster}" if result.cluster else ""
    if result.deliveries:
        return here + into
    return f"{here}{into}: no subscription matched, nothing was delivered"


SUB_WAIT = 5.0  # seconds `qmgr sub` waits for the next message
SUB_COUNT_WAIT = 60.0  # ... when it waits for --count messages: time for a person to publish


@cli.command()
@click.argument("node")
@click.argument("topic")
@click.option("--name", default="", help="Subscription name (required for --durable).")
@click.option(
    "--durable",
    is_flag=True,
    help="Keep the subscription, and the publications for it, while nothing reads it; "
    "`qmgr sub` with the same --name resumes it.",
)
@click.option(
    "-n", "--count", default=0, help="Stop after this many messages (0 = until --wait expires)."
)
@click.option(
    "--wait",
    type=float,
    default=None,
    help=f"Seconds to wait for the next message [default: {SUB_WAIT:g}; "
    f"{SUB_COUNT_WAIT:g} with --count].",
)
@click.option(
    "--no-receive",
    is_flag=True,
    help="With --durable: create (or resume) the subscription, return once it is in place "
    "across the cluster, and receive nothing; publications are kept for it until read.",
)
@click.option("--json", "as_json", is_flag=True, help="One JSON object per message.")
@client_options
def sub(
    node: str,
    topic: str,
    name: str,
    durable: bool,
    count: int,
    wait: float | None,
    no_receive: bool,
    as_json: bool,
    access: Access,
) -> None:
    """Subscribe to TOPIC and print publications as they arrive. In a cluster, `subscribed`
    is printed once the subscription's proxy subscriptions reached the topic hosts: from then
    on a publication anywhere in the cluster reaches it."""
    from qmgr.client import MQClientError

    if no_receive and not durable:
        raise click.UsageError("--no-receive keeps a subscription: it needs --durable and --name")
    if wait is None:
        wait = SUB_COUNT_WAIT if count else SUB_WAIT
    client = _client(node, access)
    try:
        if no_receive:
            client.create_subscription(topic, name=name, durable=True)
            subscription = None
        else:
            subscription = client.subscribe(topic, name=name, durable=durable)
            name = subscription.name
    except MQClientError as exc:
        raise _fail(exc) from None
    with subscription or contextlib.nullcontext():
        _subscribed(client, name, topic, durable)
        if subscription is None:
            return
        got = 0
        try:
            while not count or got < count:
                msg = subscription.receive(timeout=wait)
                if msg is None:
                    break
                got += 1
                _print_message(msg, as_json)
        except KeyboardInterrupt:
            click.echo(f"received {got}", err=True)
            sys.exit(130)
    click.echo(f"received {got}", err=True)


def _subscribed(client: Any, name: str, topic: str, durable: bool) -> None:
    """Wait until the subscription is in place across the cluster, then say so (on stderr);
    when some member did not take the node's proxy subscriptions in time, say which."""
    from qmgr.cli.propagation import PROPAGATION_WAIT, wait_delivered

    found = wait_delivered(client)
    kept = " (durable: publications are kept for it until read)" if durable else ""
    where = ""
    if found is not None and found.cluster and not found.late:
        where = f", in place across cluster {found.cluster}"
    click.echo(f"subscribed {name} to '{topic}'{kept}{where}", err=True)
    if found is not None and found.late:
        click.echo(
            "qmgr: some members have not yet taken what this node queued for them, its proxy "
            f"subscriptions included (waited up to {PROPAGATION_WAIT:g} s); a publication that "
            "reaches them first is not delivered to this subscription: "
            + "; ".join(s.describe() for s in found.late),
            err=True,
        )


def _print_message(msg: Any, as_json: bool) -> None:
    if as_json:
        click.echo(
            json.dumps(
                {
                    "topic": msg.topic,
                    "body": msg.text,
                    "message_id": msg.message_id,
                    "properties": {
                        k: v if not isinstance(v, bytes) else v.hex()
                        for k, v in msg.properties.items()
                    },
                }
            )
        )
    else:
        click.echo(f"{msg.topic or '-'}: {msg.text}" if msg.topic else msg.text)


@cli.command()
@click.argument("node")
@click.argument("queue")
@click.argument("message", required=False)
@click.option("-p", "--property", "properties", multiple=True, help="NAME=VALUE")
@click.option("--persistent/--non-persistent", default=None, help="Default: the queue's DEFPSIST.")
@click.option(
    "--priority",
    type=click.IntRange(0, 9),
    default=None,
    help="Message priority 0-9. Default: the queue's DEFPRTY (MQPRI_PRIORITY_AS_Q_DEF).",
)
@client_options
def put(
    node: str,
    queue: str,
    message: str | None,
    properties: tuple[str, ...],
    persistent: bool | None,
    priority: int | None,
    access: Access,
) -> None:
    """Put MESSAGE (or each line of stdin) on QUEUE."""
    from qmgr.client import MQClientError, OutgoingMessage

    client = _client(node, access)
    bodies = [message] if message is not None else [line.rstrip("\n") for line in sys.stdin]
    props = _props(properties)
    try:
        ids = client.put_many(
            queue, [OutgoingMessage(b, dict(props), persistent, priority) for b in bodies]
        )
    except MQClientError as exc:
        raise _fail(exc) from None
    click.echo(f"put {len(ids)} on {queue}")


GET_BATCH = 10_000  # the most messages a node hands out in one get


@cli.command()
@click.argument("node")
@click.argument("queue")
@click.option(
    "-n",
    "--count",
    default=1,
    show_default=True,
    type=click.IntRange(0, GET_BATCH),
    help="Messages to get (0 = all available).",
)
@click.option("--wait", default=0.0, show_default=True, help="Seconds to wait for a message.")
@click.option("--browse", is_flag=True, help="Browse instead of removing.")
@click.option("--json", "as_json", is_flag=True)
@client_options
def get(
    node: str, queue: str, count: int, wait: float, browse: bool, as_json: bool, access: Access
) -> None:
    """Get (or browse) messages from QUEUE. Exit code 2 if there were none."""
    from qmgr.client import MQClientError

    client = _client(node, access)
    wait_ms = int(wait * 1000)
    try:
        if count:
            msgs = client.get_many(queue, count, wait_ms=wait_ms, browse=browse)
        else:  # all available, in the largest batches a node answers
            msgs = chunk = client.get_many(queue, GET_BATCH, wait_ms=wait_ms, browse=browse)
            while len(chunk) == GET_BATCH:
                if browse:  # a browse goes on after the last one it saw
                    chunk = client.browse(queue, after=chunk[-1].sequence, limit=GET_BATCH)
                else:
                    chunk = client.get_many(queue, GET_BATCH)
                msgs = msgs + chunk
    except MQClientError as exc:
        raise _fail(exc) from None
    for msg in msgs:
        _print_message(msg, as_json)
    if not msgs:
        click.echo(f"no message available on {queue}", err=True)
        sys.exit(2)


def _register_extra_commands() -> None:
    from qmgr.cli.cluster import cluster
    from qmgr.cli.demo import demo
    from qmgr.cli.health import health
    from qmgr.cli.load import load
    from qmgr.cli.sb import sb

    cli.add_command(demo)
    cli.add_command(cluster)
    cli.add_command(auth)
    cli.add_command(sb)
    cli.add_command(health)
    cli.add_command(load)


def main() -> None:
    _register_extra_commands()
    cli(prog_name="qmgr")


if __name__ == "__main__":
    main()
