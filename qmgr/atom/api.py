"""The Service Bus management API over a namespace: one request in, one response out (pure).

Routes, as ``ServiceBusAdministrationClient`` (7.15.0, ``api-version=2024-05``) and the .NET
and JS admin clients call them; path segments ``subscriptions`` and ``rules`` in any case, and
entity names may hold ``/``:

- ``GET /$Resources/queues|topics?$skip=N&$top=M``: a feed (a ``next`` link when more remain)
- ``GET|PUT|DELETE /<queue or topic>``; the PUT body's description says which kind it creates
- ``GET /<topic>/subscriptions``, ``GET|PUT|DELETE /<topic>/subscriptions/<sub>``
- ``GET /<topic>/subscriptions/<sub>/rules``, ``GET|PUT|DELETE …/rules/<rule>``
- ``GET /$namespaceinfo``: the namespace's name, a Standard messaging namespace
- ``GET /health``: ``200 Healthy``, as Microsoft's emulator answers

A PUT without ``If-Match`` creates (409 if the name is taken); with ``If-Match: *`` it updates
(404 if missing). Failures carry Service Bus's status (the HTTP status of ``qmgr.servicebus``'s
error codes) and ``<Error><Code/><Detail/></Error>``. ``Response.changed`` tells the caller to
commit before answering. Authorization is checked before, by the port
(:mod:`qmgr.node.sbport`), when the node has Service Bus keys: a token granting ``Manage`` on
the request's URL. Given those keys here too, a PUT that makes a queue or subscription
auto-forward (``ForwardTo``, ``ForwardDeadLetteredMessagesTo``, on create and on update) also
needs ``Manage`` on each destination, as Service Bus requires for chaining (``Send`` there is not
enough), from the request's token or the supplementary token the admin clients send for it
(:func:`qmgr.servicebus.sas.authorize_destination`); without it the answer is 401 and nothing is
created or changed.
"""

from __future__ import annotations

import math
from collections.abc import Callable, Mapping
from dataclasses import dataclass
from urllib.parse import parse_qs, unquote, urlsplit
from urllib.parse import quote as _quote

from qmgr.atom import descriptions as atom
from qmgr.atom.descriptions import AtomError
from qmgr.servicebus.entities import QueueProperties, SubscriptionProperties, TopicProperties
from qmgr.servicebus.errors import Code, ServiceBusError
from qmgr.servicebus.names import DEFAULT_RULE
from qmgr.servicebus.namespace import (
    Namespace,
    QueueInfo,
    RuleInfo,
    SubscriptionInfo,
    TopicInfo,
)
from qmgr.servicebus.sas import FORWARDING_HEADERS, SasError, SasKeys, authorize_destination

ENTRY_TYPE = "application/atom+xml;type=entry;charset=utf-8"
FEED_TYPE = "application/atom+xml;type=feed;charset=utf-8"
XML_TYPE = "application/xml; charset=utf-8"
TEXT_TYPE = "text/plain; charset=utf-8"
API_VERSION = "2024-05"
MAX_TOP = 100


def quote(name: str) -> str:
    """An entity or rule name as a URL path segment, ``$`` kept as Azure writes it (the JS SDK
    reads names back from the entry's id, so ``$Default`` must not come back as ``%24Default``)."""
    return _quote(name, safe="/$")


@dataclass(frozen=True, slots=True)
class _Request:
    method: str
    query: Mapping[str, str]
    headers: Mapping[str, str]
    body: bytes
    base: str  # https://host: where the entries' links point

    @property
    def if_match(self) -> bool:
        return self.headers.get("if-match", "").strip() == "*"


@dataclass(frozen=True, slots=True)
class Response:
    status: int
    content_type: str
    body: bytes
    changed: bool = False  # the namespace changed: commit before answering


def _error(status: int, detail: str) -> Response:
    return Response(status, XML_TYPE, atom.error(status, detail))


