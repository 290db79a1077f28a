// GLUE: the neutral transcript (contracts/replaykit/transcript.schema.json) to the AI SDK's ModelMessage list
// and back. The library has no notion of the neutral transcript; everything here is a change of shape, and
// every decision about what goes on the wire (encoding, replay of search blocks, another provider's blocks)
// is left to the library's providers.
//
// In:  user -> UserModelMessage; toolResult -> ToolModelMessage; assistant -> AssistantModelMessage whose
//      hostedSearch blocks become the library's provider-executed `tool-call` / `tool-result` parts (the shape
//      its own providers give back), built from the block's `raw` wire block. A hostedSearch block without
//      `raw` is display-only (the protocol's rule: shown, never sent) and has no part.
// Out: the library's response messages -> neutral messages, with `raw` rebuilt from the library's parts; the
//      citations of a Gemini or Chat Completions answer, which the library keeps out of its messages, from
//      the step's own output (Gemini: its `providerMetadata.google.groundingMetadata`; Chat Completions: its
//      `sources`).

export class LocalError extends Error {
  constructor(phase, message) {
    super(message);
    this.phase = phase;
  }
}

const invalid = (pointer, message) => new LocalError("validation", `${pointer}: ${message}`);
const isObject = (value) => value !== null && typeof value === "object" && !Array.isArray(value);

function blocks(message, pointer) {
  if (typeof message.content === "string") return [{ type: "text", text: message.content }];
  if (!Array.isArray(message.content)) throw invalid(`${pointer}/content`, "content must be a string or a list of blocks");
  message.content.forEach((block, index) => {
    if (!isObject(block) || typeof block.type !== "string") {
      throw invalid(`${pointer}/content/${index}`, "a block must be an object with a string type");
    }
  });
  return message.content;
}

// ------------------------------------------------------------------ neutral -> ModelMessage

function userPart(block, pointer) {
  if (block.type === "text") return { type: "text", text: String(block.text ?? "") };
  if (block.type === "image") return { type: "image", image: String(block.data), mediaType: String(block.mimeType) };
  throw invalid(pointer, `a user block cannot be ${block.type}`);
}

const SEARCH_RESULT = (result) => ({ url: result.url, title: result.title ?? null, pageAge: result.page_age ?? null,
                                     encryptedContent: result.encrypted_content, type: result.type });

// The caller of a server tool (direct, or code execution running it) as the library keeps it.
const callerOptions = (caller) => (caller ? { providerOptions: { anthropic: { caller: caller.tool_id
  ? { type: caller.type, toolId: caller.tool_id } : { type: caller.type } } } } : {});

function codeResult(content) {
  if (content?.type === "code_execution_tool_result_error") {
    return { type: "error-json", value: { type: content.type, errorCode: content.error_code } };
  }
  return { type: "json", value: { ...content, content: content?.content ?? [] } };
}

/** The library's parts for a raw wire block of a hostedSearch or providerBlock (as its providers produce
 * them), or null when the library has no part for it. */
function rawParts(raw, key) {
  if (raw.type === "server_tool_use" && ["web_search", "code_execution"].includes(raw.name)) {
    const input = raw.name === "code_execution" && !("type" in (raw.input ?? {}))
      ? { type: "programmatic-tool-call", ...raw.input } : raw.input ?? {};
    return [{ type: "tool-call", toolCallId: raw.id, toolName: raw.name, input, providerExecuted: true,
              ...callerOptions(raw.caller) }];
  }
  if (raw.type === "web_search_tool_result") {
    const output = Array.isArray(raw.content) ? { type: "json", value: raw.content.map(SEARCH_RESULT) }
      : { type: "error-json", value: { type: "web_search_tool_result_error", errorCode: raw.content?.error_code } };
    return [{ type: "tool-result", toolCallId: raw.tool_use_id, toolName: "web_search", output, ...callerOptions(raw.caller) }];
  }
  if (raw.type === "code_execution_tool_result") {
    return [{ type: "tool-result", toolCallId: raw.tool_use_id, toolName: "code_execution", output: codeResult(raw.content) }];
  }
  if (raw.type === "web_search_call") { // OpenAI / Azure Responses: one item is both the call and its result
    const { sources, ...action } = raw.action ?? {};
    const options = { [key]: { itemId: raw.id } };
    return [
      { type: "tool-call", toolCallId: raw.id, toolName: "web_search", input: "{}", providerExecuted: true, providerOptions: options },
      { type: "tool-result", toolCallId: raw.id, toolName: "web_search", providerOptions: options,
        output: { type: "json", value: { action: action.type === "search" ? { type: "search", query: action.query } : action,
                                         ...(sources ? { sources } : {}) } } },
    ];
  }
  return null;
}

