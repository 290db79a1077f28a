"""replaykit.sse: the WHATWG event-stream rules, exact bytes, and the chunking property."""

from __future__ import annotations

import itertools
import re

import pytest
from hypothesis import example, given, settings
from hypothesis import strategies as st
from openai._streaming import SSEDecoder
from recordings import RECORDINGS

from replaykit import sse
from replaykit.cassette import load


def dispatched(body: bytes) -> list[tuple[str, str, str]]:
    return [(e.type, e.data or "", e.last_event_id) for e in sse.parse(body) if e.dispatched]


# ---------------------------------------------------------------- the spec, example by example


def test_event_and_data_fields() -> None:
    [event] = sse.parse(b"event: message_start\ndata: {\"a\": 1}\n\n")
    assert (event.event, event.type, event.data) == ("message_start", "message_start", '{"a": 1}')
    assert event.json() == {"a": 1}
    assert event.terminated and event.dispatched


def test_multi_line_data_is_joined_with_lf() -> None:
    [event] = sse.parse(b"data: one\ndata:two\ndata\ndata:  four\n\n")
    assert event.data == "one\ntwo\n\n four"  # one leading space stripped, no colon = empty value


def test_default_type_is_message() -> None:
    assert [e.type for e in sse.parse(b"data: a\n\nevent:\ndata: b\n\n")] == ["message", "message"]


@pytest.mark.parametrize("end", [b"\n", b"\r\n", b"\r"])
def test_every_line_end(end: bytes) -> None:
    body = b"event: x" + end + b"data: 1" + end + b"data: 2" + end + end
    [event] = sse.parse(body)
    assert (event.event, event.data, event.raw) == ("x", "1\n2", body)


def test_mixed_line_ends_and_cr_then_crlf_blank_line() -> None:
    body = b"data: a\r\ndata: b\rdata: c\n\r\ndata: d\r\r\n"
    events = sse.parse(body)
    assert [e.data for e in events] == ["a\nb\nc", "d"]
    assert [e.raw for e in events] == [b"data: a\r\ndata: b\rdata: c\n\r\n", b"data: d\r\r\n"]


def test_comments_are_kept_but_not_dispatched() -> None:
    [ping, event] = sse.parse(b": ping\n\n:keep\ndata: x\n\n")
    assert (ping.comments, ping.data, ping.dispatched) == (("ping",), None, False)
    assert (event.comments, event.data) == (("keep",), "x")


def test_unknown_fields_and_blocks_without_data_are_not_dispatched() -> None:
    events = sse.parse(b"foo: bar\n\nevent: only\n\n\n")
    assert [e.data for e in events] == [None, None, None]
    assert dispatched(b"foo: bar\n\nevent: only\n\n\n") == []


def test_last_event_id_persists_and_nul_is_ignored() -> None:
    body = b"id: 7\ndata: a\n\ndata: b\n\nid: x\x00y\ndata: c\n\nid\ndata: d\n\n"
    events = sse.parse(body)
    assert [e.id for e in events] == ["7", None, None, ""]
    assert [e.last_event_id for e in events] == ["7", "7", "7", ""]


RETRIES = [(b"retry: 1500", 1500), (b"retry: 15x", None), (b"retry: -1", None), (b"retry:", None),
           ("retry: ²".encode(), None)]


@pytest.mark.parametrize(("line", "retry"), RETRIES)
def test_retry_needs_ascii_digits(line: bytes, retry: int | None) -> None:
    assert sse.parse(line + b"\ndata: x\n\n")[0].retry == retry


def test_last_block_without_blank_line_is_kept_unterminated() -> None:
    events = sse.parse(b"data: a\n\ndata: b\n")
    assert [(e.data, e.terminated, e.dispatched) for e in events] == [("a", True, True), ("b", False, False)]
    [crlf] = sse.parse(b"data: a\r\ndata: b")  # a CRLF is one line end, never a line end plus a blank line
    assert (crlf.data, crlf.terminated) == ("a\nb", False)
    [tail] = sse.parse(b"data: no line end")
    assert (tail.data, tail.terminated, tail.raw) == ("no line end", False, b"data: no line end")


