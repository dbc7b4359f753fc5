"""The verdicts on a run over a launched cluster, in the same words for `qmgr demo` and the
load job: whether order held, and whether anything acknowledged was lost or duplicated."""

from __future__ import annotations

COUNT_WORDS = ("no", "one", "two", "three", "four", "five", "six", "seven", "eight", "nine")


def count_word(n: int) -> str:
    """``n`` as a word up to nine ("two"), else in digits."""
    return COUNT_WORDS[n] if 0 <= n < len(COUNT_WORDS) else str(n)


def order_verdict(
    routes: int, out_of_order: int, amount: str | None = None, *, sequenced: bool = False
) -> str:
    """Whether order held for the copies of one subscription (or topic branch) that took
    ``routes`` routes (topic hosts), in the words of both `qmgr demo` and `qmgr load`.
    ``amount`` says how many were out of order (default: their count; e.g. "49.9%");
    ``sequenced``: they came through the sequenced-delivery helper."""
    amount = amount or str(out_of_order)
    if out_of_order:
        if routes > 1:
            return f"{amount} out of order, as {count_word(routes)} hosts do (each publication picks its host)"
        return f"{amount} out of order"
    if sequenced:
        lost = f", which {count_word(routes)} hosts lose" if routes > 1 else ""
        return f"in order (the sequenced-delivery helper restores each publisher's order{lost})"
    if routes > 1:
        return "in order this time (several hosts do not guarantee it)"
    return "in order (one host keeps order)"


def loss_verdict(lost: int, duplicated: int, through: str = "") -> str:
    """Whether anything acknowledged was lost or duplicated, plainly ("LOST" and "DUPLICATED"
    in capitals when so); ``through`` ends the all-clear (e.g. "through the kill of HOSTA1")."""
    if not lost and not duplicated:
        return " ".join(("nothing lost or duplicated", through)).strip()
    said = [f"{lost} LOST" if lost else "", f"{duplicated} DUPLICATED" if duplicated else ""]
    return ", ".join(x for x in said if x)
