/**
 * Client for the loopwatch service (`loopwatch serve`): send each event of an agent's run, get a verdict back
 * (`ok`, `nudge`, `block` or `stop`). Uses the global `fetch` of Node 18+ (and browsers, Deno, Bun).
 *
 *     const lw = new LoopwatchClient({ url: "http://127.0.0.1:7350", token: process.env.LOOPWATCH_TOKEN });
 *     const verdict = await lw.observe("run-1", { type: "tool_call", tool: "bash", args: { command: "ls" } });
 *     if (verdict.action === "block") { ... return verdict.message to the model instead of running the tool ... }
 */

export type Role = "assistant" | "user" | "system";

interface EventBase {
  /** Seconds since the epoch. */
  ts?: number;
  /** The agent or sub-agent that produced the event (swarm counts, the dashboard's worker column). */
  worker?: string;
}

export interface ToolCallEvent extends EventBase {
  type: "tool_call";
  tool: string;
  args?: Record<string, unknown>;
  id?: string;
  thought?: string;
}

export interface ToolResultEvent extends EventBase {
  type: "tool_result";
  output?: string;
  tool?: string;
  is_error?: boolean;
  exit_code?: number;
  id?: string;
}

export interface MessageEvent extends EventBase {
  type: "message";
  role: Role;
  text: string;
}

export interface TextDeltaEvent extends EventBase {
  type: "text_delta";
  text: string;
}

export interface UsageEvent extends EventBase {
  type: "usage";
  cost?: number;
  input_tokens?: number;
  output_tokens?: number;
}

export interface ResetEvent extends EventBase {
  type: "reset";
}

export type LoopwatchEvent = ToolCallEvent | ToolResultEvent | MessageEvent | TextDeltaEvent | UsageEvent | ResetEvent;

export type Action = "ok" | "nudge" | "block" | "stop";

export interface Verdict {
  action: Action;
  /** The event's index in the session; -1 when it was not recorded (see `recorded`). */
  index: number;
  /** False when the service could not count the event (its store was down, or it could not be reached). */
  recorded: boolean;
  level: number;
  pattern: string | null;
  count: number;
  loop_start: number | null;
  status: string | null;
  /** For a nudge: what to show the model on its next turn; for a block: the tool result to return instead. */
  message: string;
  reason: string;
  detector: string | null;
  evidence?: Record<string, unknown>;
}

export interface SessionSummary {
  session: string;
  swarm: string | null;
  events: number;
  stopped: boolean;
  stop: Record<string, unknown> | null;
  streaks: Record<string, number>;
  last: { index: number; action: Action; pattern: string; level: number } | null;
  spend: { cost: number; tokens: number; iterations: number; failures: number };
}

export interface Snapshot {
  session: string;
  swarm: string | null;
  state: Record<string, unknown>;
}

export interface SwarmCounts {
  swarm: string;
  counts: Record<string, [number, string[], string]>;
}

/** What happens when the service cannot be reached or fails: `open` answers `ok` (the agent goes on), `closed`
 * answers `block` for tool calls (and `ok` for other events), `throw` throws a {@link LoopwatchError}. */
export type FailMode = "open" | "closed" | "throw";

export interface ClientOptions {
  /** The service's base URL, e.g. `http://127.0.0.1:7350`. */
  url: string;
  /** A bearer token from the service's token file or `LOOPWATCH_TOKENS`. */
  token?: string;
  /** Milliseconds per request (default 5000). */
  timeoutMs?: number;
  /** Default `open`. Errors in your request (a bad event, a wrong token) are thrown whatever the mode. */
  failMode?: FailMode;
  /** The agent's name and model: the dashboard's loop rates and the OpenTelemetry attributes use them. */
  agent?: string;
  model?: string;
  /** A `fetch` to use instead of the global one. */
  fetch?: typeof fetch;
}

export interface ObserveOptions {
  swarm?: string;
  agent?: string;
  model?: string;
}

/** An error answered by the service (`status`, `code`: see the service's OpenAPI document) or met reaching it
 * (`status` 0, `code` "unreachable"). */
