"""Cluster channel definitions made with MQSC (pure): ``DEFINE CHANNEL(..) CHLTYPE(CLUSRCVR)``
gives a queue manager its own address in a cluster (CONNAME) and its workload attributes;
``CHLTYPE(CLUSSDR)`` names a full repository to join through (CONNAME). A queue manager with
a cluster-receiver and at least one cluster-sender for the same cluster can join it.

- CONNAME is MQ's ``host(port)`` or ``host:port``; both are kept as ``host:port`` (a host
  without a port means MQ's default port 1414).
- One cluster per queue manager: every definition names the same cluster.
- Nothing here reads a clock or does I/O; the node stores ``to_dict`` of each definition.
"""

from __future__ import annotations

import re
from collections.abc import Iterable, Mapping
from dataclasses import dataclass, field
from typing import Any

CLUSRCVR = "CLUSRCVR"
CLUSSDR = "CLUSSDR"
DEFAULT_PORT = 1414
WORKLOAD = ("CLWLRANK", "CLWLPRTY", "CLWLWGHT", "NETPRTY")
_HOST = re.compile(r"^[A-Za-z0-9._\-]{1,253}$|^\[?[0-9A-Fa-f:.]+\]?$")
_MQ_FORM = re.compile(r"^(?P<host>[^()\s]+)\((?P<port>[^()]*)\)$")


class ChannelDefError(ValueError):
    """A definition that cannot be accepted: ``reason`` is the MQRCCF reason."""

    def __init__(self, reason: str, text: str) -> None:
        super().__init__(text)
        self.reason = reason
        self.text = text


def parse_conname(text: str) -> str:
    """``host(port)``, ``host:port`` or ``host`` (port 1414) as ``host:port``; raises
    ChannelDefError(MQRCCF_CONN_NAME_ERROR) for anything else."""
    raw = text.strip()
    m = _MQ_FORM.match(raw)
    if m is not None:
        host, port = m.group("host"), m.group("port").strip()
    elif raw.count(":") == 1 or (raw.startswith("[") and "]:" in raw):
        host, _, port = raw.rpartition(":")
    elif ":" not in raw and "(" not in raw and ")" not in raw:
        host, port = raw, str(DEFAULT_PORT)
    else:
        host, port = raw, ""
    if not raw or not _HOST.match(host) or not port.isdigit() or not 0 < int(port) <= 65535:
        raise ChannelDefError(
            "MQRCCF_CONN_NAME_ERROR",
            f"CONNAME '{text}' is not a connection name: give host(port), for example "
            "'fr1.example.com(1414)', or host:port with a port 1-65535",
        )
    return f"{host}:{int(port)}"


def parse_connames(text: str) -> tuple[str, ...]:
    """A CLUSSDR's CONNAME: one connection name or MQ's comma-separated list of them (the
    addresses of one queue manager, tried in order)."""
    parts = text.split(",")
    if len(parts) > 1 and not all(p.strip() for p in parts):
        raise ChannelDefError(
            "MQRCCF_CONN_NAME_ERROR", f"CONNAME '{text}' has an empty connection name in its list"
        )
    return tuple(dict.fromkeys(parse_conname(p) for p in parts))


@dataclass(frozen=True)
class ChannelDef:
    name: str
    chltype: str
    cluster: str
    # host:port, on a CLUSSDR a comma-separated list of them ("" on a CLUSRCVR: the node's own
    # listening address)
    conname: str = ""
    descr: str = ""
    workload: Mapping[str, int] = field(default_factory=dict)  # CLUSRCVR only

    @property
    def addresses(self) -> tuple[str, ...]:
        return tuple(a for a in self.conname.split(",") if a)

    def to_dict(self) -> dict[str, Any]:
        return {
            "name": self.name,
            "chltype": self.chltype,
            "cluster": self.cluster,
            "conname": self.conname,
            "descr": self.descr,
            "workload": dict(self.workload),
        }

    @staticmethod
    def from_dict(data: Mapping[str, Any]) -> ChannelDef:
        return ChannelDef(
            str(data["name"]),
            str(data["chltype"]),
            str(data["cluster"]),
            str(data.get("conname", "")),
            str(data.get("descr", "")),
            {str(k): int(v) for k, v in dict(data.get("workload", {})).items()},
        )