// The library keys a part's metadata by its provider's name: anthropic, openai, azure or google.
const KEYS = { gemini: "google" };
const keyName = (provider) => KEYS[provider] ?? provider;
const keyOf = (block, message) => keyName(block.provider ?? message.provider ?? "anthropic");

function textMeta(block, key, citations) {
  if (key === "anthropic") return citations ? { citations } : null;
  if (key === "google") return block.signature ? { thoughtSignature: block.signature } : null;
  return block.signature ? { itemId: block.signature, ...(citations ? { annotations: citations } : {}) } : null;
}

function textPart(block, key) {
  const citations = Array.isArray(block.citations) && block.citations.length ? block.citations : null;
  const meta = textMeta(block, key, citations);
  return { type: "text", text: String(block.text ?? ""), ...(meta ? { providerOptions: { [key]: meta } } : {}) };
}

function reasoningPart(block, key) {
  let meta = null;
  if (isObject(block.raw) && block.raw.type === "reasoning") {
    meta = { itemId: block.raw.id, reasoningEncryptedContent: block.raw.encrypted_content ?? null };
  } else if (block.signature) {
    meta = key === "google" ? { thoughtSignature: block.signature }
      : block.redacted ? { redactedData: block.signature } : { signature: block.signature };
  }
  return { type: "reasoning", text: String(block.thinking ?? ""), ...(meta ? { providerOptions: { [key]: meta } } : {}) };
}

function assistantParts(message, pointer) {
  const parts = [];
  blocks(message, pointer).forEach((block, index) => {
    const at = `${pointer}/content/${index}`;
    if (block.type === "text") {
      parts.push(textPart(block, keyOf(block, message)));
    } else if (block.type === "thinking") {
      parts.push(reasoningPart(block, keyOf(block, message)));
    } else if (block.type === "toolCall") {
      parts.push({ type: "tool-call", toolCallId: String(block.id), toolName: String(block.name),
                   input: isObject(block.arguments) ? block.arguments : {} });
    } else if (block.type === "hostedSearch" || block.type === "providerBlock") {
      if (block.type === "providerBlock" && !isObject(block.raw)) {
        throw invalid(`${at}/raw`, "a providerBlock must keep its wire block in raw");
      }
      if (!isObject(block.raw)) return; // display-only: shown, never sent
      const converted = rawParts(block.raw, keyOf(block, message));
      // a block the library's ModelMessage has no part for cannot be carried
      if (!converted) process.stderr.write(`ai-sdk target: ${at}: a ${block.raw.type} block has no AI SDK part; not sent\n`);
      parts.push(...(converted ?? []));
    } else {
      throw invalid(`${at}/type`, `unknown assistant block type ${block.type}`);
    }
  });
  return parts;
}

function toolOutput(message, pointer) {
  const text = blocks(message, pointer).map((block) => String(block.text ?? "")).join("");
  return { type: message.isError ? "error-text" : "text", value: text };
}

/** The ModelMessage list of a neutral transcript; a transcript that does not convert is a validation error. */
export function toModelMessages(transcript) {
  if (!isObject(transcript)) throw invalid("", "a transcript must be an object");
  if (!Array.isArray(transcript.messages)) throw invalid("/messages", "messages must be a list of messages");
  const out = [];
  transcript.messages.forEach((message, index) => {
    const pointer = `/messages/${index}`;
    if (!isObject(message)) throw invalid(pointer, "a message must be an object");
    if (message.role === "user") {
      out.push({ role: "user", content: typeof message.content === "string" ? message.content
        : blocks(message, pointer).map((block, n) => userPart(block, `${pointer}/content/${n}`)) });
    } else if (message.role === "toolResult") {
      out.push({ role: "tool", content: [{ type: "tool-result", toolCallId: String(message.toolCallId),
                                           toolName: String(message.toolName), output: toolOutput(message, pointer) }] });
    } else if (message.role === "assistant") {
      const content = assistantParts(message, pointer);
      if (content.length) out.push({ role: "assistant", content });
    } else {
      throw invalid(`${pointer}/role`, "role must be user, assistant or toolResult");
    }
  });
  return out;
}

// ------------------------------------------------------------------ ModelMessage -> neutral

