"""MQ-style failures: every error the domain raises carries an MQ reason code and name."""

from __future__ import annotations

# Reason codes as IBM MQ numbers them (cmqc.h).
REASONS: dict[str, int] = {
    "MQRC_BACKED_OUT": 2003,
    "MQRC_CONNECTION_BROKEN": 2009,
    "MQRC_ENVIRONMENT_ERROR": 2012,
    "MQRC_EXPIRY_ERROR": 2013,
    "MQRC_GET_INHIBITED": 2016,
    "MQRC_HCONN_ERROR": 2018,
    "MQRC_MSG_TOO_BIG_FOR_Q": 2030,
    "MQRC_NO_MSG_AVAILABLE": 2033,
    "MQRC_MD_ERROR": 2026,
    "MQRC_OBJECT_IN_USE": 2042,
    "MQRC_PERSISTENCE_ERROR": 2047,
    "MQRC_PRIORITY_ERROR": 2050,
    "MQRC_PUT_INHIBITED": 2051,
    "MQRC_Q_DELETED": 2052,
    "MQRC_Q_FULL": 2053,
    "MQRC_Q_NOT_EMPTY": 2055,
    "MQRC_UNKNOWN_OBJECT_NAME": 2085,
    "MQRC_OBJECT_ALREADY_EXISTS": 2100,
    "MQRC_RESOURCE_PROBLEM": 2102,
    "MQRC_OBJECT_NAME_ERROR": 2152,
    "MQRC_MSG_TOO_BIG_FOR_CHANNEL": 2218,
    "MQRC_PROPERTY_VALUE_TOO_BIG": 2469,
    "MQRC_PROPERTY_NAME_ERROR": 2442,
    "MQRC_TOPIC_STRING_ERROR": 2425,
    "MQRC_NO_SUBSCRIPTION": 2428,
    "MQRC_SUB_ALREADY_EXISTS": 2432,
    "MQRC_IDENTITY_MISMATCH": 2434,
    "MQRC_DURABILITY_NOT_ALLOWED": 2436,
    "MQRC_SUB_NAME_ERROR": 2440,
    "MQRC_PUBLICATION_FAILURE": 2502,
    "MQRC_SUB_INHIBITED": 2503,
    "MQRC_SELECTOR_SYNTAX_ERROR": 2459,
    "MQRC_SELECTOR_NOT_ALTERABLE": 2524,
    "MQRC_UNIT_OF_WORK_NOT_STARTED": 2232,
    "MQRC_OPTIONS_ERROR": 2046,
    "MQRC_UNEXPECTED_ERROR": 2195,
    "MQRC_Q_MGR_QUIESCING": 2161,
}


class MQError(Exception):
    """A failure with an MQ reason: ``MQError("MQRC_Q_FULL", "queue Q1 is full")``."""

    def __init__(self, reason_name: str, text: str) -> None:
        super().__init__(f"{reason_name} ({REASONS.get(reason_name, 0)}): {text}")
        self.reason_name = reason_name
        self.reason = REASONS.get(reason_name, 0)
        self.text = text
