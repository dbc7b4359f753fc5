"""TLS on the application port: the SDK (blocking and asyncio) and the CLI against a real node
with a certificate from the cluster CA; client certificates when the node requires them; a wrong
CA, plain TCP to a TLS port and TLS to a plain port fail at once with a clear typed error, and the
node goes on serving others."""

from __future__ import annotations

import asyncio
from pathlib import Path

import pytest

from qmgr.client import AsyncQueueManagerClient, MQClientError, QueueManagerClient
from tests.integration.app_security import Certs, Nodes, make_certs, nodes, qmgr

__all__ = ["nodes"]


@pytest.fixture
def certs(tmp_path: Path) -> Certs:
    return make_certs(tmp_path / "pki")


def test_sdk_over_tls(nodes: Nodes, certs: Certs) -> None:
    node = nodes.start("QM1", *certs.node_args())
    with QueueManagerClient(node.address, timeout=20, tls_ca=certs.ca) as qm:
        qm.mqsc("DEFINE QLOCAL(TLS.Q)")
        qm.put("TLS.Q", b"secret body", persistent=True)
        got = qm.get("TLS.Q")
        assert got is not None and got.body == b"secret body"
        with qm.subscribe("tls/topic") as sub:
            publisher = qm.stream_publisher(batch_size=10)
            for i in range(25):
                publisher.publish("tls/topic", f"m{i}")
            assert publisher.close().accepted == 25
            received = [sub.receive(timeout=10) for _ in range(25)]
            assert [m.text for m in received if m is not None] == [f"m{i}" for i in range(25)]
        with qm.unit_of_work() as uow:  # the Connect stream, over TLS too
            qm.put("TLS.Q", b"in a unit of work")
            assert qm.get("TLS.Q", unit_of_work=uow) is not None


def test_asyncio_sdk_over_tls(nodes: Nodes, certs: Certs) -> None:
    node = nodes.start("QM1", *certs.node_args())

    async def scenario() -> None:
        async with AsyncQueueManagerClient(node.address, timeout=20, tls_ca=certs.ca) as qm:
            await qm.mqsc("DEFINE QLOCAL(TLS.Q)")
            await qm.put("TLS.Q", b"async")
            got = await qm.get("TLS.Q", unit_of_work="u1")
            assert got is not None and got.body == b"async"
            await qm.commit("u1")
            sub = await qm.subscribe("tls/async")
            assert await qm.publish("tls/async", b"p") == 1
            msg = await sub.receive(timeout=10)
            assert msg is not None and msg.body == b"p"
            await sub.aclose()

    asyncio.run(scenario())


def test_the_ca_comes_from_qmgr_tls_ca(
    nodes: Nodes, certs: Certs, monkeypatch: pytest.MonkeyPatch
) -> None:
    node = nodes.start("QM1", *certs.node_args())
    monkeypatch.setenv("QMGR_TLS_CA", str(certs.ca))
    with QueueManagerClient(node.address, timeout=20) as qm:
        assert qm.mqsc("DISPLAY QMGR")[0]["QMNAME"] == "QM1"


def test_cli_over_tls(nodes: Nodes, certs: Certs) -> None:
    node = nodes.start("QM1", *certs.node_args())
    tls = ["--tls-ca", str(certs.ca)]
    done = qmgr("runmqsc", node.address, *tls, input="DEFINE QLOCAL(CLI.Q)\n")
    assert done.returncode == 0, done.stderr
    assert "AMQ8006I" in done.stdout
    done = qmgr("put", node.address, "CLI.Q", "over tls", *tls)
    assert done.returncode == 0, done.stderr
    done = qmgr("get", node.address, "CLI.Q", env={"QMGR_TLS_CA": str(certs.ca)})
    assert done.returncode == 0, done.stderr
    assert done.stdout.strip() == "over tls"
    done = qmgr("runmqsc", node.address, "--tls-ca", str(certs.other_ca), input="DISPLAY QMGR\n")
    assert done.returncode == 20
    assert "MQRC_SSL_INITIALIZATION_ERROR" in done.stderr and "CERTIFICATE_VERIFY" in done.stderr


