// GLUE: the outcome's `error` (contracts/replaykit/target-outcome.schema.json) from what the AI SDK threw,
// classified by the library's own error classes (APICallError, RetryError, StreamProviderError,
// InvalidPromptError...) and their fields (statusCode, isRetryable, responseHeaders); and atomic writes.

import { randomBytes } from "node:crypto";
import { renameSync, writeFileSync } from "node:fs";
import { APICallError, InvalidArgumentError, InvalidPromptError, RetryError, StreamProviderError } from "ai";
import { LocalError } from "./transcript.mjs";

export function writeAtomic(file, value) {
  const temp = `${file}.${randomBytes(6).toString("hex")}.tmp`;
  writeFileSync(temp, JSON.stringify(value, null, 1));
  renameSync(temp, file);
}

const error = (code, provenance, retryable, message, extra = {}) =>
  ({ code, provenance, retryable, message: String(message).slice(0, 500), ...extra });

function header(headers, name) {
  return headers?.[name] ?? headers?.[name.toLowerCase()];
}

function providerError(caught) {
  const data = caught.data ?? {};
  const extra = { status: caught.statusCode };
  const type = data.error?.type ?? data.error?.code ?? data.type;
  if (typeof type === "string") extra.providerType = type;
  const requestId = header(caught.responseHeaders, "request-id") ?? header(caught.responseHeaders, "x-request-id")
    ?? data.request_id;
  if (typeof requestId === "string") extra.requestId = requestId;
  return error("PROVIDER_ERROR", "provider", Boolean(caught.isRetryable), caught.message, extra);
}

const TRANSPORT = new Set(["ECONNRESET", "ECONNREFUSED", "EPIPE", "UND_ERR_SOCKET", "UND_ERR_CLOSED"]);

function isTransport(caught) {
  for (let cause = caught; cause; cause = cause.cause) {
    if (TRANSPORT.has(cause.code) || cause.message === "terminated" || cause.message === "fetch failed") return true;
  }
  return false;
}

/** The outcome's error for what the library threw (`cancelled`: the run's abort signal fired). */
export function classify(caught, cancelled) {
  if (cancelled) return error("CANCELLED", "cancelled", false, "cancelled (cancelAfterMs or SIGINT)");
  if (caught instanceof LocalError) {
    return { ...error("LOCAL_REQUEST_ERROR", "local", false, caught.message), phase: caught.phase };
  }
  if (RetryError.isInstance(caught)) {
    return { ...classify(caught.lastError, false), retryable: false }; // the library's retries are used up
  }
  if (InvalidPromptError.isInstance(caught)) {
    return { ...error("LOCAL_REQUEST_ERROR", "local", false, caught.message), phase: "validation" };
  }
  if (InvalidArgumentError.isInstance(caught)) {
    return { ...error("LOCAL_REQUEST_ERROR", "local", false, caught.message), phase: "preparation" };
  }
  if (APICallError.isInstance(caught) && isTransport(caught)) { // a cut stream: statusCode 200 and a socket cause
    return error("TRANSPORT_ERROR", "transport", Boolean(caught.isRetryable), caught.message);
  }
  if (APICallError.isInstance(caught) && caught.statusCode !== undefined) return providerError(caught);
  if (StreamProviderError.isInstance(caught)) {
    const extra = { status: caught.statusCode ?? 200, ...(caught.type ? { providerType: String(caught.type) } : {}) };
    return error("PROVIDER_ERROR", "provider", caught.isRetryable, caught.message, extra);
  }
  if (caught?.name === "TimeoutError") return error("DEADLINE_EXCEEDED", "deadline", true, caught.message);
  if (APICallError.isInstance(caught) || isTransport(caught)) {
    return error("TRANSPORT_ERROR", "transport", true, caught.message);
  }
  return error("INTERNAL_ERROR", "local", false, `${caught?.constructor?.name ?? "Error"}: ${caught?.message ?? caught}`);
}
