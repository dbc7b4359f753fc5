"""The MQSC command surface qmgr accepts: verbs, object types and their parameters.

``COMMANDS`` maps ``(verb, object type)`` (canonical spellings) to a :class:`CommandSpec`
naming the parameters that take a value (with their :mod:`~qmgr.mqsc.domains` domain), the
flags (keywords without a value), the attribute names a DISPLAY may request, and the
required, mutually exclusive and forbidden parameters.

Synonyms, as documented for runmqsc: verbs ``DEF`` = DEFINE, ``DIS`` = DISPLAY, ``ALT`` =
ALTER (DELETE deliberately has none); object types ``QL`` = QLOCAL, ``Q`` = QUEUE, ``QS`` =
QSTATUS, ``TPS`` = TPSTATUS, ``CHS`` = CHSTATUS, ``CHL`` = CHANNEL, ``SUBSCRIPTION`` = SUB.

Choices made where the reference is silent: CHLTYPE accepts CLUSSDR as well as CLUSRCVR (real
cluster scripts define both; the executor decides what a CLUSSDR means), DELETE CHANNEL
accepts an optional CHLTYPE, DEFINE SUB needs DEST unless DESTCLAS(MANAGED) (or LIKE), DISPLAY
QUEUE's TYPE accepts every MQ queue type so scripts written for MQ still parse, and REFRESH
CLUSTER(name) [REPOS(YES|NO)] is included from the reference's command table.
"""

from __future__ import annotations

from collections.abc import Callable, Mapping
from dataclasses import dataclass, field

from qmgr.mqsc.domains import Choice, Domain, Hex, Name, Number, Text

VERB_SYNONYMS: Mapping[str, str] = {"DEF": "DEFINE", "DIS": "DISPLAY", "ALT": "ALTER"}
OBJECT_SYNONYMS: Mapping[str, str] = {
    "QL": "QLOCAL",
    "Q": "QUEUE",
    "QS": "QSTATUS",
    "QM": "QMODEL",
    "TPS": "TPSTATUS",
    "CHS": "CHSTATUS",
    "CHL": "CHANNEL",
    "SUBSCRIPTION": "SUB",
}
VERBS: tuple[str, ...] = (
    *("ALTER", "CLEAR", "DEFINE", "DELETE", "DISPLAY"),
    *("END", "REFRESH", "RESET", "RESUME", "START", "STOP", "SUSPEND"),
)
WHERE_OPERATORS: tuple[str, ...] = (
    "LT",
    "GT",
    "EQ",
    "NE",
    "LE",
    "GE",
    "LK",
    "NL",
    "CT",
    "EX",
    "CTG",
    "EXG",
)

Check = Callable[[Mapping[str, str | None]], str | None]


@dataclass(frozen=True, eq=False)
class CommandSpec:
    """What one ``verb object`` command accepts.

    ``name``: domain of the value in the object's parentheses (None: the object takes none);
    ``name_alternative``: a parameter that may stand in for the name (SUBID for SUB).
    ``required``: groups of which at least one member must be given; ``exclusive``: groups of
    which at most one may be given; ``forbidden``: keyword -> message for parameters the
    command rejects outright. ``attrs``: attribute names a DISPLAY may request as flags;
    ``attrs_by_type`` narrows them by the TYPE filter (default ``default_type``).
    ``checks``: further rules over the validated parameters, each returning an error message.
    """

    verb: str
    obj: str
    name: Name | None = None
    name_alternative: str | None = None
    params: Mapping[str, Domain] = field(default_factory=dict)
    flags: frozenset[str] = frozenset()
    attrs: frozenset[str] = frozenset()
    required: tuple[tuple[str, ...], ...] = ()
    exclusive: tuple[tuple[str, ...], ...] = ()
    forbidden: Mapping[str, str] = field(default_factory=dict)
    where: bool = False
    attrs_by_type: Mapping[str, frozenset[str]] | None = None
    default_type: str | None = None
    checks: tuple[Check, ...] = ()

    @property
    def label(self) -> str:
        return f"{self.verb} {self.obj}"


