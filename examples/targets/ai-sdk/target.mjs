// A replaykit target built on the Vercel AI SDK: `streamText` / `generateText` with the providers' models
// (@ai-sdk/anthropic: Messages; @ai-sdk/openai and @ai-sdk/azure: Responses, or Chat Completions for a step
// whose api is openai-chat; @ai-sdk/google: Gemini generateContent), the providers' own hosted web search
// tools (none on Chat Completions: the library has none there), the library's retries (`maxRetries`,
// `streamRetries`), its idle timeouts (`timeout.firstChunkMs` / `chunkMs`), its agent loop (`stopWhen`) and an
// AbortSignal for `cancelAfterMs` and SIGINT (the runner's `cancelOn`).
//
//   REPLAYKIT_INPUT         the input JSON (contracts/replaykit/target-input.schema.json)
//   REPLAYKIT_OUTCOME       where the outcome JSON goes (target-outcome.schema.json), written atomically
//   REPLAYKIT_STATE_DIR     the store: transcript.json, written atomically after each step
//   ANTHROPIC_BASE_URL, OPENAI_BASE_URL, REPLAYKIT_AZURE_BASE_URL, GOOGLE_GEMINI_BASE_URL   the providers
//                           (the fake provider)
//   REPLAYKIT_AI_SDK_STREAM "0": generateText (plain requests) instead of streamText
//   REPLAYKIT_AI_SDK_DEBUG  a file: each step's response messages (the library's ModelMessages) and the whole
//                           error the run stopped on are appended to it
//
// What is glue (the protocol asks it, the library has no notion of it) is marked GLUE; the rest is the
// library's own API used as its documentation shows.

import { appendFileSync, existsSync, readFileSync, realpathSync } from "node:fs";
import { inspect } from "node:util";
import path from "node:path";
import { createAnthropic } from "@ai-sdk/anthropic";
import { createAzure } from "@ai-sdk/azure";
import { createGoogle } from "@ai-sdk/google";
import { createOpenAI } from "@ai-sdk/openai";
import { generateText, jsonSchema, stepCountIs, streamText, tool } from "ai";
import { classify, writeAtomic } from "./outcome.mjs";
import { LocalError, neutralMessages, toModelMessages } from "./transcript.mjs";

const env = process.env;
const MAX_STEPS = 16; // model calls in one turn
const STREAM = env.REPLAYKIT_AI_SDK_STREAM !== "0";

// ------------------------------------------------------------------ the library's providers and tools

const PROVIDERS = {
  // GLUE (configuration): the AI SDK reads ANTHROPIC_BASE_URL itself but expects it to end in /v1, where the
  // Anthropic SDKs (and the protocol) give the origin; so the base URL is passed explicitly.
  anthropic: () => createAnthropic({ baseURL: `${env.ANTHROPIC_BASE_URL}/v1`, apiKey: env.ANTHROPIC_API_KEY }),
  openai: () => createOpenAI({ baseURL: env.OPENAI_BASE_URL, apiKey: env.OPENAI_API_KEY }),
  azure: () => createAzure({ baseURL: env.REPLAYKIT_AZURE_BASE_URL, apiKey: env.AZURE_OPENAI_API_KEY }),
  // GLUE (configuration): the protocol gives the origin, as google-genai takes it; the library's base URL
  // includes the API version (its default is https://generativelanguage.googleapis.com/v1beta).
  gemini: () => createGoogle({ baseURL: `${env.GOOGLE_GEMINI_BASE_URL}/v1beta`,
                               apiKey: env.GEMINI_API_KEY ?? env.GOOGLE_API_KEY }),
};

// The step's wire API: its `api`, else its provider's first (the protocol's default).
const DEFAULT_API = { anthropic: "anthropic-messages", openai: "openai-responses", azure: "openai-responses",
                      gemini: "gemini-generate" };
// provider/api: the library's model for it
const MODELS = {
  "anthropic/anthropic-messages": (provider, id) => provider(id),
  "openai/openai-responses": (provider, id) => provider.responses(id),
  "azure/openai-responses": (provider, id) => provider.responses(id),
  "openai/openai-chat": (provider, id) => provider.chat(id),
  "azure/openai-chat": (provider, id) => provider.chat(id),
  "gemini/gemini-generate": (provider, id) => provider(id),
};

function model(step) {
  const api = step.api ?? DEFAULT_API[step.provider];
  const make = MODELS[`${step.provider}/${api}`];
  if (!make) throw new LocalError("preparation", `provider ${step.provider} with api ${api} is not supported`);
  const provider = PROVIDERS[step.provider]();
  return { provider, api, model: make(provider, step.model) };
}

// The provider's hosted web search tool, or null: the library's Chat Completions model has no web search
// (neither a tool nor a `web_search_options` setting; a search model such as gpt-4o-search-preview searches
// by itself).
function hostedSearch(name, api, provider, spec) {
  if (api === "openai-chat") return null;
  if (name === "anthropic") {
    return provider.tools.webSearch_20250305({ maxUses: spec.maxUses, allowedDomains: spec.allowedDomains,
                                               blockedDomains: spec.blockedDomains });
  }
  if (name === "gemini") return provider.tools.googleSearch({});
  return provider.tools.webSearch(spec.allowedDomains ? { filters: { allowedDomains: spec.allowedDomains } } : {});
}

