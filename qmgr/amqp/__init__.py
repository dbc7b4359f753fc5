"""AMQP 1.0, sans-IO: the type system, performatives, framing and messages (no sockets, no clock).

The protocol is written here rather than taken from Apache Qpid Proton: Proton's binding hides a
transfer's ``message-format`` (Service Bus batches are ``0x80013700`` and must be split by it),
omits trailing null fields in performatives (azure-servicebus <= 7.14 reads them by position and
crashes), and its acceptor cannot share a port with HTTP. A thin asyncio layer in ``qmgr.node``
drives these state machines. Nothing here knows Service Bus: its meaning of links and messages is
``qmgr.sbamqp``.
"""