def _words(text: str) -> frozenset[str]:
    return frozenset(text.split())


# --- shared domains -------------------------------------------------------------------------

OBJECT_NAME = Name()
BLANKABLE = Name(blank_ok=True)
GENERIC = Name(generic_ok=True)
CHANNEL_NAME = Name(max_len=20)
GENERIC_CHANNEL = Name(max_len=20, generic_ok=True)
SUB_NAME = Name(max_len=10240, charset=None)
GENERIC_SUB = Name(max_len=10240, charset=None, generic_ok=True)
TOPIC_STRING = Name(max_len=10240, charset=None, blank_ok=True)
SUBID = Hex(48)
_ENABLED = Choice(("ENABLED", "DISABLED"))
_ASPARENT_ENABLED = Choice(("ASPARENT", "ENABLED", "DISABLED"))
_ASPARENT_YES_NO = Choice(("ASPARENT", "YES", "NO"))
_SCOPE = Choice(("ASPARENT", "QMGR", "ALL"))
_MSGDLV = Choice(("ASPARENT", "ALL", "ALLAVAIL", "ALLDUR"))
_PRIORITY = Number(0, 9)
_DESCR = Text(64)
_REPLACE = ("REPLACE", "NOREPLACE")
# The largest MAXMSGL (queue manager and local queues): 60 MiB, so that one message with its
# properties and headers fits in one 64 MiB gRPC response (the node's transport limit).
MAX_MSGL = 62_914_560

# --- local queues ---------------------------------------------------------------------------

QLOCAL_PARAMS: Mapping[str, Domain] = {
    "DESCR": _DESCR,
    "MAXDEPTH": Number(0, 999_999_999),
    "MAXMSGL": Number(0, MAX_MSGL),
    "DEFPSIST": Choice(("NO", "YES")),
    "DEFPRTY": _PRIORITY,
    "GET": _ENABLED,
    "PUT": _ENABLED,
    "BOTHRESH": Number(0, 999_999_999),
    "BOQNAME": BLANKABLE,
    "USAGE": Choice(("NORMAL", "XMITQ")),
}
QUEUE_ATTRS = _words(
    "QUEUE TYPE DESCR MAXDEPTH MAXMSGL DEFPSIST DEFPRTY GET PUT BOTHRESH BOQNAME USAGE "
    "CURDEPTH IPPROCS OPPROCS ALTDATE ALTTIME CRDATE CRTIME DEFTYPE"
)
# model queues (managed subscription queues are made from them: MDURMDL / MNDURMDL)
QMODEL_PARAMS: Mapping[str, Domain] = {
    **{k: v for k, v in QLOCAL_PARAMS.items() if k != "USAGE"},
    "DEFTYPE": Choice(("PERMDYN", "TEMPDYN")),
}
QMODEL_ATTRS = _words(
    "QUEUE TYPE DESCR MAXDEPTH MAXMSGL DEFPSIST DEFPRTY GET PUT BOTHRESH BOQNAME USAGE "
    "DEFTYPE ALTDATE ALTTIME CRDATE CRTIME"
)
QSTATUS_ATTRS = _words(
    "CURDEPTH IPPROCS OPPROCS LGETDATE LGETTIME LPUTDATE LPUTTIME MEDIALOG MONQ MSGAGE QTIME "
    "UNCOM APPLDESC APPLTAG APPLTYPE ASTATE BROWSE CHANNEL CONNAME HSTATE INPUT INQUIRE OUTPUT "
    "PID QMURID SET TID URID URTYPE USERID"
)
_QUEUE_TYPE = Choice(
    ("ALL", "QLOCAL", "QALIAS", "QREMOTE", "QMODEL", "QCLUSTER"),
    (("QL", "QLOCAL"), ("QA", "QALIAS"), ("QR", "QREMOTE"), ("QM", "QMODEL"), ("QC", "QCLUSTER")),
)

# --- topics ---------------------------------------------------------------------------------