def test_a_leading_bom_is_ignored_once() -> None:
    body = b"\xef\xbb\xbfdata: a\n\n\xef\xbb\xbfdata: b\n\n"
    events = sse.parse(body)
    assert [e.data for e in events] == ["a", None]  # the second BOM makes an unknown field name
    assert sse.serialize(events) == body


def test_invalid_utf8_becomes_replacement_characters() -> None:
    assert sse.parse(b"data: \xff\xe2\x82\n\n")[0].data == "\ufffd\ufffd"


def test_empty_and_blank_streams() -> None:
    assert sse.parse(b"") == []
    assert [e.raw for e in sse.parse(b"\n\r\n\r")] == [b"\n", b"\r\n", b"\r"]


def test_padding_after_json_is_allowed() -> None:
    [event] = sse.parse(b'event: message_stop\ndata: {"type":"message_stop"          }\n\n')
    assert event.json() == {"type": "message_stop"}


def test_json_is_fresh_on_every_call() -> None:
    [event] = sse.parse(b'data: {"a": [1]}\n\n')
    event.json()["a"].append(2)
    assert event.json() == {"a": [1]}
    with pytest.raises(ValueError, match="no data"):
        sse.parse(b": c\n\n")[0].json()
    with pytest.raises(ValueError):
        sse.parse(b"data: {not json\n\n")[0].json()


def test_str_body_is_utf8() -> None:
    assert sse.parse("data: é\n\n")[0].raw == "data: é\n\n".encode()


# ---------------------------------------------------------------- incremental parsing


def test_cr_at_chunk_end_waits_for_a_possible_lf() -> None:
    parser = sse.Parser()
    assert parser.feed(b"data: x\n\r") == []
    [event] = parser.feed(b"\ndata: y\n\n")[:1]
    assert event.raw == b"data: x\n\r\n"


def test_bom_split_across_chunks() -> None:
    parser = sse.Parser()
    assert parser.feed(b"\xef") == [] and parser.feed(b"\xbb") == []
    events = parser.feed(b"\xbfdata: a\n\n") + parser.close()
    assert [(e.data, e.raw) for e in events] == [("a", b"\xef\xbb\xbfdata: a\n\n")]


def test_utf8_character_split_across_chunks() -> None:
    body = "data: 😀\n\n".encode()
    parser = sse.Parser()
    events = [e for byte in body for e in parser.feed(bytes([byte]))] + parser.close()
    assert [e.data for e in events] == ["😀"]


def test_a_long_line_in_small_chunks() -> None:
    body = b"data: " + b"x" * 20_000 + b"\n\n"
    parser = sse.Parser()
    events = [e for start in range(0, len(body), 7) for e in parser.feed(body[start : start + 7])]
    assert [len(e.data or "") for e in events + parser.close()] == [20_000]


def test_parser_is_reusable_after_close() -> None:
    parser = sse.Parser()
    assert [e.last_event_id for e in parser.feed(b"id: 1\ndata: a\n\n") + parser.close()] == ["1"]
    assert [e.last_event_id for e in parser.feed(b"data: b") + parser.close()] == [""]


def test_iter_events_yields_as_blocks_complete() -> None:
    chunks = iter([b"data: a\n", b"\ndata: b\n\n", b"data: c"])
    events = sse.iter_events(chunks)
    assert next(events).data == "a"
    assert [(e.data, e.terminated) for e in events] == [("b", True), ("c", False)]


# ---------------------------------------------------------------- encode


def test_encode_round_trips() -> None:
    event = sse.encode('{"a": 1}', "delta", ["note"], id="42", retry=3000)
    assert event.raw == b': note\nevent: delta\nid: 42\nretry: 3000\ndata: {"a": 1}\n\n'
    fields = (event.data, event.event, event.id, event.retry, event.comments)
    assert fields == ('{"a": 1}', "delta", "42", 3000, ("note",))
    assert sse.encode("a\nb").raw == b"data: a\ndata: b\n\n"
    assert sse.encode("").data == ""