class ManagementApi:
    """Answers management requests on ``namespace``; ``now`` gives the time for feeds and
    tokens. With ``keys`` (the node's Service Bus keys), forwarding destinations need ``Manage``;
    without, every token is accepted."""

    def __init__(
        self, namespace: Namespace, now: Callable[[], float], keys: SasKeys | None = None
    ) -> None:
        self.ns = namespace
        self.now = now
        self.keys = keys

    def handle(
        self, method: str, target: str, headers: Mapping[str, str], body: bytes, host: str
    ) -> Response:
        """``target`` as sent (path and query); ``headers`` with lower-case names."""
        parts = urlsplit(target)
        segments = [unquote(s) for s in parts.path.split("/") if s]
        query = {k: v[0] for k, v in parse_qs(parts.query).items()}
        request = _Request(method, query, headers, body, f"https://{host}")
        try:
            return self._route(segments, request)
        except ServiceBusError as exc:
            status = 409 if exc.code is Code.ENTITY_ALREADY_EXISTS else exc.code.status
            return _error(status, str(exc))
        except AtomError as exc:
            return _error(400, f"Bad request: {exc}")
        except SasError as exc:
            return _error(401, f"Unauthorized: {exc}")

    def _route(self, seg: list[str], req: _Request) -> Response:
        method, base = req.method, req.base
        if not seg:
            return _error(404, "No entity was named.")
        if method == "GET" and len(seg) == 1 and seg[0].lower() == "health":
            return Response(200, TEXT_TYPE, b"Healthy")
        if method == "GET" and len(seg) == 1 and seg[0].lower() == "$namespaceinfo":
            info = atom.namespace_info(self.ns.name)
            entry = atom.entry(f"{base}/$namespaceinfo", self.ns.name, info, 0.0, self.now())
            return Response(200, ENTRY_TYPE, atom.document(entry))
        if seg[0].lower() == "$resources":
            if method != "GET" or len(seg) != 2 or seg[1].lower() not in ("queues", "topics"):
                return _error(404, f"No such resource list: /{'/'.join(seg)}")
            return self._list_entities(seg[1].lower(), req.query, base)
        lowered = [s.lower() for s in seg]
        if "subscriptions" in lowered[1:]:
            at = lowered.index("subscriptions", 1)
            topic = "/".join(seg[:at])
            rest = seg[at + 1 :]
            return self._subscriptions(topic, rest, req)
        name = "/".join(seg)
        if method == "GET":
            return self._get_entity(name, base)
        if method == "PUT":
            return self._put_entity(name, req)
        if method == "DELETE":
            return self._delete_entity(name)
        return _error(405, f"Method {method} is not allowed here.")

    # -- queues and topics ----------------------------------------------------------------

    def _find(self, name: str) -> QueueInfo | TopicInfo:
        try:
            return self.ns.get_queue(name)
        except ServiceBusError as exc:
            if exc.code is not Code.ENTITY_NOT_FOUND:
                raise
        try:
            return self.ns.get_topic(name)
        except ServiceBusError as exc:
            if exc.code is not Code.ENTITY_NOT_FOUND:
                raise
        raise ServiceBusError(
            Code.ENTITY_NOT_FOUND, f"Entity '{name}' was not found in namespace '{self.ns.name}'."
        )

    def _entity_entry(self, info: QueueInfo | TopicInfo, base: str) -> str:
        url = f"{base}/{quote(info.name)}?api-version={API_VERSION}"
        if isinstance(info, QueueInfo):
            description = atom.queue_description(info)
        else:
            description = atom.topic_description(info)
        return atom.entry(url, info.name, description, info.created_at, info.updated_at)

    def _get_entity(self, name: str, base: str) -> Response:
        info = self._find(name)
        return Response(200, ENTRY_TYPE, atom.document(self._entity_entry(info, base)))

    def _put_entity(self, name: str, req: _Request) -> Response:
        body, base = req.body, req.base
        kind = atom.description_kind(body)
        updating = req.if_match
        info: QueueInfo | TopicInfo
        if kind == "QueueDescription":
            values = atom.parse_queue(body)
            if updating:
                current = self.ns.get_queue(name).properties
                queue = current.with_changes(values)
                self._authorize_forwarding(queue, req)
                info = self.ns.update_queue(name, queue)
            else:
                queue = QueueProperties.from_dict(values)
                self._authorize_forwarding(queue, req)
                info = self.ns.create_queue(name, queue)
        elif kind == "TopicDescription":
            values = atom.parse_topic(body)
            if updating:
                current_topic = self.ns.get_topic(name).properties
                info = self.ns.update_topic(name, current_topic.with_changes(values))
            else:
                info = self.ns.create_topic(name, TopicProperties.from_dict(values))
        else:
            raise AtomError(f"PUT /{name} needs a QueueDescription or TopicDescription, got {kind}")
        status = 200 if updating else 201
        return Response(
            status, ENTRY_TYPE, atom.document(self._entity_entry(info, base)), changed=True
        )

    def _authorize_forwarding(
        self, props: QueueProperties | SubscriptionProperties, req: _Request
    ) -> None:
        """With keys: :class:`SasError` unless the request may manage every destination the
        entity would forward to (what it forwards to after this create or update)."""
        if self.keys is None:
            return
        targets = (
            ("ForwardTo", props.forward_to),
            ("ForwardDeadLetteredMessagesTo", props.forward_dead_lettered_to),
        )
        for prop, destination in targets:
            if destination:
                authorize_destination(
                    self.keys,
                    prop,
                    destination,
                    req.base,
                    req.headers.get("authorization"),
                    req.headers.get(FORWARDING_HEADERS[prop].lower()),
                    self.now(),
                )

    def _delete_entity(self, name: str) -> Response:
        info = self._find(name)
        if isinstance(info, QueueInfo):
            self.ns.delete_queue(info.name)
        else:
            self.ns.delete_topic(info.name)
        return Response(200, XML_TYPE, b"", changed=True)

    def _list_entities(self, which: str, query: Mapping[str, str], base: str) -> Response:
        skip, top = _paging(query)
        infos: list[QueueInfo] | list[TopicInfo]
        infos = self.ns.list_queues() if which == "queues" else self.ns.list_topics()
        page = infos[skip : skip + top]
        url = f"{base}/$Resources/{which}?$skip={skip}&$top={top}&api-version={API_VERSION}"
        more = skip + top < len(infos)
        next_url = (
            f"{base}/$Resources/{which}?$skip={skip + top}&$top={top}&api-version={API_VERSION}"
            if more
            else None
        )
        entries = [self._entity_entry(i, base) for i in page]
        title = "Queues" if which == "queues" else "Topics"
        text = atom.feed(url, title, entries, self.now(), next_url)
        return Response(200, FEED_TYPE, atom.document(text))

    # -- subscriptions and rules ----------------------------------------------------------

    def _subscriptions(self, topic: str, rest: list[str], req: _Request) -> Response:
        method, base, query = req.method, req.base, req.query
        topic_url = f"{base}/{quote(topic)}/Subscriptions"
        if not rest:
            if method != "GET":
                return _error(405, f"Method {method} is not allowed on a subscription list.")
            subs = self.ns.list_subscriptions(topic)
            return self._feed(
                topic_url,
                "Subscriptions",
                [self._sub_entry(s, base) for s in subs],
                query,
            )
        sub = rest[0]
        if len(rest) == 1:
            if method == "GET":
                info = self.ns.get_subscription(topic, sub)
                return Response(200, ENTRY_TYPE, atom.document(self._sub_entry(info, base)))
            if method == "DELETE":
                self.ns.delete_subscription(topic, sub)
                return Response(200, XML_TYPE, b"", changed=True)
            if method == "PUT":
                return self._put_subscription(topic, sub, req)
            return _error(405, f"Method {method} is not allowed on a subscription.")
        if rest[1].lower() != "rules" or len(rest) > 3:
            return _error(404, f"No such resource under subscription '{sub}'.")
        if len(rest) == 2:
            if method != "GET":
                return _error(405, f"Method {method} is not allowed on a rule list.")
            rules = self.ns.list_rules(topic, sub)
            url = f"{topic_url}/{quote(sub)}/Rules"
            return self._feed(url, "Rules", [self._rule_entry(r, base) for r in rules], query)
        rule = rest[2]
        if method == "GET":
            found = self.ns.get_rule(topic, sub, rule)
            return Response(200, ENTRY_TYPE, atom.document(self._rule_entry(found, base)))
        if method == "DELETE":
            self.ns.delete_rule(topic, sub, rule)
            return Response(200, XML_TYPE, b"", changed=True)
        if method == "PUT":
            _, props = atom.parse_rule(req.body)
            if req.if_match:
                made = self.ns.update_rule(topic, sub, rule, props)
            else:
                made = self.ns.create_rule(topic, sub, rule, props)
            status = 200 if req.if_match else 201
            entry = self._rule_entry(made, base)
            return Response(status, ENTRY_TYPE, atom.document(entry), changed=True)
        return _error(405, f"Method {method} is not allowed on a rule.")

    def _put_subscription(self, topic: str, name: str, req: _Request) -> Response:
        values, rule = atom.parse_subscription(req.body)
        info: SubscriptionInfo
        if req.if_match:
            current = self.ns.get_subscription(topic, name).properties
            props = current.with_changes(values)
            self._authorize_forwarding(props, req)
            info = self.ns.update_subscription(topic, name, props)
            status = 200
        else:
            props = SubscriptionProperties.from_dict(values)
            self._authorize_forwarding(props, req)
            default = None if rule is None else (rule[0] or DEFAULT_RULE, rule[1])
            info = self.ns.create_subscription(topic, name, props, default)
            status = 201
        entry = self._sub_entry(info, req.base)
        return Response(status, ENTRY_TYPE, atom.document(entry), changed=True)

    def _sub_entry(self, info: SubscriptionInfo, base: str) -> str:
        url = f"{base}/{quote(info.topic)}/Subscriptions/{quote(info.name)}"
        return atom.entry(
            url, info.name, atom.subscription_description(info), info.created_at, info.updated_at
        )

    def _rule_entry(self, info: RuleInfo, base: str) -> str:
        url = (
            f"{base}/{quote(info.topic)}/Subscriptions/{quote(info.subscription)}"
            f"/Rules/{quote(info.name)}"
        )
        return atom.entry(
            url, info.name, atom.rule_description(info), info.created_at, info.updated_at
        )

    def _feed(self, url: str, title: str, entries: list[str], query: Mapping[str, str]) -> Response:
        skip, top = _paging(query)
        page = entries[skip : skip + top]
        next_url = None
        if skip + top < len(entries):
            next_url = f"{url}?$skip={skip + top}&$top={top}&api-version={API_VERSION}"
        self_url = f"{url}?$skip={skip}&$top={top}&api-version={API_VERSION}"
        text = atom.feed(self_url, title, page, self.now(), next_url)
        return Response(200, FEED_TYPE, atom.document(text))


def _paging(query: Mapping[str, str]) -> tuple[int, int]:
    try:
        skip = int(query.get("$skip", "0"))
        top = int(query.get("$top", str(MAX_TOP)))
    except ValueError:
        raise AtomError("$skip and $top must be whole numbers") from None
    if skip < 0 or top < 1 or math.isinf(top):
        raise AtomError("$skip must be >= 0 and $top >= 1")
    return skip, min(top, MAX_TOP)