TOPIC_PARAMS: Mapping[str, Domain] = {
    "TOPICSTR": Text(10240, nonempty=True, topic=True),
    "TYPE": Choice(("LOCAL",)),
    "DESCR": _DESCR,
    "CLUSTER": BLANKABLE,
    "CLROUTE": Choice(("DIRECT", "TOPICHOST")),
    "PUB": _ASPARENT_ENABLED,
    "SUB": _ASPARENT_ENABLED,
    "PUBSCOPE": _SCOPE,
    "SUBSCOPE": _SCOPE,
    "PROXYSUB": Choice(("FIRSTUSE", "FORCE")),
    "WILDCARD": Choice(("PASSTHRU", "BLOCK")),
    "DURSUB": _ASPARENT_YES_NO,
    "DEFPSIST": Choice(("ASPARENT", "NO", "YES")),
    "DEFPRTY": Number(0, 9, ("ASPARENT",)),
    "DEFPRESP": Choice(("ASPARENT", "SYNC", "ASYNC")),
    "NPMSGDLV": _MSGDLV,
    "PMSGDLV": _MSGDLV,
    "USEDLQ": _ASPARENT_YES_NO,
    "MDURMDL": BLANKABLE,
    "MNDURMDL": BLANKABLE,
    "CUSTOM": Text(128),
    "CAPEXPRY": Number(1, 999_999_999, ("ASPARENT", "NOLIMIT")),
}
TOPIC_ATTRS = _words(
    "ALTDATE ALTTIME CAPEXPRY CLROUTE CLSTATE CLUSDATE CLUSQMGR CLUSTER CLUSTIME COMMINFO "
    "CUSTOM DEFPRESP DEFPRTY DEFPSIST DESCR DURSUB MCAST MDURMDL MNDURMDL NPMSGDLV PMSGDLV "
    "PROXYSUB PUB PUBSCOPE QMID SUB SUBSCOPE TOPICSTR TYPE USEDLQ WILDCARD"
)
TPSTATUS_ATTRS: Mapping[str, frozenset[str]] = {
    "TOPIC": _words(
        "ADMIN CLROUTE CLUSTER COMMINFO DEFPRESP DEFPRTY DEFPSIST DURSUB MCAST MDURMDL MNDURMDL "
        "NPMSGDLV PMSGDLV PUB PUBCOUNT PUBSCOPE RETAINED SUB SUBCOUNT SUBSCOPE USEDLQ"
    ),
    "SUB": _words(
        "ACTCONN DURABLE LMSGDATE LMSGTIME MCASTREL NUMMSGS RESMDATE RESMTIME SUBID SUBTYPE SUBUSER"
    ),
    "PUB": _words("ACTCONN LPUBDATE LPUBTIME MCASTREL NUMPUBS"),
}

# --- subscriptions --------------------------------------------------------------------------

SUB_PARAMS: Mapping[str, Domain] = {
    "TOPICSTR": Text(10240),
    "TOPICOBJ": OBJECT_NAME,
    "DEST": OBJECT_NAME,
    "DESTQMGR": BLANKABLE,
    "DESTCLAS": Choice(("PROVIDED", "MANAGED")),
    "DESTCORL": Hex(48),
    "EXPIRY": Number(0, 999_999_999, ("UNLIMITED",)),
    "PSPROP": Choice(("NONE", "COMPAT", "RFH2", "MSGPROP")),
    "PUBACCT": Hex(64),
    "PUBAPPID": Text(32),
    "PUBPRTY": Number(0, 9, ("ASPUB", "ASQDEF")),
    "SELECTOR": Text(10240),
    "SUBSCOPE": Choice(("ALL", "QMGR")),
    "SUBUSER": Text(12),
    "USERDATA": Text(10240),
    "VARUSER": Choice(("ANY", "FIXED")),
    "WSCHEMA": Choice(("TOPIC", "CHAR")),
    "SUBLEVEL": Number(1, 9),
    "REQONLY": Choice(("NO", "YES")),
}
SUB_UNALTERABLE = (
    "TOPICOBJ",
    "TOPICSTR",
    "WSCHEMA",
    "SELECTOR",
    "SUBSCOPE",
    "DESTCLAS",
    "SUBLEVEL",
)
SUB_ATTRS = _words(
    "SUB SUBID SUBTYPE SUBUSER TOPICSTR DEST DESTQMGR DESTCORL DURABLE ALTDATE ALTTIME CRDATE "
    "CRTIME DESTCLAS EXPIRY PSPROP PUBACCT PUBAPPID PUBPRTY REQONLY SELECTOR SELTYPE SUBLEVEL "
    "SUBSCOPE TOPICOBJ USERDATA VARUSER WSCHEMA"
)
SBSTATUS_ATTRS = _words(
    "ACTCONN DURABLE LMSGDATE LMSGTIME MCASTREL NUMMSGS RESMDATE RESMTIME SUBID SUBTYPE SUBUSER "
    "TOPICSTR"
)
_SUBTYPE = Choice(("USER", "PROXY", "ADMIN", "API", "ALL"))
_DURABLE = Choice(("ALL", "YES", "NO"))