@dataclass
class ChannelDefs:
    """The cluster channels defined on one queue manager. ``fixed_cluster``: the cluster the
    node was started in (``--cluster``), which every definition must name."""

    defs: dict[str, ChannelDef] = field(default_factory=dict)
    fixed_cluster: str = ""

    @staticmethod
    def load(stored: Iterable[Mapping[str, Any]], fixed_cluster: str = "") -> ChannelDefs:
        out = ChannelDefs(fixed_cluster=fixed_cluster)
        for data in stored:
            d = ChannelDef.from_dict(data)
            out.defs[d.name] = d
        return out

    @property
    def cluster(self) -> str:
        """The cluster of this queue manager's channels ("" while there is none)."""
        if self.fixed_cluster:
            return self.fixed_cluster
        return next((d.cluster for d in self.defs.values()), "")

    def receiver(self) -> ChannelDef | None:
        return next((d for d in self.defs.values() if d.chltype == CLUSRCVR), None)

    def senders(self) -> list[ChannelDef]:
        return sorted((d for d in self.defs.values() if d.chltype == CLUSSDR), key=lambda d: d.name)

    def join_addresses(self) -> tuple[str, ...]:
        return tuple(dict.fromkeys(a for d in self.senders() for a in d.addresses))

    def ready(self) -> bool:
        """A cluster-receiver and a cluster-sender: the queue manager can join its cluster."""
        return self.receiver() is not None and bool(self.senders())

    def check(
        self,
        verb: str,
        name: str,
        params: Mapping[str, str | None],
    ) -> ChannelDef:
        """The definition DEFINE/ALTER CHANNEL would leave (nothing is changed here); raises
        ChannelDefError with the MQRCCF reason."""
        chltype = str(params.get("CHLTYPE") or "")
        current = self.defs.get(name)
        replacing = "REPLACE" in params
        if verb == "DEFINE" and current is not None and not replacing:
            raise ChannelDefError(
                "MQRCCF_OBJECT_ALREADY_EXISTS",
                f"channel {name} already exists (give REPLACE to replace it)",
            )
        if verb == "ALTER" and current is None:
            raise ChannelDefError("MQRCCF_CHANNEL_NOT_FOUND", f"channel {name} not found")
        if current is not None and current.chltype != chltype:
            raise ChannelDefError(
                "MQRCCF_CHANNEL_TYPE_ERROR",
                f"channel {name} is a {current.chltype} channel, not {chltype}",
            )
        cluster = params.get("CLUSTER")
        if cluster is None and verb == "ALTER" and current is not None:
            cluster = current.cluster
        if not cluster:
            raise ChannelDefError(
                "MQRCCF_CLUSTER_NAME_ERROR",
                f"a {chltype} channel needs CLUSTER(name): the cluster it belongs to",
            )
        mine = self.cluster
        others = [d for d in self.defs.values() if d.name != name]
        if (self.fixed_cluster or others) and cluster != mine:
            raise ChannelDefError(
                "MQRCCF_CLUSTER_NAME_ERROR",
                f"this queue manager is in cluster {mine}, not {cluster} "
                "(one cluster per queue manager here)",
            )
        if chltype == CLUSRCVR:
            other = self.receiver()
            if other is not None and other.name != name:
                raise ChannelDefError(
                    "MQRCCF_CHANNEL_TYPE_ERROR",
                    f"this queue manager already has cluster-receiver channel {other.name} in "
                    f"cluster {cluster}",
                )
        raw = params.get("CONNAME")
        if raw is not None:
            if chltype == CLUSSDR:
                conname = ",".join(parse_connames(raw))
            else:
                conname = parse_conname(raw) if raw.strip() else ""
        else:
            conname = current.conname if current is not None else ""
        if chltype == CLUSSDR and not conname:
            raise ChannelDefError(
                "MQRCCF_CONN_NAME_ERROR",
                "a CLUSSDR channel needs CONNAME('host(port)'): the full repository to join "
                "through",
            )
        base = current if current is not None and verb == "ALTER" else None
        workload = dict(base.workload) if base is not None else {}
        if chltype == CLUSRCVR:
            workload.update({k: int(str(v)) for k, v in params.items() if k in WORKLOAD and v})
        descr = params.get("DESCR")
        return ChannelDef(
            name,
            chltype,
            cluster,
            conname,
            descr if descr is not None else (base.descr if base is not None else ""),
            workload,
        )

    def put(self, d: ChannelDef) -> None:
        self.defs[d.name] = d

    def remove(self, name: str) -> ChannelDef | None:
        return self.defs.pop(name, None)