@pytest.mark.parametrize(("kwargs", "message"), [
    ({"data": "a\rb"}, "data=.* CR"),
    ({"event": "a\nb"}, "event=.* line break"),
    ({"comments": ["a\rb"]}, "comment=.* line break"),
    ({"data": "x", "id": "a\x00b"}, "id=.* NUL"),
    ({"data": "x", "id": "a\nb"}, "id=.* line break"),
    ({"data": "x", "retry": -1}, "retry=-1 must not be negative"),
])
def test_encode_refuses_what_the_format_cannot_carry(kwargs: dict[str, object], message: str) -> None:
    with pytest.raises(ValueError, match=message):
        sse.encode(**kwargs)  # type: ignore[arg-type]


# ---------------------------------------------------------------- recorded streams


def _recorded_streams() -> list[bytes]:
    bodies = [item.response.body for path in RECORDINGS
              for item in load(path).interactions if item.response.is_stream]
    assert len(bodies) >= 3
    return bodies


def test_recorded_streams_parse_exactly() -> None:
    for body in _recorded_streams():
        events = sse.parse(body)
        assert sse.serialize(events) == body
        payloads = [e.json() for e in events if e.dispatched and e.data != "[DONE]"]
        assert payloads and all(isinstance(p, dict) and ("type" in p or "candidates" in p or "choices" in p)
                                    for p in payloads)
        assert events[-1].terminated


def test_recorded_gemini_streams_are_crlf_framed() -> None:
    bodies = [b for b in _recorded_streams() if b.startswith(b"data: {\"candidates\"")]
    assert len(bodies) == 2, "the real Gemini streams: web search and URL context"
    for body in bodies:
        events = [e for e in sse.parse(body) if e.dispatched]
        assert body.count(b"\r\n\r\n") == len(events) >= 2
        assert all(e.event in (None, "message") and "candidates" in e.json() for e in events)


def test_recorded_anthropic_padding_parses() -> None:
    body = next(b for b in _recorded_streams() if b.startswith(b"event: message_start"))
    padded = [e for e in sse.parse(body) if e.data and re.search(r"  +\}$", e.data)]
    assert len(padded) > 10, "the real Anthropic stream pads its JSON with spaces"
    assert all(isinstance(e.json(), dict) for e in padded)


# ---------------------------------------------------------------- properties

PIECES = [b"data", b"data:", b"data: ", b"event:", b"event: ", b"id:", b"id: ", b"retry:", b"retry: 12", b":",
          b" ", b"\r", b"\n", b"\r\n", b"\n\n", b"\r\n\r\n", b"\xef\xbb\xbf", "é😀".encode(), b"\x00",
          b"\xff", b"\xe2\x82", b"x", b"{\"a\": 1}   ", b"7"]
streams = st.lists(st.sampled_from(PIECES) | st.binary(max_size=4), max_size=40).map(b"".join)


@st.composite
def split_stream(draw: st.DrawFn) -> tuple[bytes, list[bytes]]:
    body = draw(streams)
    cuts = sorted(draw(st.lists(st.integers(0, len(body)), max_size=12)))
    bounds = [0, *cuts, len(body)]
    return body, [body[a:b] for a, b in itertools.pairwise(bounds)]


@settings(max_examples=200, deadline=None)
@given(split_stream())
@example((b"data: x\r\n\r\n", [b"data: x\r", b"\n\r", b"\n"]))
@example((b"\xef\xbb\xbfdata: a\n\n", [b"\xef", b"\xbb\xbfdata: a\n", b"\n"]))
@example((b"data: a\n\r\n", [b"data: a\n\r", b"\n"]))
def test_any_split_yields_the_whole_body_events(case: tuple[bytes, list[bytes]]) -> None:
    body, chunks = case
    parser = sse.Parser()
    incremental = [event for chunk in chunks for event in parser.feed(chunk)] + parser.close()
    assert incremental == sse.parse(body)