def _sub_needs_dest(params: Mapping[str, str | None]) -> str | None:
    """DEFINE SUB: a PROVIDED destination (the default) must be named with DEST."""
    if "DEST" in params or "LIKE" in params or params.get("DESTCLAS") == "MANAGED":
        return None
    return "Missing required parameter DEST for DEFINE SUB (or DESTCLAS(MANAGED))"


# --- bridges to Service Bus (an object of qmgr's own) ----------------------------------------

BRIDGE_PARAMS: Mapping[str, Domain] = {
    "DIRECTION": Choice(("TOSB", "FROMSB")),
    "TOPICSTR": Text(10240, nonempty=True),
    "SBENTITY": Text(260, nonempty=True),
    "SESSPROP": Text(256),
    "DESCR": _DESCR,
}
BRIDGE_ATTRS = _words(
    "BRIDGE DIRECTION TOPICSTR SBENTITY SESSPROP DESCR SUB STATUS MSGS DROPPED CURDEPTH LASTERR "
    "ALTDATE ALTTIME CRDATE CRTIME"
)


def _sessprop_only_tosb(params: Mapping[str, str | None]) -> str | None:
    """DEFINE BRIDGE: SESSPROP names an MQ property, so it applies to DIRECTION(TOSB) only."""
    if params.get("DIRECTION") == "FROMSB" and params.get("SESSPROP"):
        return "SESSPROP is valid only with DIRECTION(TOSB)"
    return None


# --- channels, queue manager, cluster -------------------------------------------------------

CHANNEL_PARAMS: Mapping[str, Domain] = {
    "CHLTYPE": Choice(("CLUSRCVR", "CLUSSDR")),
    "TRPTYPE": Choice(("TCP",)),
    "CONNAME": Text(264),
    "CLUSTER": BLANKABLE,
    "CLWLRANK": _PRIORITY,
    "CLWLPRTY": _PRIORITY,
    "CLWLWGHT": Number(1, 99),
    "NETPRTY": _PRIORITY,
    "DESCR": _DESCR,
}
CHANNEL_ATTRS = _words(
    "CHANNEL CHLTYPE TRPTYPE CONNAME CLUSTER CLWLRANK CLWLPRTY CLWLWGHT NETPRTY DESCR ALTDATE ALTTIME"
)
CHSTATUS_ATTRS = _words(
    "CHLTYPE CONNAME CURLUWID CURMSGS CURSEQNO INDOUBT LSTLUWID LSTSEQNO STATUS BATCHES BYTSRCVD "
    "BYTSSENT CHSTADA CHSTATI LOCLADDR LSTMSGDA LSTMSGTI MSGS RQMNAME STOPREQ SUBSTATE XMITQ "
    "XQMSGSA LSTERROR MAXDEPTH RQMID"
)
CLUSQMGR_ATTRS = _words(
    "ALTDATE ALTTIME CHANNEL CLUSDATE CLUSTER CLUSTIME CLWLPRTY CLWLRANK CLWLWGHT CONNAME DEFTYPE "
    "DESCR NETPRTY QMID QMTYPE STATUS SUSPEND VERSION XMITQ"
)
QMGR_PARAMS: Mapping[str, Domain] = {
    "DESCR": _DESCR,
    "PSMODE": Choice(("ENABLED", "COMPAT", "DISABLED")),
    "PSCLUS": _ENABLED,
    "REPOS": BLANKABLE,
    "TREELIFE": Number(60, 604_000, also=(0,)),
    "CLWLUSEQ": Choice(("LOCAL", "ANY")),
    "CLWLMRUC": Number(1, 999_999_999),
    "DEFCLXQ": Choice(("SCTQ", "CHANNEL")),
    "MAXMSGL": Number(32_768, MAX_MSGL),
    "DEADQ": BLANKABLE,
}
QMGR_ATTRS = _words(
    "ALTDATE ALTTIME CLWLMRUC CLWLUSEQ CRDATE CRTIME DEADQ DEFCLXQ DESCR MAXMSGL PSCLUS PSMODE "
    "QMID QMNAME REPOS REPOSNL TREELIFE"
)
PUBSUB_ATTRS = _words("TYPE QMNAME STATUS SUBCOUNT TPCOUNT")


