"""An Azure Service Bus namespace as pure code (no I/O, no clock read).

| module | holds |
|---|---|
| `namespace.py` | `Namespace`: entity and rule management, send, receive, settlement, sessions, timers, restore |
| `rules.py` | compiled rules and the topic router (fan-out, correlation-filter index) |
| `store.py` | the messages of one queue, subscription, dead-letter queue or topic (scheduled) |
| `entities.py` | entity and rule properties with Service Bus's defaults and ranges |
| `message.py` | `SbMessage`, `Stored`, the `SbJournal` protocol |
| `tokens.py` | lock tokens: random GUIDs from the OS random source, fetched in bulk |
| `names.py`, `errors.py` | names and paths; `ServiceBusError` and its codes |
| `config_json.py` | the emulator's Config.json: parse, apply, export |
"""
