"""The Service Bus management API's ATOM documents (pure: XML text in and out, no I/O).

``qmgr.atom.descriptions`` reads the ``<entry>`` bodies that ``ServiceBusAdministrationClient``
sends and writes the entries and feeds it reads back: QueueDescription, TopicDescription,
SubscriptionDescription and RuleDescription with their runtime counts.
"""