def _display(
    obj: str,
    name: Name | None,
    attrs: frozenset[str],
    *,
    params: Mapping[str, Domain] | None = None,
    extra_flags: tuple[str, ...] = (),
    exclusive: tuple[tuple[str, ...], ...] = (),
    forbidden: Mapping[str, str] | None = None,
    name_alternative: str | None = None,
    attrs_by_type: Mapping[str, frozenset[str]] | None = None,
    default_type: str | None = None,
) -> CommandSpec:
    return CommandSpec(
        "DISPLAY",
        obj,
        name=name,
        name_alternative=name_alternative,
        params=params or {},
        flags=frozenset(("ALL", *extra_flags)),
        attrs=attrs,
        exclusive=exclusive,
        forbidden=forbidden or {},
        where=True,
        attrs_by_type=attrs_by_type,
        default_type=default_type,
    )


def _without(params: Mapping[str, Domain], *names: str) -> dict[str, Domain]:
    return {k: v for k, v in params.items() if k not in names}


def _define_queue(obj: str, params: Mapping[str, Domain]) -> CommandSpec:
    return CommandSpec(
        "DEFINE",
        obj,
        name=OBJECT_NAME,
        params={**params, "LIKE": OBJECT_NAME},
        flags=frozenset(_REPLACE),
        exclusive=(_REPLACE,),
    )