export class LoopwatchError extends Error {
  readonly status: number;
  readonly code: string;
  readonly details: Record<string, unknown>;

  constructor(message: string, status: number, code: string, details: Record<string, unknown> = {}) {
    super(message);
    this.name = "LoopwatchError";
    this.status = status;
    this.code = code;
    this.details = details;
  }

  /** True when the service (not the request) is at fault: the fail mode applies. */
  get isOutage(): boolean {
    return this.status === 0 || this.status >= 500;
  }
}

function failedVerdict(event: LoopwatchEvent, error: LoopwatchError, mode: FailMode): Verdict {
  const block = mode === "closed" && event.type === "tool_call";
  const reason = `loopwatch service unavailable (${error.message}): ${block ? "calls are refused" : "failing open"}`;
  return {
    action: block ? "block" : "ok",
    index: -1,
    recorded: false,
    level: block ? 1 : 0,
    pattern: block ? "store_error" : null,
    count: 0,
    loop_start: null,
    status: null,
    message: block ? reason : "",
    reason,
    detector: null,
  };
}

export class LoopwatchClient {
  readonly url: string;
  readonly failMode: FailMode;
  private readonly token: string | undefined;
  private readonly timeoutMs: number;
  private readonly agent: string | undefined;
  private readonly model: string | undefined;
  private readonly fetchImpl: typeof fetch;

