"""`qmgr health ADDR`: ask a node's standard gRPC health service (grpc.health.v1) whether it
serves; exit code 0 when it answers SERVING, 1 otherwise. The compose files use it as every
container's healthcheck, so it stays light: grpc and the health stubs, nothing else."""

from __future__ import annotations

import click

from qmgr.launcher.health import check
from qmgr.node.ready import READY_SERVICE


@click.command()
@click.argument("address")
@click.option(
    "--service",
    default=READY_SERVICE,
    show_default=True,
    help="Health service name to ask about: qmgr.node.Ready is SERVING once the node is ready "
    "(joined its cluster); '' is the server as a whole.",
)
@click.option("--timeout", default=3.0, show_default=True, help="Seconds to wait for the answer.")
@click.option("-q", "--quiet", is_flag=True, help="Print nothing; the exit code tells.")
def health(address: str, service: str, timeout: float, quiet: bool) -> None:
    """Ask the node at ADDRESS (HOST:PORT, plaintext gRPC) whether it serves. Exit code 0 when
    the answer is SERVING, 1 for any other answer or none."""
    status = check(address, service, timeout)
    if not quiet:
        click.echo(status)
    click.get_current_context().exit(0 if status == "SERVING" else 1)


if __name__ == "__main__":  # python -m qmgr.cli.health: the compose healthcheck, without the
    health(prog_name="qmgr health")  # imports of the whole qmgr command line
