"""Administered topic objects and attribute resolution (docs/mq-semantics.md §3.2-§3.5)."""

from __future__ import annotations

import pytest

from cluster.topics import (
    BASE_DEFAULTS,
    BASE_TOPIC_NAME,
    TOPIC_ATTRS,
    TopicObject,
    TopicObjectError,
    TopicObjects,
)


def obj(name: str, topic_str: str, **attrs: str) -> TopicObject:
    return TopicObject(name, topic_str, attrs)


def holding(*defined: TopicObject) -> TopicObjects:
    """The topic objects: SYSTEM.BASE.TOPIC and ``defined``, put in that order."""
    objects = TopicObjects()
    for o in defined:
        objects.put(o)
    return objects


def test_base_defaults_are_the_documented_ones() -> None:
    expected = {
        "CLROUTE": "DIRECT",
        "CLUSTER": "",
        "DEFPRESP": "SYNC",
        "DEFPRTY": "0",
        "DEFPSIST": "NO",
        "DURSUB": "YES",
        "MCAST": "DISABLED",
        "MDURMDL": "SYSTEM.DURABLE.MODEL.QUEUE",
        "MNDURMDL": "SYSTEM.NDURABLE.MODEL.QUEUE",
        "NPMSGDLV": "ALLAVAIL",
        "PMSGDLV": "ALLDUR",
        "PROXYSUB": "FIRSTUSE",
        "PUB": "ENABLED",
        "PUBSCOPE": "ALL",
        "SUB": "ENABLED",
        "SUBSCOPE": "ALL",
        "USEDLQ": "YES",
        "WILDCARD": "PASSTHRU",
        "CAPEXPRY": "NOLIMIT",
    }
    for attr, value in expected.items():
        assert BASE_DEFAULTS[attr] == value
    assert set(BASE_DEFAULTS) == TOPIC_ATTRS


def test_a_new_registry_holds_only_the_base_topic() -> None:
    objects = TopicObjects()
    base = objects.get(BASE_TOPIC_NAME)
    assert base is not None
    assert base.topic_str == ""
    assert objects.at("") is base
    assert [o.name for o in objects.all()] == [BASE_TOPIC_NAME]


def test_with_no_objects_everything_resolves_to_the_base_defaults() -> None:
    resolved = TopicObjects().resolve("Sport/Football")
    assert resolved.admin == BASE_TOPIC_NAME
    assert dict(resolved.attrs) == dict(BASE_DEFAULTS)
    assert resolved.cluster_object is None
    assert not resolved.clustered
    assert resolved["PUB"] == "ENABLED"


def test_asparent_attributes_come_from_the_closest_object_above() -> None:
    objects = holding(
        obj("SPORT", "Sport", PUB="DISABLED", DEFPRTY="3"),
        obj("FOOTBALL", "Sport/Football", DEFPRTY="7"),
    )
    resolved = objects.resolve("Sport/Football/Results")
    assert resolved.admin == "FOOTBALL"
    assert resolved["DEFPRTY"] == "7"  # the closest object wins
    assert resolved["PUB"] == "DISABLED"  # FOOTBALL is ASPARENT -> keep walking up to SPORT
    assert resolved["SUB"] == "ENABLED"  # both ASPARENT -> SYSTEM.BASE.TOPIC
    assert objects.resolve("Sport/Tennis")["DEFPRTY"] == "3"
    assert objects.resolve("Sport/Tennis").admin == "SPORT"
    assert objects.resolve("Sport")["PUB"] == "DISABLED"  # an object resolves at its own node


def test_explicit_asparent_is_the_same_as_missing() -> None:
    objects = holding(
        obj("SPORT", "Sport", DURSUB="NO"), obj("FOOTBALL", "Sport/Football", DURSUB="ASPARENT")
    )
    assert objects.resolve("Sport/Football")["DURSUB"] == "NO"


def test_ancestry_is_by_level_prefix_not_string_prefix() -> None:
    objects = holding(obj("SPORT", "Sport", PUB="DISABLED"), obj("LEAD", "/Sport", SUB="DISABLED"))
    assert objects.resolve("Sports/Football").admin == BASE_TOPIC_NAME
    assert objects.resolve("Sports/Football")["PUB"] == "ENABLED"
    assert objects.resolve("Sport/Football")["SUB"] == "ENABLED"  # '/Sport' is not above it
    assert objects.resolve("/Sport/Football").admin == "LEAD"
    assert objects.resolve("/Sport/Football")["PUB"] == "ENABLED"


def test_base_topic_values_are_the_fallback() -> None:
    objects = TopicObjects()
    base = objects.get(BASE_TOPIC_NAME)
    assert base is not None
    objects.put(base.altered({"DEFPSIST": "YES", "MDURMDL": "MY.MODEL"}))
    objects.put(obj("SPORT", "Sport"))
    resolved = objects.resolve("Sport/x")
    assert resolved["DEFPSIST"] == "YES"
    assert resolved["MDURMDL"] == "MY.MODEL"
    assert resolved.admin == "SPORT"


