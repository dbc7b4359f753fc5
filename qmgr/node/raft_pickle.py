"""What PySyncObj may unpickle: plain data, never code.

PySyncObj frames its Raft messages, log entries and journal metadata with ``pickle``. With the
cluster secret every frame is authenticated (Fernet) before it is unpickled, so only members
reach the unpickler; this module makes sure that even a member (or a node run with
``--insecure``) cannot make it run anything. ``install()`` replaces ``pysyncobj.pickle.loads``
and ``load`` (and the copy ``pysyncobj.journal`` imported) with :func:`loads`, an unpickler that
resolves no global except the few that protocol 2 needs to rebuild builtin data:

- ``bytes`` through ``_codecs.encode(text, "latin1")`` (anything but latin1 is refused), and
  ``bytes()`` for the empty value;
- ``set`` / ``frozenset`` / ``bytearray`` of such data (``bytes``/``bytearray`` of a size, which
  would allocate it zero-filled, are refused: a frame of a few bytes could ask for gigabytes).

PySyncObj's messages are dicts, lists and tuples of str, bytes, int, float, bool and None (its
dynamic membership, which pickles node objects, is off in qmgr). Anything else raises
``pickle.UnpicklingError``; PySyncObj then drops the connection, or ignores the journal
metadata, as it does for any frame it cannot read.
"""

from __future__ import annotations

import io
import logging
import pickle
from typing import IO, Any

log = logging.getLogger("qmgr.node.raft")


def _latin1(text: str, encoding: str = "utf-8") -> bytes:
    """``_codecs.encode`` as protocol 2 uses it to carry bytes: latin1 text only."""
    if encoding != "latin1" or not isinstance(text, str):
        raise pickle.UnpicklingError(f"refused _codecs.encode(..., {encoding!r}) in a Raft frame")
    return text.encode("latin1")


def _of_data(kind: type) -> Any:
    """``kind`` built from data only: ``kind()`` or ``kind(bytes-like)``, never ``kind(size)``."""

    def build(*args: Any) -> Any:
        if args and (len(args) > 1 or not isinstance(args[0], (bytes, bytearray))):
            raise pickle.UnpicklingError(f"refused {kind.__name__}{args!r:.40} in a Raft frame")
        return kind(*args)

    return build


_ALLOWED: dict[tuple[str, str], Any] = {
    ("_codecs", "encode"): _latin1,
    **{
        (module, kind.__name__): maker
        for module in ("builtins", "__builtin__")
        for kind, maker in (
            (bytes, _of_data(bytes)),
            (bytearray, _of_data(bytearray)),
            (set, set),
            (frozenset, frozenset),
        )
    },
}


class RestrictedUnpickler(pickle.Unpickler):
    """Unpickles builtin data only; any other global is refused."""

    def find_class(self, module: str, name: str) -> Any:
        found = _ALLOWED.get((module, name))
        if found is None:
            log.warning("refused to unpickle global %s.%s from a Raft frame", module, name)
            raise pickle.UnpicklingError(f"refused global {module}.{name} in a Raft frame")
        return found


def load(file: IO[bytes]) -> Any:
    return RestrictedUnpickler(file).load()


def loads(data: bytes | str) -> Any:
    raw = data if isinstance(data, bytes) else data.encode("utf-8")
    return load(io.BytesIO(raw))


_installed = False


def install() -> None:
    """Make PySyncObj unpickle through :func:`loads` (idempotent; touches no installed file)."""
    global _installed
    if _installed:
        return
    import pysyncobj.journal
    import pysyncobj.pickle

    pysyncobj.pickle.loads = loads
    pysyncobj.pickle.load = load
    pysyncobj.journal.loads = loads  # imported by name
    _installed = True
