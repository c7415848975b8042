// The client against a real `loopwatch serve` process (Python from $LOOPWATCH_PYTHON, else the repository's
// .venv, else python3 on the PATH), with Node's own test runner: node --test test/
import { test, before, after } from "node:test";
import assert from "node:assert/strict";
import { spawn } from "node:child_process";
import { existsSync } from "node:fs";
import { createServer } from "node:net";
import { dirname, join, resolve } from "node:path";
import { fileURLToPath } from "node:url";

import { LoopwatchClient, LoopwatchError } from "../dist/index.js";

const here = dirname(fileURLToPath(import.meta.url));
const repo = resolve(here, "..", "..", "..");
const TOKEN = "node-token-0123456789abcdef";
let server;
let url;

function python() {
  if (process.env.LOOPWATCH_PYTHON) return process.env.LOOPWATCH_PYTHON;
  const venv = join(repo, ".venv", "bin", "python");
  return existsSync(venv) ? venv : "python3";
}

function freePort() {
  return new Promise((resolvePort, reject) => {
    const probe = createServer();
    probe.on("error", reject);
    probe.listen(0, "127.0.0.1", () => {
      const { port } = probe.address();
      probe.close(() => resolvePort(port));
    });
  });
}

async function waitForHealth(base) {
  const deadline = Date.now() + 60_000;
  let log = "";
  server.stderr.on("data", (chunk) => (log += chunk));
  for (;;) {
    if (server.exitCode !== null) throw new Error(`loopwatch serve exited with ${server.exitCode}: ${log}`);
    try {
      const response = await fetch(base + "/v1/health");
      if (response.ok) return;
    } catch {}
    if (Date.now() > deadline) throw new Error(`loopwatch serve did not answer: ${log}`);
    await new Promise((r) => setTimeout(r, 100));
  }
}

before(async () => {
  const port = await freePort();
  url = `http://127.0.0.1:${port}`;
  server = spawn(python(), ["-m", "loopwatch", "serve", "--port", String(port), "--max-batch", "20"], {
    env: { ...process.env, LOOPWATCH_TOKENS: `node=${TOKEN}` },
    stdio: ["ignore", "ignore", "pipe"],
  });
  await waitForHealth(url);
});

after(() => {
  server?.kill("SIGTERM");
});

const client = () => new LoopwatchClient({ url, token: TOKEN, agent: "node-agent", model: "m-ts" });
const call = { type: "tool_call", tool: "bash", args: { command: "npm test" } };
const failure = { type: "tool_result", tool: "bash", output: "1 failing\n  AssertionError: 1 !== 2", exit_code: 1 };

test("a repeated failing command escalates from ok to nudge, block and stop", async () => {
  const lw = client();
  const actions = [];
  for (let i = 0; i < 12; i++) {
    actions.push((await lw.observe("ts-loop", { ...call, id: `c${i}` })).action);
    actions.push((await lw.observe("ts-loop", { ...failure, id: `c${i}` })).action);
  }
  assert.equal(actions[0], "ok");
  assert.ok(actions.includes("nudge") && actions.includes("block"));
  assert.equal(actions.at(-1), "stop");
  const summary = await lw.session("ts-loop");
  assert.equal(summary.events, 24);
  assert.equal(summary.stopped, true);
});

test("a batch is judged in order and every verdict says it was recorded", async () => {
  const lw = client();
  const events = Array.from({ length: 8 }, () => call);
  const verdicts = await lw.observeBatch("ts-batch", events, { swarm: "ts-swarm" });
  assert.deepEqual(verdicts.map((v) => v.index), [0, 1, 2, 3, 4, 5, 6, 7]);
  assert.ok(verdicts.every((v) => v.recorded));
  assert.equal(verdicts[2].action, "nudge");
  assert.match(verdicts[2].message, /3 times/);
  const swarms = await lw.swarms();
  assert.deepEqual(swarms.swarms, [{ swarm: "ts-swarm", sessions: 1 }]);
  const counts = await lw.swarm("ts-swarm");
  assert.deepEqual(Object.values(counts.counts).map((c) => c[0]), [8]);
  await lw.clearSwarm("ts-swarm");
  assert.deepEqual((await lw.swarm("ts-swarm")).counts, {});
});

test("snapshot, restore, reset, forget and the session list", async () => {
  const lw = client();
  for (let i = 0; i < 3; i++) await lw.observe("ts-life", call);
  const snapshot = await lw.snapshot("ts-life");
  assert.equal(snapshot.state.index, 3);
  await lw.restore(snapshot, "ts-copy");
  assert.deepEqual((await lw.snapshot("ts-copy")).state, snapshot.state);
  assert.equal((await lw.observe("ts-copy", call)).index, 3);
  await lw.reset("ts-life");
  assert.deepEqual((await lw.session("ts-life")).streaks, {});
  const listed = await lw.sessions();
  assert.ok(listed.sessions.includes("ts-copy") && listed.total >= 2);
  await lw.forget("ts-copy");
  assert.ok(!(await lw.sessions()).sessions.includes("ts-copy"));
  await assert.rejects(lw.session("ts-copy"), (e) => e instanceof LoopwatchError && e.status === 404);
});

test("runTool refuses a blocked call without running it and passes the nudge on", async () => {
  const lw = client();
  let runs = 0;
  const execute = async () => {
    runs++;
    return "same listing";
  };
  const outcomes = [];
  for (let i = 0; i < 6; i++) outcomes.push(await lw.runTool("ts-tool", { tool: "ls", args: { path: "." } }, execute));
  assert.equal(outcomes[0].ran, true);
  assert.ok(outcomes.some((o) => o.nudge && /ls/.test(o.nudge)));
  const blocked = outcomes.find((o) => !o.ran);
  assert.ok(blocked, "no call was blocked");
  assert.equal(blocked.verdict.action, "block");
  assert.match(blocked.output, /Refused/);
  assert.equal(runs, outcomes.filter((o) => o.ran).length);
});

test("bad input and a wrong token are errors with the service's code", async () => {
  const lw = client();
  await assert.rejects(lw.observe("ts-bad", { type: "teleport" }), (e) => e.status === 422 && e.code === "invalid_event");
  const tooMany = Array.from({ length: 21 }, () => call);
  await assert.rejects(lw.observeBatch("ts-bad", tooMany), (e) => e.status === 413 && e.code === "batch_too_large");
  const wrong = new LoopwatchClient({ url, token: "wrong-token-0123456789abc" });
  await assert.rejects(wrong.observe("ts-bad", call), (e) => e.status === 401 && e.code === "unauthorized");
  await assert.rejects(lw.session("ts-bad"), (e) => e.status === 404);
  assert.equal((await lw.health()).status, "ok");
});

test("a service that cannot be reached fails open, closed, or throws, as configured", async () => {
  const down = `http://127.0.0.1:${await freePort()}`;
  const open = new LoopwatchClient({ url: down, timeoutMs: 2000 });
  const verdict = await open.observe("x", call);
  assert.equal(verdict.action, "ok");
  assert.equal(verdict.recorded, false);
  const closed = new LoopwatchClient({ url: down, failMode: "closed", timeoutMs: 2000 });
  assert.equal((await closed.observe("x", call)).action, "block");
  assert.equal((await closed.observe("x", { type: "message", role: "user", text: "hi" })).action, "ok");
  const strict = new LoopwatchClient({ url: down, failMode: "throw", timeoutMs: 2000 });
  await assert.rejects(strict.observe("x", call), (e) => e instanceof LoopwatchError && e.code === "unreachable");
});