@settings(max_examples=200, deadline=None)
@given(split_stream())
@example((b"data: a\n\n", [b"data: a\n", b"\n"]))
@example((b"data: a\r\r\n", [b"data: a\r", b"\r", b"\n"]))
def test_each_event_comes_out_as_soon_as_its_blank_line_arrives(case: tuple[bytes, list[bytes]]) -> None:
    """After n bytes, exactly the blocks ending by n are out, but one ending in CR exactly at n (CRLF?)."""
    body, chunks = case
    parser, fed, out = sse.Parser(), 0, 0
    whole = sse.parse(body)
    ends = list(itertools.accumulate(len(e.raw) for e in whole))
    for chunk in chunks:
        out += len(parser.feed(chunk))
        fed += len(chunk)
        due = [n for n, (end, e) in enumerate(zip(ends, whole, strict=True))
               if e.terminated and (end < fed or (end == fed and not e.raw.endswith(b"\r")))]
        assert out == len(due), (fed, out, due)


@settings(max_examples=200, deadline=None)
@given(streams)
@example(b"data: a\r\ndata: b")
@example(b"\xef\xbb\xbf\n\ndata: a\n\n")  # a BOM, then a blank line: counted as parse counts it
@example(b"\xef\xbb\xbf\r\n\r\ndata: a\r\n\r\n")
@example(b"\n\ndata: a\n\n")
def test_bytes_round_trip_and_count(body: bytes) -> None:
    events = sse.parse(body)
    assert sse.serialize(events) == body
    assert sse.count(body) == len(events)


def whatwg(body: bytes) -> list[tuple[str, str, str]]:
    """A direct transcription of the spec's interpretation steps (dispatched events only)."""
    text = body.decode("utf-8", errors="replace").removeprefix("\ufeff")
    *lines, _unterminated = re.split(r"\r\n|\r|\n", text)
    out, data, kind, last_id = [], "", "", ""
    for line in lines:
        if line == "":
            if data:
                out.append((kind or "message", data.removesuffix("\n"), last_id))
            data, kind = "", ""
            continue
        name, colon, value = line.partition(":")
        if colon and value.startswith(" "):
            value = value[1:]
        if name == "data":
            data += value + "\n"
        elif name == "event":
            kind = value
        elif name == "id" and "\0" not in value:
            last_id = value
    return out


@settings(max_examples=200, deadline=None)
@given(streams)
@example(b"data\n\ndata:\n\n")
@example(b"id: 1\ndata: a\n\ndata: b\n\n")
@example(b"data: a\r\ndata: b")
def test_dispatched_events_match_the_spec_transcription(body: bytes) -> None:
    assert dispatched(body) == whatwg(body)


lines = st.text(st.characters(blacklist_categories=["Cs"], blacklist_characters="\r\n"), max_size=8)
blocks = st.tuples(st.none() | lines, st.lists(lines, min_size=1, max_size=3), st.none() | lines)
ends = st.sampled_from(["\n", "\r\n", "\r"])
Block = tuple[str | None, list[str], str | None]


@settings(max_examples=100, deadline=None)
@given(st.lists(st.tuples(blocks, ends), max_size=6))
def test_same_events_as_the_openai_sdk_decoder(spec: list[tuple[Block, str]]) -> None:
    text = ""
    for (event, data, ident), end in spec:
        fields = ([f"event: {event}"] if event is not None else []) + [f"data: {d}" for d in data]
        fields += [f"id: {ident}"] if ident is not None and "\0" not in ident else []
        text += end.join(fields) + end + end
    body = text.encode()
    theirs = [(s.event or None, s.data, s.id or "") for s in SSEDecoder().iter_bytes(iter([body]))]
    assert [(e.event or None, e.data, e.last_event_id) for e in sse.parse(body)] == theirs


@settings(max_examples=100, deadline=None)
@given(lines.filter(lambda s: "\0" not in s), st.lists(lines, min_size=1, max_size=3),
       st.lists(lines, max_size=2))
def test_encode_then_parse_gives_the_fields_back(name: str, data: list[str], comments: list[str]) -> None:
    built = sse.encode("\n".join(data), name, comments, id=name)
    [parsed] = sse.parse(built.raw)
    assert parsed == built
    fields = (parsed.event, parsed.data, parsed.id, list(parsed.comments))
    assert fields == (name, "\n".join(data), name, comments)


def test_retry_zero_is_encodable_and_parses_back() -> None:
    assert sse.encode(data="x", retry=0).retry == 0  # zero is not negative: reconnect at once
