// loopwatch live dashboard: follows GET /v1/live (server-sent events read with fetch, so the bearer token
// travels in a header), patches the sessions table in place, and shows a session's timeline on click.
// Everything the page shows is set with textContent: nothing from the server is parsed as HTML.
"use strict";

(() => {
  const $ = (id) => document.getElementById(id);
  const rows = new Map(); // session -> {data, tr}
  const state = { token: null, feedSeq: 0, detail: null, pending: [], scheduled: false, agents: new Set(), models: new Set() };
  const SVG = "http://www.w3.org/2000/svg";
  const PALETTE = ["#1c7ed6", "#37b24d", "#f76707", "#7048e8", "#0ca678", "#d6336c", "#f59f00", "#1098ad"];

  function token() {
    const hash = new URLSearchParams(location.hash.slice(1));
    if (hash.get("token")) {
      sessionStorage.setItem("loopwatch-token", hash.get("token"));
      history.replaceState(null, "", location.pathname + location.search);
    }
    return sessionStorage.getItem("loopwatch-token");
  }

  function headers() {
    return state.token ? { Authorization: "Bearer " + state.token } : {};
  }

  function setStatus(text, kind) {
    const el = $("status");
    el.textContent = text;
    el.dataset.state = kind;
  }

  async function api(path) {
    const response = await fetch(path, { headers: headers(), cache: "no-store" });
    if (response.status === 401) {
      $("login").hidden = false;
      throw new Error("unauthorized");
    }
    if (!response.ok) throw new Error(path + ": HTTP " + response.status);
    return response.json();
  }

  // -- the live stream -------------------------------------------------------------------------------------

  async function follow() {
    for (;;) {
      try {
        const response = await fetch("/v1/live", { headers: headers(), cache: "no-store" });
        if (response.status === 401) {
          $("login").hidden = false;
          setStatus("token needed", "error");
          return;
        }
        if (!response.ok || !response.body) throw new Error("HTTP " + response.status);
        $("login").hidden = true;
        setStatus("live", "live");
        const reader = response.body.getReader();
        const decoder = new TextDecoder();
        let buffer = "";
        for (;;) {
          const { value, done } = await reader.read();
          if (done) break;
          buffer += decoder.decode(value, { stream: true });
          let cut;
          while ((cut = buffer.indexOf("\n\n")) >= 0) {
            const block = buffer.slice(0, cut);
            buffer = buffer.slice(cut + 2);
            const data = block.split("\n").filter((l) => l.startsWith("data: ")).map((l) => l.slice(6)).join("\n");
            if (data) receive(JSON.parse(data));
          }
        }
        setStatus("reconnecting…", "connecting");
      } catch (error) {
        setStatus("disconnected: " + error.message, "error");
      }
      await new Promise((resolve) => setTimeout(resolve, 1000));
    }
  }

  function receive(message) {
    state.pending.push(message);
    if (!state.scheduled) {
      state.scheduled = true;
      requestAnimationFrame(render);
    }
  }

  // -- rendering -------------------------------------------------------------------------------------------

  function render() {
    state.scheduled = false;
    const messages = state.pending;
    state.pending = [];
    for (const message of messages) {
      for (const row of message.rows.slice().reverse()) upsert(row);
      for (const record of message.feed) addFeed(record);
      totals(message.summary);
    }
    if (state.detail && messages.some((m) => m.rows.some((r) => r.session === state.detail))) openDetail(state.detail);
    applyFilters();
  }

  function cell(tr, i, text) {
    const td = tr.children[i];
    if (td.textContent !== text) td.textContent = text;
    return td;
  }

  function pill(action, text) {
    const span = document.createElement("span");
    span.className = "pill " + action;
    span.textContent = text;
    return span;
  }

  function upsert(data) {
    let entry = rows.get(data.session);
    const body = $("sessions").tBodies[0];
    const moved = !entry || entry.data.loops !== data.loops; // new sessions and new verdicts go to the top
    if (!entry) {
      const tr = document.createElement("tr");
      for (let i = 0; i < 9; i++) tr.appendChild(document.createElement("td"));
      tr.children[4].className = tr.children[7].className = "num";
      tr.dataset.session = data.session;
      tr.addEventListener("click", () => openDetail(data.session));
      entry = { data, tr };
      rows.set(data.session, entry);
    }
    entry.data = data;
    const tr = entry.tr;
    tr.dataset.agent = data.agent || "";
    tr.dataset.model = data.model || "";
    tr.dataset.last = data.stopped ? "stop" : data.last ? data.last.action : "ok";
    tr.dataset.text = [data.session, data.agent, data.worker, data.model, data.swarm].filter(Boolean).join(" ").toLowerCase();
    tr.className = data.stopped ? "stopped" : data.loops ? "looping" : "";
    cell(tr, 0, data.session);
    cell(tr, 1, data.agent || "");
    cell(tr, 2, data.worker || "");
    cell(tr, 3, data.model || "");
    cell(tr, 4, String(data.events));
    const streaks = tr.children[5];
    streaks.replaceChildren(...Object.entries(data.streaks).map(([p, s]) => pill(s.action, p + " ×" + s.count)));
    const last = tr.children[6];
    last.replaceChildren(data.last ? pill(data.last.action, data.last.action + " " + data.last.pattern) : pill("ok", "ok"));
    cell(tr, 7, data.cost ? "$" + data.cost.toFixed(2) : data.tokens ? data.tokens + " tok" : "");
    cell(tr, 8, data.last_ts ? new Date(data.last_ts * 1000).toLocaleTimeString() : "");
    if (moved) body.insertBefore(tr, body.firstChild);
    for (const [set, value, select] of [[state.agents, data.agent, "f-agent"], [state.models, data.model, "f-model"]]) {
      if (value && !set.has(value)) {
        set.add(value);
        const option = document.createElement("option");
        option.value = option.textContent = value;
        $(select).appendChild(option);
      }
    }
  }

  function addFeed(record) {
    if (record.seq <= state.feedSeq) return;
    state.feedSeq = record.seq;
    const li = document.createElement("li");
    li.dataset.session = record.session;
    li.dataset.action = record.action;
    li.appendChild(pill(record.action, record.action));
    const who = document.createElement("b");
    who.textContent = record.session;
    li.appendChild(who);
    li.appendChild(document.createTextNode(" " + (record.pattern || "") + " ×" + record.count + (record.agent ? " · " + record.agent : "")));
    const why = document.createElement("span");
    why.className = "why";
    why.textContent = record.reason || "";
    li.appendChild(why);
    li.addEventListener("click", () => openDetail(record.session));
    const feed = $("feed");
    feed.insertBefore(li, feed.firstChild);
    while (feed.children.length > 200) feed.removeChild(feed.lastChild);
  }

  function totals(summary) {
    let looping = 0;
    let events = 0;
    for (const { data } of rows.values()) {
      if (Object.keys(data.streaks).length) looping++;
      events += data.events;
    }
    $("n-sessions").textContent = String(rows.size);
    $("n-looping").textContent = String(looping);
    $("n-stopped").textContent = String(summary.stopped);
    $("n-events").textContent = String(events);
  }

  function applyFilters() {
    const text = $("f-text").value.trim().toLowerCase();
    const action = $("f-action").value;
    const agent = $("f-agent").value;
    const model = $("f-model").value;
    let shown = 0;
    for (const { tr } of rows.values()) {
      const last = tr.dataset.last;
      const match =
        (!text || tr.dataset.text.includes(text)) &&
        (!agent || tr.dataset.agent === agent) &&
        (!model || tr.dataset.model === model) &&
        (!action || (action === "loop" ? last !== "ok" : last === action));
      tr.hidden = !match;
      if (match) shown++;
    }
    $("shown").textContent = shown + " of " + rows.size + " shown";
  }

  // -- a session's timeline ----------------------------------------------------------------------------------

  async function openDetail(session) {
    state.detail = session;
    let data;
    try {
      data = await api("/v1/board/sessions/" + encodeURIComponent(session));
    } catch (error) {
      return;
    }
    if (state.detail !== session) return;
    $("detail").hidden = false;
    $("d-name").textContent = session;
    const s = data.session;
    $("d-summary").textContent = [s.events + " events", s.loops + " verdicts", s.agent && "agent " + s.agent,
      s.model && "model " + s.model, s.stopped ? "STOPPED" : ""].filter(Boolean).join(" · ");
    drawTimeline(data);
    const list = $("d-verdicts");
    list.replaceChildren();
    let stopped = false;
    for (const step of data.steps) {
      if (!step.verdict || (stopped && step.verdict.action === "stop")) continue; // a stop repeats: listed once
      const v = step.verdict;
      stopped = v.action === "stop";
      const li = document.createElement("li");
      li.dataset.action = v.action;
      li.appendChild(pill(v.action, v.action + " L" + v.level));
      li.appendChild(document.createTextNode("step " + step.index + ": " + v.pattern + " ×" + v.count + " — " + v.reason));
      const pre = document.createElement("pre");
      pre.textContent = JSON.stringify({ rule: v.rule, loop_start: v.loop_start, message: v.message, evidence: v.evidence }, null, 1);
      li.appendChild(pre);
      list.appendChild(li);
    }
  }

  function drawTimeline(data) {
    const svg = $("d-timeline");
    svg.replaceChildren();
    const steps = data.steps;
    const colours = data.colours;
    const tools = new Map();
    const unit = 1000 / Math.max(steps.length, 1);
    steps.forEach((step, i) => {
      let fill;
      if (step.kind === "call") {
        if (!tools.has(step.tool)) tools.set(step.tool, colours.tools[tools.size] || colours.other_tool);
        fill = tools.get(step.tool);
      } else {
        fill = colours.kinds[step.kind] || "#adb5bd";
      }
      const rect = document.createElementNS(SVG, "rect");
      rect.setAttribute("x", String(i * unit));
      rect.setAttribute("y", "8");
      rect.setAttribute("width", String(Math.max(unit - 0.5, 0.5)));
      rect.setAttribute("height", "22");
      rect.setAttribute("fill", fill);
      const title = document.createElementNS(SVG, "title");
      title.textContent = "[" + step.index + "] " + step.label + (step.verdict ? " — " + step.verdict.action + " " + step.verdict.pattern : "");
      rect.appendChild(title);
      svg.appendChild(rect);
      if (step.verdict) {
        const mark = document.createElementNS(SVG, "rect");
        mark.setAttribute("x", String(i * unit));
        mark.setAttribute("y", "0");
        mark.setAttribute("width", String(Math.max(unit - 0.5, 0.5)));
        mark.setAttribute("height", "6");
        mark.setAttribute("fill", colours.actions[step.verdict.action] || "#000");
        svg.appendChild(mark);
      }
    });
  }

  // -- loop rates ----------------------------------------------------------------------------------------------

  async function drawRates() {
    let data;
    try {
      data = await api("/v1/board/rates?dimension=" + encodeURIComponent($("r-dim").value));
    } catch (error) {
      return;
    }
    const svg = $("rates");
    const legend = $("rates-legend");
    svg.replaceChildren();
    legend.replaceChildren();
    const series = Object.entries(data.series).sort((a, b) => b[1].length - a[1].length).slice(0, PALETTE.length);
    const times = series.flatMap(([, points]) => points.map((p) => p[0]));
    if (!times.length) return;
    const t0 = Math.min(...times);
    const t1 = Math.max(...times, t0 + data.bucket_seconds);
    series.forEach(([name, points], i) => {
      const line = document.createElementNS(SVG, "polyline");
      line.setAttribute("fill", "none");
      line.setAttribute("stroke", PALETTE[i]);
      line.setAttribute("stroke-width", "2");
      line.setAttribute("points", points.map(([t, events, loops]) =>
        ((t - t0) / (t1 - t0)) * 396 + 2 + "," + (156 - (events ? loops / events : 0) * 150)).join(" "));
      svg.appendChild(line);
      const li = document.createElement("li");
      const swatch = document.createElement("i");
      swatch.style.background = PALETTE[i];
      const totalEvents = points.reduce((n, p) => n + p[1], 0);
      const totalLoops = points.reduce((n, p) => n + p[2], 0);
      li.appendChild(swatch);
      li.appendChild(document.createTextNode(name + " " + ((100 * totalLoops) / Math.max(totalEvents, 1)).toFixed(1) + "%"));
      legend.appendChild(li);
    });
  }

  // -- start ---------------------------------------------------------------------------------------------------

  for (const id of ["f-text", "f-action", "f-agent", "f-model"]) $(id).addEventListener("input", applyFilters);
  $("r-dim").addEventListener("change", drawRates);
  $("d-close").addEventListener("click", () => {
    state.detail = null;
    $("detail").hidden = true;
  });
  $("login").addEventListener("submit", (event) => {
    event.preventDefault();
    state.token = $("token").value.trim();
    sessionStorage.setItem("loopwatch-token", state.token);
    $("login").hidden = true;
    follow();
  });
  state.token = token();
  follow();
  drawRates();
  setInterval(drawRates, 5000);
})();
