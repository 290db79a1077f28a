"""Objects built with the real SDK pydantic types validate against the response contracts.

``st.from_type`` cannot build these models, so the strategies draw the fields replaykit cares about
(search blocks, results and error codes, citations, web_search_call actions, url_citation, usage) and build
the models with their own constructors; each is dumped with ``model_dump(mode="json", exclude_none=...)``.
"""

from __future__ import annotations

import typing
from typing import Any

import anthropic.types as at
import openai.types.responses as ot
from anthropic.types import server_tool_use_block as stu
from hypothesis import given, settings
from hypothesis import strategies as st
from openai.types.responses import response_function_web_search as ws
from openai.types.responses import response_output_text as otext
from pydantic import BaseModel

from replaykit import contracts

TEXT = st.text(st.characters(codec="utf-8", exclude_categories=("Cs",)), max_size=30)
IDS = st.text("abcdefXYZ0123456789", min_size=4, max_size=12)
URLS = st.builds(lambda scheme, host, path: f"{scheme}://{host}.example/{path}",
                 st.sampled_from(["http", "https"]), st.from_regex(r"[a-z]{1,10}", fullmatch=True),
                 st.from_regex(r"[a-z0-9/]{0,12}", fullmatch=True))
COUNTS = st.integers(0, 10**6)


def _values(annotation: Any) -> list[Any]:
    if typing.get_origin(annotation) is typing.Literal:
        return list(typing.get_args(annotation))
    return [value for arg in typing.get_args(annotation) for value in _values(arg)]


def _literal(model: type[BaseModel], field: str) -> list[Any]:
    """The Literal values the SDK allows for ``model.field`` (so new SDK values are exercised too)."""
    return [value for value in _values(model.model_fields[field].annotation) if value is not None]


def _dump(model: BaseModel, drop_none: bool) -> Any:
    return model.model_dump(mode="json", exclude_none=drop_none, by_alias=True)


# ---------------------------------------------------------------- Anthropic

web_result = st.builds(at.WebSearchResultBlock, type=st.just("web_search_result"), url=URLS, title=TEXT,
                       encrypted_content=IDS, page_age=st.none() | TEXT)
ERROR_CODES = _literal(at.WebSearchToolResultErrorObject, "error_code")
search_error = st.builds(at.WebSearchToolResultErrorObject, type=st.just("web_search_tool_result_error"),
                         error_code=st.sampled_from(ERROR_CODES))
web_citation = st.builds(at.CitationsWebSearchResultLocation, type=st.just("web_search_result_location"),
                         url=URLS, title=st.none() | TEXT, encrypted_index=IDS, cited_text=TEXT)


@st.composite
def char_citation(draw: st.DrawFn) -> at.CitationCharLocation:
    start, end = sorted(draw(st.lists(st.integers(0, 500), min_size=2, max_size=2)))
    return at.CitationCharLocation(type="char_location", cited_text=draw(TEXT),
                                   document_index=draw(st.integers(0, 5)), start_char_index=start,
                                   end_char_index=end, document_title=draw(st.none() | TEXT))


caller = st.none() | st.just(stu.DirectCaller(type="direct")) | st.builds(
    stu.ServerToolCaller, type=st.just("code_execution_20250825"), tool_id=IDS)


@st.composite
def search_pair(draw: st.DrawFn) -> list[BaseModel]:
    ident = "srvtoolu_" + draw(IDS)
    call = at.ServerToolUseBlock(type="server_tool_use", id=ident, name="web_search",
                                 input={"query": draw(TEXT)}, caller=draw(caller))
    content = draw(st.lists(web_result, max_size=4) | search_error)
    result = at.WebSearchToolResultBlock(type="web_search_tool_result", tool_use_id=ident, content=content)
    return [call, result]


text_block = st.builds(at.TextBlock, type=st.just("text"), text=TEXT,
                       citations=st.none() | st.lists(web_citation | char_citation(), max_size=3))
thinking = st.builds(at.ThinkingBlock, type=st.just("thinking"), thinking=TEXT, signature=IDS)
usage = st.builds(at.Usage, input_tokens=COUNTS, output_tokens=COUNTS,
                  cache_read_input_tokens=st.none() | COUNTS, cache_creation_input_tokens=st.none() | COUNTS,
                  server_tool_use=st.none() | st.builds(at.ServerToolUsage, web_search_requests=COUNTS,
                                                        web_fetch_requests=COUNTS),
                  service_tier=st.none() | st.sampled_from(["standard", "priority", "batch"]))


@st.composite
def anthropic_message(draw: st.DrawFn) -> at.Message:
    content: list[Any] = [draw(thinking)] if draw(st.booleans()) else []
    for pair in draw(st.lists(search_pair(), max_size=3)):
        content += pair
    content += draw(st.lists(text_block, max_size=3))
    return at.Message(id="msg_" + draw(IDS), type="message", role="assistant", model="claude-sonnet-4-5",
                      content=content, stop_reason=draw(st.sampled_from(_literal(at.Message, "stop_reason"))),
                      stop_sequence=None, usage=draw(usage))


@settings(max_examples=100, deadline=None)
@given(anthropic_message(), st.booleans())
def test_sdk_built_anthropic_messages_meet_the_response_contract(message: at.Message,
                                                                  drop_none: bool) -> None:
    assert contracts.validate("anthropic.response", _dump(message, drop_none)) == []