def test_deleting_the_base_topic_falls_back_to_built_in_defaults() -> None:
    objects = TopicObjects()
    base = objects.get(BASE_TOPIC_NAME)
    assert base is not None
    objects.put(base.altered({"DEFPSIST": "YES"}))
    assert objects.resolve("a")["DEFPSIST"] == "YES"
    removed = objects.remove(BASE_TOPIC_NAME)
    assert removed.name == BASE_TOPIC_NAME
    assert objects.get(BASE_TOPIC_NAME) is None
    resolved = objects.resolve("a")
    assert resolved["DEFPSIST"] == "NO"
    assert resolved.admin == BASE_TOPIC_NAME
    objects.put(obj("A", "a", PUB="DISABLED"))
    assert objects.resolve("a/b")["PUB"] == "DISABLED"
    assert objects.resolve("a/b")["SUB"] == "ENABLED"


def test_asparent_on_the_base_topic_uses_the_built_in_default() -> None:
    objects = holding(TopicObject(BASE_TOPIC_NAME, "", {"PUB": "ASPARENT", "MDURMDL": ""}))
    resolved = objects.resolve("x")
    assert resolved["PUB"] == "ENABLED"
    assert resolved["MDURMDL"] == "SYSTEM.DURABLE.MODEL.QUEUE"


def test_cluster_inherits_and_names_the_clustered_point() -> None:
    sport = obj("SPORT", "Sport", CLUSTER="DEMO", CLROUTE="TOPICHOST")
    # FOOTBALL's CLUSTER is blank: it inherits
    objects = holding(sport, obj("FOOTBALL", "Sport/Football", DEFPRTY="5"))
    resolved = objects.resolve("Sport/Football/Results")
    assert resolved["CLUSTER"] == "DEMO"
    assert resolved.cluster == "DEMO"
    assert resolved.cluster_object == sport
    assert resolved["CLROUTE"] == "TOPICHOST"  # the clustered point's routing
    assert resolved.admin == "FOOTBALL"
    unclustered = objects.resolve("News")
    assert unclustered["CLUSTER"] == ""
    assert unclustered.cluster_object is None
    assert unclustered["CLROUTE"] == "DIRECT"


def test_the_closest_clustered_object_is_the_clustered_point() -> None:
    football = obj("FOOTBALL", "Sport/Football", CLUSTER="C2", CLROUTE="TOPICHOST")
    objects = holding(obj("SPORT", "Sport", CLUSTER="C1"), football)
    resolved = objects.resolve("Sport/Football/x")
    assert resolved.cluster_object == football
    assert resolved["CLUSTER"] == "C2"
    tennis = objects.resolve("Sport/Tennis")
    assert tennis["CLUSTER"] == "C1"
    assert tennis["CLROUTE"] == "DIRECT"


def test_proxysub_and_wildcard_are_explicit_not_inherited() -> None:
    sport = obj("SPORT", "Sport", PROXYSUB="FORCE", WILDCARD="BLOCK")
    objects = holding(sport, obj("FOOTBALL", "Sport/Football"))
    below = objects.resolve("Sport/Football/x")
    assert below["PROXYSUB"] == "FIRSTUSE"  # FOOTBALL's own (default) value
    assert below["WILDCARD"] == "PASSTHRU"
    assert below.force_object == sport  # but SPORT's forced wildcard proxy still covers it
    assert below.blocking == (sport,)
    at = objects.resolve("Sport/x")
    assert at["PROXYSUB"] == "FORCE"
    assert at["WILDCARD"] == "BLOCK"


def test_wildcard_block_hides_topics_from_less_specific_wildcards() -> None:
    objects = holding(obj("FOOTBALL", "Sport/Football", WILDCARD="BLOCK"))
    resolved = objects.resolve("Sport/Football/Results")
    assert resolved.wildcard_blocked("Sport/#")
    assert resolved.wildcard_blocked("#")
    assert resolved.wildcard_blocked("Sport/+/Results")
    assert not resolved.wildcard_blocked("Sport/Football/#")
    assert not resolved.wildcard_blocked("Sport/Football/+")
    assert not resolved.wildcard_blocked("Sport/Football/Results")  # not a wildcard
    at_node = objects.resolve("Sport/Football")
    assert at_node.wildcard_blocked("Sport/#")
    assert not at_node.wildcard_blocked("Sport/Football/#")
    passthru = objects.resolve("Sport/Tennis")
    assert not passthru.wildcard_blocked("Sport/#")