const API = { anthropic: "anthropic-messages", openai: "openai-responses", azure: "openai-responses",
              gemini: "gemini-generate" };

function wireResult(result) {
  return { type: result.type ?? "web_search_result", url: result.url, title: result.title ?? null,
           encrypted_content: result.encryptedContent, page_age: result.pageAge ?? null };
}

function wireCaller(part) {
  const caller = part.providerOptions?.anthropic?.caller;
  if (!caller) return {};
  return { caller: caller.toolId ? { type: caller.type, tool_id: caller.toolId } : { type: caller.type } };
}

function serverCall(part, provider) {
  if (provider !== "anthropic") return null; // the Responses item is rebuilt with its result (one item holds both)
  if (part.toolName === "code_execution") {
    const { type, ...input } = isObject(part.input) ? part.input : {};
    const raw = { type: "server_tool_use", id: part.toolCallId, name: "code_execution",
                  input: type === "programmatic-tool-call" ? input : part.input, ...wireCaller(part) };
    return { type: "providerBlock", blockType: raw.type, raw };
  }
  const raw = { type: "server_tool_use", id: part.toolCallId, name: "web_search", input: part.input, ...wireCaller(part) };
  const query = isObject(part.input) && typeof part.input.query === "string" ? { query: part.input.query } : {};
  return { type: "hostedSearch", phase: "call", id: part.toolCallId, ...query, raw };
}

function codeExecutionResult(part, provider) {
  const value = part.output?.value ?? {};
  const content = part.output?.type === "error-json" ? { type: value.type, error_code: value.errorCode } : value;
  const raw = { type: "code_execution_tool_result", tool_use_id: part.toolCallId, content };
  return { type: "providerBlock", provider, api: API[provider], blockType: raw.type, raw };
}

function searchResult(part, provider) {
  if (part.toolName === "code_execution") return codeExecutionResult(part, provider);
  const base = { type: "hostedSearch", provider, api: API[provider] };
  const value = part.output?.value;
  if (provider !== "anthropic") {
    const action = value?.action ?? {};
    const raw = { type: "web_search_call", id: part.toolCallId, status: "completed",
                  action: { ...action, ...(value?.sources ? { sources: value.sources } : {}) } };
    return { ...base, phase: "call", id: part.toolCallId, ...(action.query ? { query: action.query } : {}), raw };
  }
  if (part.output?.type === "error-json" || part.output?.type === "error-text") {
    const errorCode = value?.errorCode ?? "unavailable";
    return { ...base, phase: "error", toolUseId: part.toolCallId, errorCode,
             raw: { type: "web_search_tool_result", tool_use_id: part.toolCallId,
                    content: { type: "web_search_tool_result_error", error_code: errorCode }, ...wireCaller(part) } };
  }
  const results = Array.isArray(value) ? value : [];
  return { ...base, phase: "result", toolUseId: part.toolCallId,
           results: results.map((r) => ({ url: r.url, title: r.title ?? null, pageAge: r.pageAge ?? null })),
           raw: { type: "web_search_tool_result", tool_use_id: part.toolCallId, content: results.map(wireResult),
                  ...wireCaller(part) } };
}

function neutralText(part, provider, extra) {
  const meta = part.providerOptions?.[keyName(provider)] ?? {};
  const citations = extra ?? (provider === "anthropic" ? meta.citations : meta.annotations);
  const signature = meta.itemId ?? meta.thoughtSignature;
  return { type: "text", text: part.text, ...(Array.isArray(citations) && citations.length ? { citations } : {}),
           ...(signature ? { signature } : {}) };
}

// GLUE: the library keeps a Gemini answer's grounding out of its messages; the step reports it, verbatim,
// in providerMetadata.google.groundingMetadata. The transcript's form of it: a hostedSearch call per query,
// one result holding the metadata, and the supports as the citations of the answer's text.
function grounding(step) {
  const metadata = step.providerMetadata?.google?.groundingMetadata;
  if (!isObject(metadata)) return { blocks: [], supports: null };
  const base = { type: "hostedSearch", provider: "gemini", api: "gemini-generate" };
  const prefix = step.response.id ?? "grounding";
  const queries = (metadata.webSearchQueries ?? []).filter((query) => typeof query === "string");
  const web = (metadata.groundingChunks ?? []).filter((chunk) => isObject(chunk?.web));
  const blocks = [
    ...queries.map((query, index) => ({ ...base, phase: "call", id: `${prefix}:q${index}`, query })),
    { ...base, phase: "result", toolUseId: `${prefix}:q0`, raw: metadata,
      results: web.map((chunk) => ({ url: chunk.web.uri, title: chunk.web.title ?? null })) },
  ];
  return { blocks, supports: Array.isArray(metadata.groundingSupports) ? metadata.groundingSupports : null };
}

