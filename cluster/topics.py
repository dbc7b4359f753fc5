"""The MQ topic tree (pure): topic strings, ``#``/``+`` matching, administered topic objects.

This module is the public face; the code lives in:

- ``cluster.topic_strings``: levels, validation (MQRC_TOPIC_STRING_ERROR), ``topic_matches``;
- ``cluster.topic_matcher``: ``TopicMatcher``, a trie of subscription patterns;
- ``cluster.topic_attrs``: attribute names, allowed values, SYSTEM.BASE.TOPIC defaults;
- ``cluster.topic_objects``: ``TopicObject``, ``TopicObjects`` and attribute resolution.
"""

from __future__ import annotations

from cluster.topic_attrs import (
    ASPARENT,
    BASE_DEFAULTS,
    BLANK_INHERITED_ATTRS,
    EXPLICIT_ATTRS,
    INHERITED_ATTRS,
    TOPIC_ATTRS,
)
from cluster.topic_matcher import TopicMatcher
from cluster.topic_objects import (
    BASE_TOPIC,
    BASE_TOPIC_NAME,
    ResolvedTopic,
    TopicObject,
    TopicObjectError,
    TopicObjectNotFound,
    TopicObjects,
)
from cluster.topic_strings import (
    MAX_TOPIC_LENGTH,
    MQRC_TOPIC_STRING_ERROR,
    TopicStringError,
    ancestors,
    first_wildcard_index,
    is_at_or_above,
    is_wildcard,
    levels,
    topic_matches,
    validate_publish_topic,
    validate_subscription_topic,
    wildcard_prefix,
)

__all__ = [
    "ASPARENT",
    "BASE_DEFAULTS",
    "BASE_TOPIC",
    "BASE_TOPIC_NAME",
    "BLANK_INHERITED_ATTRS",
    "EXPLICIT_ATTRS",
    "INHERITED_ATTRS",
    "MAX_TOPIC_LENGTH",
    "MQRC_TOPIC_STRING_ERROR",
    "ResolvedTopic",
    "TOPIC_ATTRS",
    "TopicMatcher",
    "TopicObject",
    "TopicObjectError",
    "TopicObjectNotFound",
    "TopicObjects",
    "TopicStringError",
    "ancestors",
    "first_wildcard_index",
    "is_at_or_above",
    "is_wildcard",
    "levels",
    "topic_matches",
    "validate_publish_topic",
    "validate_subscription_topic",
    "wildcard_prefix",
]