def test_wildcard_subscriptions_resolve_before_the_first_wildcard_level() -> None:
    objects = holding(
        obj("SPORT", "Sport", SUBSCOPE="QMGR"), obj("FOOTBALL", "Sport/Football", CLUSTER="DEMO")
    )
    resolved = objects.resolve("Sport/#")
    assert resolved.admin == "SPORT"
    assert resolved.resolved_at == "Sport"
    assert resolved.topic_str == "Sport/#"
    assert resolved["SUBSCOPE"] == "QMGR"
    assert resolved.cluster_object is None  # above the clustered point
    assert objects.resolve("Sport/+/Results").admin == "SPORT"
    assert objects.resolve("Sport/Football/#").cluster_object is not None
    assert objects.resolve("#").admin == BASE_TOPIC_NAME


def test_objects_below_finds_objects_at_or_below() -> None:
    objects = holding(
        obj("SPORT", "Sport"),
        obj("FOOTBALL", "Sport/Football", CLUSTER="DEMO"),
        obj("TENNIS", "Sport/Tennis", CLUSTER="DEMO"),
        obj("SPORTS", "Sports", CLUSTER="DEMO"),
    )
    names = [o.name for o in objects.objects_below("Sport")]
    assert names == ["SPORT", "FOOTBALL", "TENNIS"]
    assert [o.name for o in objects.objects_below("Sport/Football")] == ["FOOTBALL"]
    assert len(objects.objects_below("")) == 5
    assert [o.name for o in objects.clustered_objects()] == ["FOOTBALL", "TENNIS", "SPORTS"]


def test_put_replaces_by_name_and_rejects_a_second_object_at_one_topicstr() -> None:
    objects = holding(obj("SPORT", "Sport", PUB="DISABLED"))
    assert objects.resolve("Sport/x")["PUB"] == "DISABLED"
    objects.put(obj("SPORT", "Sport", PUB="ENABLED"))
    assert objects.resolve("Sport/x")["PUB"] == "ENABLED"  # replaced, resolution refreshed
    with pytest.raises(TopicObjectError) as info:
        objects.put(obj("OTHER", "Sport"))
    assert "SPORT" in info.value.reason
    with pytest.raises(TopicObjectError):
        objects.put(obj("SPORT", "Sport/Else"))  # TOPICSTR cannot change
    with pytest.raises(TopicObjectError):
        objects.put(obj("ROOT", ""))


def test_remove_unknown_is_an_error_and_remove_refreshes_resolution() -> None:
    objects = TopicObjects()
    with pytest.raises(TopicObjectError) as info:
        objects.remove("NOPE")
    assert isinstance(info.value, KeyError)
    assert "NOPE" in str(info.value)
    objects.put(obj("SPORT", "Sport", PUB="DISABLED"))
    assert objects.resolve("Sport/x")["PUB"] == "DISABLED"
    objects.remove("SPORT")
    assert objects.resolve("Sport/x")["PUB"] == "ENABLED"
    assert objects.at("Sport") is None


@pytest.mark.parametrize(
    ("name", "topic_str", "attrs"),
    [
        ("X" * 49, "a", {}),
        ("BAD NAME", "a", {}),
        ("", "a", {}),
        ("T", "", {}),
        ("T", "a/", {}),
        ("T", "a/#", {}),
        ("T", "a\x00b", {}),
        ("T", "a", {"PUB": "MAYBE"}),
        ("T", "a", {"NOSUCH": "YES"}),
        ("T", "a", {"DEFPRTY": "10"}),
        ("T", "a", {"CLROUTE": "ASPARENT"}),
        ("T", "a", {"PROXYSUB": "ASPARENT"}),
        ("T", "a", {"CAPEXPRY": "0"}),
        ("T", "a", {"CLUSTER": "has space"}),
        (BASE_TOPIC_NAME, "a", {}),
    ],
)
def test_invalid_definitions_are_rejected(name: str, topic_str: str, attrs: dict) -> None:
    with pytest.raises(TopicObjectError) as info:
        TopicObject(name, topic_str, attrs)
    assert info.value.reason


def test_topic_objects_are_immutable_and_hashable() -> None:
    source = {"PUB": "DISABLED"}
    t = TopicObject("T", "a", source)
    source["PUB"] = "ENABLED"
    assert t.attrs["PUB"] == "DISABLED"
    assert t == TopicObject("T", "a", {"PUB": "DISABLED"})
    assert len({t, TopicObject("T", "a", {"PUB": "DISABLED"})}) == 1
    assert t.value("PUB") == "DISABLED"
    assert t.value("SUB") == "ASPARENT"
    assert t.value("CLUSTER") == ""
    assert t.value("PROXYSUB") == "FIRSTUSE"
    assert t.altered({"SUB": "DISABLED"}).attrs == {"PUB": "DISABLED", "SUB": "DISABLED"}


def test_resolution_is_per_registry() -> None:
    qm1, qm2 = TopicObjects(), TopicObjects()
    qm1.put(obj("SPORT", "Sport", PUB="DISABLED"))
    assert qm1.resolve("Sport/x")["PUB"] == "DISABLED"
    assert qm2.resolve("Sport/x")["PUB"] == "ENABLED"
