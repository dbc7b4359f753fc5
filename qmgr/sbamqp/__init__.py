"""Service Bus over AMQP 1.0, sans-IO: what the links and messages of the Service Bus SDKs mean.

``qmgr.amqp`` is the protocol alone; this package gives it its Service Bus meaning over the
namespace (``qmgr.servicebus``): ``message`` maps AMQP messages and batches to and from the
namespace's messages, ``management`` answers ``$management`` requests, ``links`` acts on one
connection's link events (CBS tokens, sends, receives, settlements, session receivers), and
``conditions`` is the one table of AMQP error conditions they all answer refusals with. Pure: no
I/O, no clock, no timers of its own; the asyncio driver in ``qmgr.node`` supplies them.
"""