def test_a_required_client_certificate(nodes: Nodes, certs: Certs) -> None:
    node = nodes.start("QM1", *certs.node_args(require_client=True))
    with pytest.raises(MQClientError) as refused:
        QueueManagerClient(node.address, timeout=10, tls_ca=certs.ca).put("Q", b"x")
    assert refused.value.reason_name == "MQRC_HOST_NOT_AVAILABLE"
    assert "client certificate" in refused.value.text
    with QueueManagerClient(
        node.address,
        timeout=20,
        tls_ca=certs.ca,
        tls_cert=certs.client_cert,
        tls_key=certs.client_key,
    ) as qm:
        qm.mqsc("DEFINE QLOCAL(MTLS.Q)")
        assert qm.browse("MTLS.Q") == []
    done = qmgr(
        "put",
        node.address,
        "MTLS.Q",
        "with a certificate",
        *("--tls-ca", str(certs.ca), "--tls-cert", str(certs.client_cert)),
        *("--tls-key", str(certs.client_key)),
    )
    assert done.returncode == 0, done.stderr
    done = qmgr("get", node.address, "MTLS.Q", "--tls-ca", str(certs.ca))
    assert done.returncode != 0 and "MQRC_HOST_NOT_AVAILABLE" in done.stderr


def test_a_wrong_ca_is_a_clear_error(nodes: Nodes, certs: Certs) -> None:
    node = nodes.start("QM1", *certs.node_args())
    with pytest.raises(MQClientError) as refused:
        QueueManagerClient(node.address, timeout=10, tls_ca=certs.other_ca).mqsc("DISPLAY QMGR")
    assert refused.value.reason == 2393
    assert "CERTIFICATE_VERIFY_FAILED" in refused.value.text

    async def asynchronous() -> MQClientError:
        async with AsyncQueueManagerClient(node.address, tls_ca=certs.other_ca) as qm:
            try:
                await qm.put("Q", b"x")
            except MQClientError as exc:
                return exc
        raise AssertionError("the put went through")

    assert asyncio.run(asynchronous()).reason_name == "MQRC_SSL_INITIALIZATION_ERROR"


def test_plain_tcp_to_a_tls_port_is_refused_and_others_are_served(
    nodes: Nodes, certs: Certs
) -> None:
    node = nodes.start("QM1", *certs.node_args())
    with QueueManagerClient(node.address, timeout=20, tls_ca=certs.ca) as good:
        good.mqsc("DEFINE QLOCAL(PLAIN.Q)")
        for _ in range(3):
            with pytest.raises(MQClientError) as refused:
                QueueManagerClient(node.address, timeout=10).put("PLAIN.Q", b"x")
            assert refused.value.reason_name == "MQRC_HOST_NOT_AVAILABLE"
            assert "TLS" in refused.value.text and "QMGR_TLS_CA" in refused.value.text
        assert good.browse("PLAIN.Q") == []
        good.put("PLAIN.Q", b"still serving")
        assert [m.body for m in good.browse("PLAIN.Q")] == [b"still serving"]


def test_tls_to_a_plain_port_is_a_clear_error(nodes: Nodes, certs: Certs) -> None:
    node = nodes.start("QM1")
    with pytest.raises(MQClientError) as refused:
        QueueManagerClient(node.address, timeout=10, tls_ca=certs.ca).mqsc("DISPLAY QMGR")
    assert refused.value.reason_name == "MQRC_SSL_INITIALIZATION_ERROR"
    assert "handshake" in refused.value.text


def test_unreadable_tls_files_name_the_file(tmp_path: Path, certs: Certs) -> None:
    with pytest.raises(MQClientError, match="missing.pem") as refused:
        QueueManagerClient("127.0.0.1:1", tls_ca=tmp_path / "missing.pem")
    assert refused.value.reason == 2393
    with pytest.raises(MQClientError, match="go together"):
        QueueManagerClient("127.0.0.1:1", tls_ca=certs.ca, tls_cert=certs.client_cert)
