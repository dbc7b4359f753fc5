"""The public Python client SDK for qmgr nodes (blocking and asyncio).

    from qmgr.client import QueueManagerClient
    with QueueManagerClient("127.0.0.1:1414") as qm:
        qm.mqsc("DEFINE QLOCAL(APP.Q)")
        qm.put("APP.Q", b"hello", persistent=True)
        print(qm.get("APP.Q", wait_ms=1000).body)

Failures raise :class:`MQClientError` with an MQ reason code and name, never a raw gRPC error.
"""

from qmgr.client.aio import AsyncQueueManagerClient, AsyncSubscription
from qmgr.client.errors import (
    ConnectionFailed,
    MQClientError,
    MqscCommandError,
    ServiceBusClientError,
)
from qmgr.client.servicebus import SbEntityInfo, ServiceBusAdmin
from qmgr.client.sync import QueueManagerClient, StreamPublisher, Subscription
from qmgr.client.types import Int32, MqscRecord, OutgoingMessage, PublishResult, ReceivedMessage

__all__ = [
    "AsyncQueueManagerClient",
    "AsyncSubscription",
    "ConnectionFailed",
    "Int32",
    "MQClientError",
    "MqscCommandError",
    "MqscRecord",
    "OutgoingMessage",
    "PublishResult",
    "QueueManagerClient",
    "ReceivedMessage",
    "SbEntityInfo",
    "ServiceBusAdmin",
    "ServiceBusClientError",
    "StreamPublisher",
    "Subscription",
]