_SPECS: tuple[CommandSpec, ...] = (
    # local queues
    _define_queue("QLOCAL", QLOCAL_PARAMS),
    CommandSpec(
        "ALTER", "QLOCAL", name=OBJECT_NAME, params=QLOCAL_PARAMS, flags=frozenset({"FORCE"})
    ),
    CommandSpec(
        "DELETE",
        "QLOCAL",
        name=OBJECT_NAME,
        flags=frozenset({"PURGE", "NOPURGE"}),
        exclusive=(("PURGE", "NOPURGE"),),
    ),
    CommandSpec("CLEAR", "QLOCAL", name=OBJECT_NAME),
    _define_queue("QMODEL", QMODEL_PARAMS),
    CommandSpec("ALTER", "QMODEL", name=OBJECT_NAME, params=QMODEL_PARAMS),
    CommandSpec("DELETE", "QMODEL", name=OBJECT_NAME),
    _display("QMODEL", GENERIC, QMODEL_ATTRS),
    _display("QLOCAL", GENERIC, QUEUE_ATTRS),
    _display("QUEUE", GENERIC, QUEUE_ATTRS, params={"TYPE": _QUEUE_TYPE}),
    _display(
        "QSTATUS",
        GENERIC,
        QSTATUS_ATTRS,
        params={
            "TYPE": Choice(("QUEUE", "HANDLE")),
            "OPENTYPE": Choice(("ALL", "INPUT", "OUTPUT")),
        },
        extra_flags=("MONITOR",),
    ),
    # topics
    CommandSpec(
        "DEFINE",
        "TOPIC",
        name=OBJECT_NAME,
        params={**TOPIC_PARAMS, "LIKE": OBJECT_NAME},
        flags=frozenset(_REPLACE),
        exclusive=(_REPLACE,),
        required=(("TOPICSTR",),),
    ),
    CommandSpec(
        "ALTER",
        "TOPIC",
        name=OBJECT_NAME,
        params=_without(TOPIC_PARAMS, "TOPICSTR", "TYPE"),
        forbidden={"TOPICSTR": "TOPICSTR cannot be altered"},
    ),
    CommandSpec("DELETE", "TOPIC", name=OBJECT_NAME),
    _display(
        "TOPIC",
        GENERIC,
        TOPIC_ATTRS,
        params={"TYPE": Choice(("LOCAL", "CLUSTER", "ALL")), "CLUSTER": GENERIC},
        extra_flags=("CLUSINFO",),
    ),
    _display(
        "TCLUSTER",
        GENERIC,
        TOPIC_ATTRS,
        params={"CLUSTER": GENERIC},
        forbidden={"TYPE": "TYPE cannot be given with DISPLAY TCLUSTER (it means TYPE(CLUSTER))"},
    ),
    _display(
        "TPSTATUS",
        TOPIC_STRING,
        frozenset().union(*TPSTATUS_ATTRS.values()),
        params={"TYPE": Choice(("TOPIC", "SUB", "PUB"))},
        attrs_by_type=TPSTATUS_ATTRS,
        default_type="TOPIC",
    ),
    CommandSpec(
        "CLEAR",
        "TOPICSTR",
        name=TOPIC_STRING,
        params={"CLRTYPE": Choice(("RETAINED",)), "SCOPE": Choice(("LOCAL",))},
        required=(("CLRTYPE",),),
    ),
    # subscriptions
    CommandSpec(
        "DEFINE",
        "SUB",
        name=SUB_NAME,
        params={**SUB_PARAMS, "LIKE": SUB_NAME},
        flags=frozenset(_REPLACE),
        exclusive=(_REPLACE,),
        required=(("TOPICSTR", "TOPICOBJ"),),
        checks=(_sub_needs_dest,),
    ),
    CommandSpec(
        "ALTER",
        "SUB",
        name=SUB_NAME,
        name_alternative="SUBID",
        params={**_without(SUB_PARAMS, *SUB_UNALTERABLE), "SUBID": SUBID},
        forbidden={k: f"{k} cannot be altered" for k in SUB_UNALTERABLE},
    ),
    CommandSpec("DELETE", "SUB", name=SUB_NAME, name_alternative="SUBID", params={"SUBID": SUBID}),
    _display(
        "SUB",
        GENERIC_SUB,
        SUB_ATTRS,
        name_alternative="SUBID",
        params={"SUBID": SUBID, "SUBTYPE": _SUBTYPE, "DURABLE": _DURABLE},
        extra_flags=("SUMMARY",),
        exclusive=(("ALL", "SUMMARY"),),
    ),
    _display(
        "SBSTATUS",
        GENERIC_SUB,
        SBSTATUS_ATTRS,
        name_alternative="SUBID",
        params={"SUBID": SUBID, "SUBTYPE": _SUBTYPE, "DURABLE": _DURABLE},
    ),
    # bridges
    CommandSpec(
        "DEFINE",
        "BRIDGE",
        name=OBJECT_NAME,
        params=BRIDGE_PARAMS,
        flags=frozenset(_REPLACE),
        exclusive=(_REPLACE,),
        required=(("DIRECTION",), ("TOPICSTR",), ("SBENTITY",)),
        checks=(_sessprop_only_tosb,),
    ),
    CommandSpec(
        "ALTER",
        "BRIDGE",
        name=OBJECT_NAME,
        params=_without(BRIDGE_PARAMS, "DIRECTION"),
        forbidden={"DIRECTION": "DIRECTION cannot be altered; delete and define the bridge"},
    ),
    CommandSpec("DELETE", "BRIDGE", name=OBJECT_NAME),
    _display("BRIDGE", GENERIC, BRIDGE_ATTRS, params={"DIRECTION": BRIDGE_PARAMS["DIRECTION"]}),
    # channels
    CommandSpec(
        "DEFINE",
        "CHANNEL",
        name=CHANNEL_NAME,
        params={**CHANNEL_PARAMS, "LIKE": CHANNEL_NAME},
        flags=frozenset(_REPLACE),
        exclusive=(_REPLACE,),
        required=(("CHLTYPE",),),
    ),
    CommandSpec(
        "ALTER", "CHANNEL", name=CHANNEL_NAME, params=CHANNEL_PARAMS, required=(("CHLTYPE",),)
    ),
    CommandSpec(
        "DELETE", "CHANNEL", name=CHANNEL_NAME, params={"CHLTYPE": CHANNEL_PARAMS["CHLTYPE"]}
    ),
    _display(
        "CHANNEL",
        GENERIC_CHANNEL,
        CHANNEL_ATTRS,
        params={"CHLTYPE": Choice(("ALL", "CLUSRCVR", "CLUSSDR"))},
    ),
    _display(
        "CHSTATUS",
        GENERIC_CHANNEL,
        CHSTATUS_ATTRS,
        params={"CONNAME": Text(264), "XMITQ": OBJECT_NAME},
        extra_flags=("CURRENT", "SAVED", "SHORT", "MONITOR"),
        exclusive=(("CURRENT", "SAVED", "SHORT"),),
    ),
    # queue manager and cluster
    CommandSpec("ALTER", "QMGR", params=QMGR_PARAMS, flags=frozenset({"FORCE"})),
    _display("QMGR", None, QMGR_ATTRS),
    _display(
        "PUBSUB", None, PUBSUB_ATTRS, params={"TYPE": Choice(("ALL", "LOCAL", "PARENT", "CHILD"))}
    ),
    _display(
        "CLUSQMGR",
        GENERIC,
        CLUSQMGR_ATTRS,
        params={"CLUSTER": GENERIC, "CHANNEL": GENERIC_CHANNEL},
    ),
    CommandSpec(
        "SUSPEND",
        "QMGR",
        params={"CLUSTER": OBJECT_NAME, "MODE": Choice(("QUIESCE", "FORCE"))},
        required=(("CLUSTER",),),
    ),
    CommandSpec("RESUME", "QMGR", params={"CLUSTER": OBJECT_NAME}, required=(("CLUSTER",),)),
    CommandSpec(
        "STOP",
        "CHANNEL",
        name=CHANNEL_NAME,
        params={"MODE": Choice(("QUIESCE", "FORCE")), "STATUS": Choice(("STOPPED",))},
    ),
    CommandSpec("START", "CHANNEL", name=CHANNEL_NAME),
    CommandSpec("REFRESH", "QMGR", params={"TYPE": Choice(("PROXYSUB",))}, required=(("TYPE",),)),
    CommandSpec("REFRESH", "CLUSTER", name=GENERIC, params={"REPOS": Choice(("NO", "YES"))}),
    CommandSpec(
        "RESET",
        "CLUSTER",
        name=OBJECT_NAME,
        params={
            "ACTION": Choice(("FORCEREMOVE",)),
            "QMNAME": OBJECT_NAME,
            "QMID": Text(48, nonempty=True),
            "QUEUES": Choice(("NO", "YES")),
        },
        required=(("ACTION",), ("QMNAME", "QMID")),
        exclusive=(("QMNAME", "QMID"),),
    ),
)

COMMANDS: Mapping[tuple[str, str], CommandSpec] = {(s.verb, s.obj): s for s in _SPECS}


def objects_for(verb: str) -> tuple[str, ...]:
    """The object types ``verb`` accepts, sorted."""
    return tuple(sorted(obj for v, obj in COMMANDS if v == verb))


KNOWN_KEYWORDS: frozenset[str] = frozenset(
    keyword
    for spec in COMMANDS.values()
    for keyword in (*spec.params, *spec.flags, *spec.attrs, *spec.forbidden)
)