// GLUE: the library turns a Chat Completions answer's url_citation annotations into the step's `sources`
// (url and title; it drops the offsets) and keeps them out of its messages: the transcript's citations are
// rebuilt from those.
const chatCitations = (step) => (step.sources ?? []).filter((source) => source.sourceType === "url")
  .map((source) => ({ type: "url_citation", url_citation: { url: source.url, title: source.title ?? null } }));

/** The citations the step's first text part gets beyond its own metadata, and the blocks before it. */
function stepExtras(step, api) {
  if (api === "gemini-generate") return grounding(step);
  if (api === "openai-chat") return { blocks: [], supports: chatCitations(step) };
  return { blocks: [], supports: null };
}

function neutralReasoning(part, provider) {
  const meta = part.providerOptions?.[provider] ?? {};
  if (meta.itemId) {
    const summary = part.text ? [{ type: "summary_text", text: part.text }] : [];
    return { type: "thinking", thinking: part.text,
             raw: { type: "reasoning", id: meta.itemId, encrypted_content: meta.reasoningEncryptedContent ?? null, summary } };
  }
  const signature = meta.signature ?? meta.thoughtSignature;
  return { type: "thinking", thinking: part.text, ...(signature ? { signature } : {}),
           ...(meta.redactedData ? { signature: meta.redactedData, redacted: true } : {}) };
}

function neutralBlock(part, provider, api, citations) {
  const same = { provider, api };
  if (part.type === "text") return neutralText(part, provider, citations);
  if (part.type === "reasoning") return neutralReasoning(part, keyName(provider));
  if (part.type === "custom") return null; // the library's own bookkeeping (message_start): nothing to keep
  if (part.type === "tool-call" && part.providerExecuted) {
    const call = serverCall(part, provider);
    return call && { ...call, ...same };
  }
  if (part.type === "tool-call") {
    return { type: "toolCall", id: part.toolCallId, name: part.toolName, arguments: isObject(part.input) ? part.input : {} };
  }
  if (part.type === "tool-result") return searchResult(part, provider);
  process.stderr.write(`ai-sdk target: a ${part.type} part has no neutral block; not kept\n`);
  return null;
}

const STOP = { stop: "stop", length: "length", "tool-calls": "toolUse", error: "error" };

/** Neutral usage from the library's LanguageModelUsage. */
export function neutralUsage(usage) {
  const details = usage?.inputTokenDetails ?? {};
  const cacheRead = details.cacheReadTokens ?? 0;
  const cacheWrite = details.cacheWriteTokens ?? 0;
  const input = details.noCacheTokens ?? Math.max((usage?.inputTokens ?? 0) - cacheRead - cacheWrite, 0);
  const output = usage?.outputTokens ?? 0;
  return { input, output, cacheRead, cacheWrite, totalTokens: usage?.totalTokens ?? input + output + cacheRead + cacheWrite };
}

/** The neutral messages of one library step: its assistant message, then one toolResult per tool result. */
export function neutralMessages(step, { provider, api, model }) {
  const out = [];
  const now = Date.now();
  const extras = stepExtras(step, api);
  for (const message of step.response.messages) {
    if (message.role === "assistant") {
      const parts = typeof message.content === "string" ? [{ type: "text", text: message.content }] : message.content;
      const first = parts.findIndex((part) => part.type === "text");
      const content = [...extras.blocks, ...parts.map((part, index) =>
        neutralBlock(part, provider, api, index === first ? extras.supports : undefined)).filter(Boolean)];
      out.push({ role: "assistant", content, provider, api, model: step.response.modelId ?? model,
                 usage: neutralUsage(step.usage), stopReason: STOP[step.finishReason] ?? "stop",
                 responseId: step.response.id, timestamp: now });
    } else if (message.role === "tool") {
      for (const part of message.content) {
        if (part.type !== "tool-result") continue;
        const isError = part.output.type === "error-text" || part.output.type === "error-json";
        const text = typeof part.output.value === "string" ? part.output.value : JSON.stringify(part.output.value);
        out.push({ role: "toolResult", toolCallId: part.toolCallId, toolName: part.toolName,
                   content: [{ type: "text", text }], isError, timestamp: now });
      }
    }
  }
  return out;
}
