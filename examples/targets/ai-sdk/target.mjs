// A replaykit target built on the Vercel AI SDK: `streamText` / `generateText` with the providers' models
// (@ai-sdk/anthropic: Messages; @ai-sdk/openai and @ai-sdk/azure: Responses), the providers' own hosted
// web search tools, the library's retries (`maxRetries`, `streamRetries`), its idle timeouts
// (`timeout.firstChunkMs` / `chunkMs`), its agent loop (`stopWhen`) and an AbortSignal for `cancelAfterMs`
// and SIGINT (the runner's `cancelOn`).
//
//   REPLAYKIT_INPUT         the input JSON (contracts/replaykit/target-input.schema.json)
//   REPLAYKIT_OUTCOME       where the outcome JSON goes (target-outcome.schema.json), written atomically
//   REPLAYKIT_STATE_DIR     the store: transcript.json, written atomically after each step
//   ANTHROPIC_BASE_URL, OPENAI_BASE_URL, REPLAYKIT_AZURE_BASE_URL   the providers (the fake provider)
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
};

function model(step) {
  const provider = PROVIDERS[step.provider]?.();
  if (!provider) throw new LocalError("preparation", `provider ${step.provider} is not supported`);
  return { provider, model: step.provider === "anthropic" ? provider(step.model) : provider.responses(step.model) };
}

function hostedSearch(name, provider, spec) {
  if (name === "anthropic") {
    return provider.tools.webSearch_20250305({ maxUses: spec.maxUses, allowedDomains: spec.allowedDomains,
                                               blockedDomains: spec.blockedDomains });
  }
  return provider.tools.webSearch(spec.allowedDomains ? { filters: { allowedDomains: spec.allowedDomains } } : {});
}

// GLUE (a local tool of the protocol): `read` reads a text file of the work folder, nothing outside it.
function readInside(file) {
  const root = realpathSync(process.cwd());
  const full = realpathSync(path.resolve(root, String(file)));
  if (full !== root && !full.startsWith(root + path.sep)) throw new Error(`${file} is outside the work folder`);
  return readFileSync(full, "utf8");
}

function tools(name, provider, specs) {
  const out = {};
  for (const spec of specs) {
    if (spec.type === "hostedSearch") out.web_search = hostedSearch(name, provider, spec);
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
    const { provider, model: languageModel } = model(step);
    const toolSet = tools(step.provider, provider, this.input.tools);
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
      this.transcript.messages.push(...neutralMessages(done, { provider: step.provider, model: step.model }));
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