@settings(max_examples=60, deadline=None)
@given(anthropic_message(), st.booleans())
def test_sdk_built_anthropic_stream_events_meet_the_event_contract(message: at.Message,
                                                                   drop_none: bool) -> None:
    events: list[BaseModel] = [at.RawMessageStartEvent(type="message_start", message=message)]
    for index, block in enumerate(message.content):
        events.append(at.RawContentBlockStartEvent(type="content_block_start", index=index,
                                                   content_block=block))
        events.append(at.RawContentBlockStopEvent(type="content_block_stop", index=index))
    events.append(at.RawMessageStopEvent(type="message_stop"))
    for event in events:
        assert contracts.validate("anthropic.stream_event", _dump(event, drop_none)) == []


def test_an_sdk_built_block_with_a_defect_is_caught() -> None:
    result = at.WebSearchResultBlock(type="web_search_result", url="javascript:alert(1)", title="t",
                                     encrypted_content="e")
    block = at.WebSearchToolResultBlock(type="web_search_tool_result", tool_use_id="srvtoolu_1",
                                        content=[result])
    found = contracts.validate("anthropic.content_block", _dump(block, True))
    assert [v.pointer for v in found] == ["/content/0/url"]


# ---------------------------------------------------------------- OpenAI


@st.composite
def url_citation(draw: st.DrawFn, text: str) -> otext.AnnotationURLCitation:
    start, end = sorted(draw(st.lists(st.integers(0, len(text)), min_size=2, max_size=2)))
    return otext.AnnotationURLCitation(type="url_citation", start_index=start, end_index=end,
                                       title=draw(TEXT), url=draw(URLS))


ITEM_STATUS = _literal(ot.ResponseOutputMessage, "status")


@st.composite
def output_message(draw: st.DrawFn) -> ot.ResponseOutputMessage:
    text = draw(TEXT)
    part = ot.ResponseOutputText(type="output_text", text=text, annotations=draw(st.lists(url_citation(text),
                                                                                          max_size=3)))
    return ot.ResponseOutputMessage(id="msg_" + draw(IDS), type="message", role="assistant", content=[part],
                                    status=draw(st.sampled_from(ITEM_STATUS)))


action = st.one_of(
    st.builds(ws.ActionSearch, type=st.just("search"), query=st.none() | TEXT,
              queries=st.none() | st.lists(TEXT),
              sources=st.none() | st.lists(st.builds(ws.ActionSearchSource, type=st.just("url"), url=URLS))),
    st.builds(ws.ActionOpenPage, type=st.just("open_page"), url=st.none() | URLS),
    st.builds(ws.ActionFind, type=st.just("find_in_page"), pattern=TEXT, url=URLS),
)
search_call = st.builds(ot.ResponseFunctionWebSearch, type=st.just("web_search_call"),
                        id=IDS.map(lambda s: "ws_" + s), action=action,
                        status=st.sampled_from(_literal(ot.ResponseFunctionWebSearch, "status")))
function_call = st.builds(ot.ResponseFunctionToolCall, type=st.just("function_call"), call_id=IDS, name=IDS,
                          arguments=st.just("{}"), id=st.none() | IDS)
reasoning = st.builds(ot.ResponseReasoningItem, type=st.just("reasoning"), id=IDS.map(lambda s: "rs_" + s),
                      summary=st.just([]), encrypted_content=st.none() | IDS)


@st.composite
def openai_usage(draw: st.DrawFn) -> ot.ResponseUsage:
    given_, made = draw(COUNTS), draw(COUNTS)
    return ot.ResponseUsage.model_validate({
        "input_tokens": given_, "output_tokens": made, "total_tokens": given_ + made,
        "input_tokens_details": {"cached_tokens": draw(COUNTS), "cache_write_tokens": draw(COUNTS)},
        "output_tokens_details": {"reasoning_tokens": draw(COUNTS)}})


@st.composite
def openai_response(draw: st.DrawFn) -> ot.Response:
    output = draw(st.lists(output_message() | search_call | function_call | reasoning, max_size=5))
    return ot.Response.model_construct(
        id="resp_" + draw(IDS), object="response", created_at=1764662400, model="gpt-5", output=output,
        status="completed", error=None, incomplete_details=None, usage=draw(openai_usage()),
        parallel_tool_calls=True, tool_choice="auto", tools=[])


@settings(max_examples=100, deadline=None)
@given(openai_response(), st.booleans())
def test_sdk_built_openai_responses_meet_the_response_contract(response: ot.Response,
                                                                drop_none: bool) -> None:
    assert contracts.validate("openai.response", _dump(response, drop_none)) == []


@settings(max_examples=60, deadline=None)
@given(openai_response(), st.booleans())
def test_sdk_built_openai_stream_events_meet_the_event_contract(response: ot.Response,
                                                                 drop_none: bool) -> None:
    started = response.model_copy(update={"status": "in_progress"})
    events: list[BaseModel] = [ot.ResponseCreatedEvent(type="response.created", sequence_number=0,
                                                       response=started)]
    for index, item in enumerate(response.output):
        done = ot.ResponseOutputItemDoneEvent(type="response.output_item.done", sequence_number=index + 1,
                                              output_index=index, item=item)
        events.append(done)
    events.append(ot.ResponseCompletedEvent(type="response.completed", sequence_number=len(events),
                                            response=response))
    for event in events:
        assert contracts.validate("openai.stream_event", _dump(event, drop_none)) == []


def test_an_sdk_built_citation_with_a_defect_is_caught() -> None:
    citation = otext.AnnotationURLCitation(type="url_citation", start_index=9, end_index=2, title="t",
                                           url="https://example.com")
    text = ot.ResponseOutputText(type="output_text", text="0123456789", annotations=[citation])
    item = ot.ResponseOutputMessage(id="msg_1", type="message", role="assistant", content=[text],
                                    status="completed")
    found = contracts.validate("openai.output_item", _dump(item, True))
    assert [(v.pointer, v.keyword) for v in found] == [("/content/0/annotations/0/end_index", "x-rules")]
