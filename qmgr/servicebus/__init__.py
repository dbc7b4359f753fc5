"""An Azure Service Bus namespace as pure code (no I/O, no clock read).

| module | holds |
|---|---|
| `namespace.py` | `Namespace`: the public face; each method hands its call to one module below |
| `state.py` | the namespace's state, its entities, and the bookkeeping all operations share |
| `management.py` | entity and rule management: create, update, delete, get, list |
| `delivery.py` | where a message goes: stored, fanned out, forwarded, dead-lettered, expired |
| `dataplane.py` | send, receive, browse, and settling a message under its lock |
| `sessions.py` | session locks and session state |
| `timers.py` | scheduled messages and ``tick`` (lock, session, TTL, duplicate, idle expiry) |
| `restore.py` | rebuilding a namespace from its journal |
| `rules.py` | compiled rules and the topic router (fan-out, correlation-filter index) |
| `store.py` | the messages of one queue, subscription, dead-letter queue or topic (scheduled) |
| `entities.py` | entity and rule properties with Service Bus's defaults and ranges |
| `message.py` | `SbMessage`, `Stored`, the `SbJournal` protocol |
| `tokens.py` | lock tokens: random GUIDs from the OS random source, fetched in bulk |
| `names.py`, `errors.py` | names and paths; `ServiceBusError` and its codes |
| `config_json.py` | the emulator's Config.json: parse, apply, export |
"""