// GLUE (a local tool of the protocol): `read` reads a text file of the work folder, nothing outside it.
function readInside(file) {
  const root = realpathSync(process.cwd());
  const full = realpathSync(path.resolve(root, String(file)));
  if (full !== root && !full.startsWith(root + path.sep)) throw new Error(`${file} is outside the work folder`);
  return readFileSync(full, "utf8");
}

function tools(name, api, provider, specs) {
  const out = {};
  for (const spec of specs) {
    if (spec.type === "hostedSearch") {
      const search = hostedSearch(name, api, provider, spec);
      if (search) out.web_search = search;
    }
    else if (spec.name === "read") {
      out.read = tool({ description: spec.description, inputSchema: jsonSchema(spec.parameters),
                        execute: async (input) => readInside(input.path) });
    } else throw new LocalError("preparation", `tool ${spec.name}: this target has no such tool`);
  }
  return out;
}

// ------------------------------------------------------------------ one step: the library's agent loop

async function call(options) {
  if (!STREAM) return generateText(options);
  const result = streamText({ ...options, onError: () => {} }); // errors are read from the stream below
  let failure = null;
  for await (const part of result.fullStream) {
    if (part.type === "error") failure ??= part.error;
  }
  if (failure) throw failure;
  return { steps: await result.steps };
}

class Run {
  constructor(input) {
    this.input = input;
    this.store = path.join(env.REPLAYKIT_STATE_DIR ?? ".", "transcript.json");
    this.persistWrites = 0;
    this.transcript = null;
  }

  // GLUE: restore the input's transcript, else the store's, else a new one.
  restore() {
    let stored = this.input.transcript;
    if (stored === null && existsSync(this.store)) {
      try { stored = JSON.parse(readFileSync(this.store, "utf8")); } catch (error) {
        throw new LocalError("validation", `${this.store}: not JSON (${error.message})`);
      }
    }
    const transcript = structuredClone(stored ?? { version: 1, system: null, tools: [], messages: [] });
    toModelMessages(transcript); // a transcript that does not convert is refused before any request
    this.transcript = transcript;
    this.transcript.system = this.input.system ?? this.transcript.system ?? null;
    this.transcript.tools = this.input.tools;
  }

  async step(step, signal) {
    if (step.research) throw new LocalError("preparation", "research steps: this target has none");
    const { provider, api, model: languageModel } = model(step);
    const toolSet = tools(step.provider, api, provider, this.input.tools);
    this.transcript.messages.push({ role: "user", content: step.prompt, timestamp: Date.now() });
    const idle = this.input.idleTimeoutMs;
    const result = await call({
      model: languageModel, instructions: this.transcript.system ?? undefined,
      messages: toModelMessages(this.transcript), tools: toolSet, stopWhen: stepCountIs(MAX_STEPS),
      maxRetries: this.input.maxRetries, streamRetries: this.input.maxRetries, abortSignal: signal,
      ...(STREAM ? { timeout: { firstChunkMs: idle, chunkMs: idle } } : {}),
    });
    for (const done of result.steps) {
      if (env.REPLAYKIT_AI_SDK_DEBUG) appendFileSync(env.REPLAYKIT_AI_SDK_DEBUG, `${JSON.stringify(done.response.messages)}\n`);
      this.transcript.messages.push(...neutralMessages(done, { provider: step.provider, api, model: step.model }));
    }
    this.persist();
  }

  persist() { // GLUE: the protocol's store
    writeAtomic(this.store, this.transcript);
    this.persistWrites += 1;
  }

  outcome(status, error) {
    return { status, error, transcript: this.transcript, persistWrites: this.persistWrites };
  }
}

async function main() {
  const input = JSON.parse(readFileSync(env.REPLAYKIT_INPUT, "utf8"));
  const run = new Run(input);
  const controller = new AbortController();
  process.on("SIGINT", () => controller.abort()); // a user's Ctrl-C (the runner's cancelOn): the same abort
  let outcome;
  try {
    if (input.recovery) throw new LocalError("preparation", "recovery (durable turns): this target has none");
    run.restore();
    for (const step of input.steps) {
      // the library's cancellation: an AbortSignal fired cancelAfterMs after the step starts
      const timer = step.cancelAfterMs === undefined ? null : setTimeout(() => controller.abort(), step.cancelAfterMs);
      try {
        await run.step(step, controller.signal);
      } finally {
        if (timer) clearTimeout(timer);
      }
    }
    outcome = run.outcome("ok", null);
  } catch (caught) {
    const error = classify(caught, controller.signal.aborted);
    process.stderr.write(`ai-sdk target: ${error.code}: ${error.message}\n`);
    if (env.REPLAYKIT_AI_SDK_DEBUG) appendFileSync(env.REPLAYKIT_AI_SDK_DEBUG, `${input.scenario}: ${inspect(caught, { depth: 6 })}\n`);
    outcome = run.outcome(error.code === "CANCELLED" ? "aborted" : "error", error);
  }
  writeAtomic(env.REPLAYKIT_OUTCOME, outcome);
}

await main();
