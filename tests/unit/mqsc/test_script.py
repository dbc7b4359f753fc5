"""Script splitting follows runmqsc's input rules (comments, blanks, continuations, ';')."""

from qmgr.mqsc import ScriptCommand, split_commands


def texts(script: str) -> list[str]:
    return [c.text for c in split_commands(script)]


def test_one_command_per_line_with_line_numbers() -> None:
    script = "DEFINE QLOCAL(A)\nDEFINE QLOCAL(B)\n"
    assert split_commands(script) == [
        ScriptCommand("DEFINE QLOCAL(A)", 1),
        ScriptCommand("DEFINE QLOCAL(B)", 2),
    ]


def test_comments_and_blank_lines_are_ignored() -> None:
    script = "* a comment\n\n   \nDEFINE QLOCAL(A)\n  * indented comment\n\nDISPLAY QMGR\n"
    assert split_commands(script) == [
        ScriptCommand("DEFINE QLOCAL(A)", 4),
        ScriptCommand("DISPLAY QMGR", 7),
    ]


def test_indented_lines_are_accepted() -> None:
    assert split_commands("    DISPLAY QMGR   \n\tEND") == [
        ScriptCommand("DISPLAY QMGR", 1),
        ScriptCommand("END", 2),
    ]


def test_plus_continues_from_first_non_blank_of_next_line() -> None:
    script = "DEFINE QLOCAL(A) +\n        MAXDEPTH(10)\n"
    assert split_commands(script) == [ScriptCommand("DEFINE QLOCAL(A) MAXDEPTH(10)", 1)]


def test_minus_continues_from_column_one_of_next_line() -> None:
    script = "DEFINE QLOCAL(A) -\n   MAXDEPTH(10)\n"
    assert texts(script) == ["DEFINE QLOCAL(A)    MAXDEPTH(10)"]


def test_continuation_inside_quoted_string() -> None:
    # The documented example: 'Fr- / ed' and 'Fr+ / ed' (e in column 1) both give 'Fred'.
    assert texts("ALTER QLOCAL(A) DESCR('Fr-\ned')") == ["ALTER QLOCAL(A) DESCR('Fred')"]
    assert texts("ALTER QLOCAL(A) DESCR('Fr+\ned')") == ["ALTER QLOCAL(A) DESCR('Fred')"]
    # '+' skips the next line's leading blanks, '-' keeps them.
    assert texts("ALTER QLOCAL(A) DESCR('Fr+\n   ed')") == ["ALTER QLOCAL(A) DESCR('Fred')"]
    assert texts("ALTER QLOCAL(A) DESCR('Fr-\n   ed')") == ["ALTER QLOCAL(A) DESCR('Fr   ed')"]


def test_continuation_chars_are_found_after_trailing_blanks() -> None:
    assert texts("DISPLAY QLOCAL(A) +   \n CURDEPTH") == ["DISPLAY QLOCAL(A) CURDEPTH"]


def test_comments_and_blank_lines_inside_a_continued_command_are_discarded() -> None:
    script = "DEFINE QLOCAL(A) +\n* comment\n\n  MAXDEPTH(10) +\n\n  PUT(ENABLED)\nEND"
    assert split_commands(script) == [
        ScriptCommand("DEFINE QLOCAL(A) MAXDEPTH(10) PUT(ENABLED)", 1),
        ScriptCommand("END", 7),
    ]


def test_many_continuation_lines_start_at_first_line() -> None:
    script = "\n\nDEFINE TOPIC(T) +\n TOPICSTR('a/b') +\n CLUSTER(C) +\n CLROUTE(TOPICHOST)\n"
    assert split_commands(script) == [
        ScriptCommand("DEFINE TOPIC(T) TOPICSTR('a/b') CLUSTER(C) CLROUTE(TOPICHOST)", 3)
    ]


def test_trailing_semicolon_ends_a_command() -> None:
    assert texts("DISPLAY QMGR;\nDISPLAY PUBSUB ;") == ["DISPLAY QMGR", "DISPLAY PUBSUB"]


def test_semicolon_cancels_a_stray_continuation() -> None:
    assert split_commands("DISPLAY QMGR +\n;\nEND") == [
        ScriptCommand("DISPLAY QMGR", 1),
        ScriptCommand("END", 3),
    ]


def test_lone_semicolon_is_not_a_command() -> None:
    assert texts(";\n  ;  \nEND") == ["END"]


def test_open_continuation_at_end_of_text_keeps_the_command() -> None:
    assert texts("DISPLAY QMGR +") == ["DISPLAY QMGR"]
    assert texts("DISPLAY QMGR -\n") == ["DISPLAY QMGR"]


def test_windows_and_old_mac_line_ends() -> None:
    assert split_commands("DISPLAY QMGR\r\nDEFINE QLOCAL(A) +\r\n MAXDEPTH(1)\rEND") == [
        ScriptCommand("DISPLAY QMGR", 1),
        ScriptCommand("DEFINE QLOCAL(A) MAXDEPTH(1)", 2),
        ScriptCommand("END", 4),
    ]


def test_dash_inside_a_line_is_not_continuation() -> None:
    assert texts("DEFINE QLOCAL(A-B)\nEND") == ["DEFINE QLOCAL(A-B)", "END"]


def test_empty_script() -> None:
    assert split_commands("") == []
    assert split_commands("* only a comment\n\n") == []