  constructor(options: ClientOptions) {
    if (!/^https?:\/\//.test(options.url)) throw new TypeError(`expected an http(s) URL, got ${options.url}`);
    this.url = options.url.replace(/\/+$/, "");
    this.token = options.token;
    this.timeoutMs = options.timeoutMs ?? 5000;
    this.failMode = options.failMode ?? "open";
    this.agent = options.agent;
    this.model = options.model;
    this.fetchImpl = options.fetch ?? globalThis.fetch;
  }

  /** One API call: the decoded JSON answer, or a {@link LoopwatchError}. */
  async request<T>(method: string, path: string, body?: unknown): Promise<T> {
    const headers: Record<string, string> = { Accept: "application/json" };
    if (this.token) headers.Authorization = `Bearer ${this.token}`;
    if (body !== undefined) headers["Content-Type"] = "application/json";
    let response: Response;
    try {
      response = await this.fetchImpl(this.url + path, {
        method,
        headers,
        body: body === undefined ? undefined : JSON.stringify(body),
        signal: AbortSignal.timeout(this.timeoutMs),
      });
    } catch (error) {
      throw new LoopwatchError(`${this.url}: ${(error as Error).message}`, 0, "unreachable");
    }
    const text = await response.text();
    let data: unknown = undefined;
    try {
      data = text ? JSON.parse(text) : undefined;
    } catch {
      throw new LoopwatchError(`${this.url}${path}: the answer is not JSON`, response.status || 502, "bad_answer");
    }
    if (!response.ok) {
      const error = ((data as { error?: Record<string, unknown> })?.error ?? {}) as Record<string, unknown>;
      const code = typeof error.code === "string" ? error.code : "http_" + response.status;
      const message = typeof error.message === "string" ? error.message : response.statusText;
      throw new LoopwatchError(`${response.status} ${code}: ${message}`, response.status, code, error);
    }
    return data as T;
  }

  private sessionPath(session: string, tail = ""): string {
    return `/v1/sessions/${encodeURIComponent(session)}${tail}`;
  }

  private labels(options: ObserveOptions): Record<string, string> {
    const out: Record<string, string> = {};
    const agent = options.agent ?? this.agent;
    const model = options.model ?? this.model;
    if (options.swarm) out.swarm = options.swarm;
    if (agent) out.agent = agent;
    if (model) out.model = model;
    return out;
  }

  /** Judge one event of `session`. A service outage follows the fail mode; a bad event throws. */
  async observe(session: string, event: LoopwatchEvent, options: ObserveOptions = {}): Promise<Verdict> {
    try {
      const answer = await this.request<{ verdict: Verdict }>("POST", this.sessionPath(session, "/events"), {
        event,
        ...this.labels(options),
      });
      return answer.verdict;
    } catch (error) {
      if (error instanceof LoopwatchError && error.isOutage && this.failMode !== "throw") {
        return failedVerdict(event, error, this.failMode);
      }
      throw error;
    }
  }

  /** Judge several events of `session` in order (all are checked before any is judged). */
  async observeBatch(session: string, events: LoopwatchEvent[], options: ObserveOptions = {}): Promise<Verdict[]> {
    try {
      const answer = await this.request<{ verdicts: Verdict[] }>("POST", this.sessionPath(session, "/events"), {
        events,
        ...this.labels(options),
      });
      return answer.verdicts;
    } catch (error) {
      if (error instanceof LoopwatchError && error.isOutage && this.failMode !== "throw") {
        return events.map((event) => failedVerdict(event, error, this.failMode));
      }
      throw error;
    }
  }

  /**
   * Run one tool call under the guard: the call is judged first (a `block` or `stop` returns its message instead of
   * running the tool), then the tool runs and its result is judged too. `nudge` holds a message to show the model
   * on its next turn, if any.
   */
  async runTool<T>(
    session: string,
    call: { tool: string; args?: Record<string, unknown>; id?: string },
    execute: () => Promise<T>,
    options: ObserveOptions & { describe?: (result: T) => { output: string; is_error?: boolean } } = {},
  ): Promise<{ ran: boolean; result?: T; output: string; verdict: Verdict; nudge?: string; stop: boolean }> {
    const before = await this.observe(session, { type: "tool_call", ...call }, options);
    if (before.action === "block" || before.action === "stop") {
      return { ran: false, output: before.message, verdict: before, stop: before.action === "stop" };
    }
    let result: T;
    let described: { output: string; is_error?: boolean };
    try {
      result = await execute();
      described = options.describe ? options.describe(result) : { output: typeof result === "string" ? result : JSON.stringify(result) };
    } catch (error) {
      const output = String((error as Error)?.message ?? error);
      const after = await this.observe(session, { type: "tool_result", tool: call.tool, id: call.id, output, is_error: true }, options);
      throw Object.assign(error as object, { loopwatch: after });
    }
    const after = await this.observe(
      session,
      { type: "tool_result", tool: call.tool, id: call.id, output: described.output, is_error: described.is_error },
      options,
    );
    const nudge = [before, after].find((v) => v.action === "nudge")?.message;
    return { ran: true, result, output: described.output, verdict: after, nudge, stop: after.action === "stop" };
  }

  session(session: string): Promise<SessionSummary> {
    return this.request("GET", this.sessionPath(session));
  }

  async reset(session: string, options: { limits?: boolean } = {}): Promise<void> {
    await this.request("POST", this.sessionPath(session, "/reset"), { limits: options.limits ?? false });
  }

  async forget(session: string): Promise<void> {
    await this.request("DELETE", this.sessionPath(session));
  }

  snapshot(session: string): Promise<Snapshot> {
    return this.request("GET", this.sessionPath(session, "/snapshot"));
  }

  async restore(snapshot: Snapshot, session?: string): Promise<void> {
    await this.request("PUT", this.sessionPath(session ?? snapshot.session, "/snapshot"), snapshot);
  }

  sessions(options: { limit?: number; offset?: number } = {}): Promise<{ total: number; sessions: string[] }> {
    const query = new URLSearchParams({ limit: String(options.limit ?? 1000), offset: String(options.offset ?? 0) });
    return this.request("GET", `/v1/sessions?${query}`);
  }

  swarms(): Promise<{ swarms: { swarm: string; sessions: number }[] }> {
    return this.request("GET", "/v1/swarms");
  }

  swarm(swarm: string): Promise<SwarmCounts> {
    return this.request("GET", `/v1/swarms/${encodeURIComponent(swarm)}`);
  }

  async clearSwarm(swarm: string): Promise<void> {
    await this.request("DELETE", `/v1/swarms/${encodeURIComponent(swarm)}`);
  }

  health(): Promise<{ status: string; version: string; store: boolean }> {
    return this.request("GET", "/v1/health");
  }
}
