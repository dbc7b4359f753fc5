"""The pure single-node domain: messages, local queues, subscriptions and publish/subscribe.

Nothing here does I/O or reads the wall clock: a :class:`~qmgr.core.clock.Clock` is passed in,
and persistence goes through the :class:`~qmgr.core.journal.Journal` protocol that the store
implements.
"""
