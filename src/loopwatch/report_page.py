"""The HTML report's page assets: its head, style sheet and script (inline in the page; nothing is fetched).

The script reads the page's data block (``<script type="application/json" id="report-data">``): it opens a run's
panel (its steps around each loop and each labelled episode, a step's full text behind a click), filters the runs
by pattern, source, model and action, searches them by run id or tool, and sorts the runs table by any column.
"""

from __future__ import annotations

from typing import Final

HEAD: Final = """<!DOCTYPE html>
<html lang="en"><head><meta charset="utf-8">
<meta name="viewport" content="width=device-width, initial-scale=1">
<meta http-equiv="Content-Security-Policy" content="default-src 'none'; style-src 'unsafe-inline'; \
script-src 'unsafe-inline'; img-src data:">
<link rel="icon" href="data:,">
<title>__TITLE__</title>
<style>__CSS__</style></head>
"""

CSS: Final = """
:root{--fg:#212529;--muted:#6c757d;--line:#dee2e6;--bg:#f8f9fa;--card:#fff;--accent:#1c7ed6;
--nudge:#e0a106;--block:#e8590c;--stop:#c92a2a}
*{box-sizing:border-box}
body{margin:0;font:14px/1.45 system-ui,-apple-system,"Segoe UI",Roboto,"Helvetica Neue",Arial,sans-serif;
color:var(--fg);background:var(--bg)}
header.top{background:#1f2937;color:#f8f9fa;padding:18px 32px}
header.top h1{margin:0;font-size:22px;font-weight:650;letter-spacing:.2px}
header.top .sub{margin:4px 0 0;color:#ced4da;font-size:13px}
main{padding:20px 32px 48px;max-width:1500px;margin:0 auto}
h2{font-size:17px;margin:28px 0 10px;font-weight:650}
section{margin-bottom:8px}
.cards{display:grid;grid-template-columns:repeat(auto-fit,minmax(170px,1fr));gap:12px}
.card{background:var(--card);border:1px solid var(--line);border-radius:10px;padding:12px 16px}
.card-name{color:var(--muted);font-size:12px;text-transform:uppercase;letter-spacing:.6px}
.card-value{font-size:26px;font-weight:700;margin-top:2px;font-variant-numeric:tabular-nums}
.card-note{color:var(--muted);font-size:12px;min-height:1.2em}
.charts{display:grid;grid-template-columns:repeat(auto-fit,minmax(420px,1fr));gap:12px;margin-top:14px}
.chart{margin:0;background:var(--card);border:1px solid var(--line);border-radius:10px;padding:12px 14px}
.chart figcaption{font-weight:650;margin-bottom:6px}
.chart figcaption small{color:var(--muted);font-weight:400}
.chart svg{width:100%;height:auto;display:block}
.bar-label,.bar-number,.tick,.point-label,.axis-title{font-size:12px;fill:#343a40}
.bar-number,.tick{fill:var(--muted)}
.bar-total{fill:#e9ecef}.bar-value{fill:var(--accent)}
.bar:hover .bar-value{fill:#1864ab}
.grid{stroke:#e9ecef;stroke-width:1}
.sweep-line{fill:none;stroke:var(--accent);stroke-width:2}
.sweep-point circle{fill:#fff;stroke:var(--accent);stroke-width:2}
.chart.sweep{display:grid;grid-template-columns:minmax(0,560px) minmax(220px,1fr);gap:8px 20px;align-items:start}
.chart.sweep figcaption{grid-column:1/-1}
.sweep-table{margin-top:8px}
table{border-collapse:collapse;width:100%;background:var(--card);border:1px solid var(--line);border-radius:10px;
overflow:hidden}
th,td{padding:6px 10px;border-bottom:1px solid #f1f3f5;text-align:left;vertical-align:top}
th{background:#f1f3f5;font-size:12px;color:#495057;font-weight:600}
td.num,th.num{text-align:right;font-variant-numeric:tabular-nums}
.run-link{cursor:pointer}
.run-link:hover{background:#f1f8ff}
.run-link:focus{outline:2px solid var(--accent);outline-offset:-2px}
.run-link.selected{background:#e7f5ff}
.badge{display:inline-block;padding:0 7px;border-radius:9px;font-size:11px;font-weight:700;color:#fff;
text-transform:uppercase;letter-spacing:.4px;line-height:18px}
.badge.nudge{background:var(--nudge)}.badge.block{background:var(--block)}.badge.stop{background:var(--stop)}
.badge.clean{background:#adb5bd}
.span-chip{display:inline-block;margin:1px 4px 1px 0;padding:0 6px;border-radius:4px;font-size:12px;
background:#fff4e6;border:1px solid #ffd8a8;white-space:nowrap}
.span-chip.stop{background:#fff5f5;border-color:#ffc9c9}.span-chip.nudge{background:#fff9db;border-color:#ffec99}
.note{color:var(--muted);margin:4px 0 10px}
.empty{color:var(--muted);font-style:italic}
.legend{display:flex;flex-wrap:wrap;gap:6px 22px;background:var(--card);border:1px solid var(--line);
border-radius:10px;padding:8px 14px;margin-bottom:10px;font-size:12px}
.legend b{margin-right:8px;color:#495057}
.key{display:inline-flex;align-items:center;margin-right:10px;white-space:nowrap}
.key i{display:inline-block;width:11px;height:11px;border-radius:2px;margin-right:4px}
.key i.mark{width:6px;height:12px;border-radius:1px}
.key i.shade{background:rgba(232,89,12,.22);width:18px}
.timelines{background:var(--card);border:1px solid var(--line);border-radius:10px}
.run-row{display:grid;grid-template-columns:300px 1fr;gap:14px;padding:8px 14px;border-bottom:1px solid #f1f3f5;
align-items:center}
.run-row:last-child{border-bottom:0}
.run-label{min-width:0}
.run-row .run-id{overflow:hidden;text-overflow:ellipsis;white-space:nowrap;
font-family:ui-monospace,SFMono-Regular,Menlo,Consolas,monospace;font-size:12px}
.run-meta{color:var(--muted);font-size:12px}
.run-track{min-width:0}
svg.timeline{width:100%;height:30px;display:block}
.timeline .track{fill:#f1f3f5}
.timeline .episode{fill:rgba(232,89,12,.18)}
.timeline .episode.stop{fill:rgba(201,42,42,.16)}
.timeline .episode.nudge{fill:rgba(224,161,6,.2)}
.axis{display:flex;justify-content:space-between;color:#adb5bd;font-size:10px;line-height:1}
#detail{position:fixed;top:0;right:0;bottom:0;width:min(680px,94vw);background:#fff;border-left:1px solid var(--line);
box-shadow:-8px 0 24px rgba(0,0,0,.12);overflow:auto;z-index:10;padding:0 0 24px}
#detail[hidden]{display:none}
.detail-head{position:sticky;top:0;background:#fff;display:flex;justify-content:space-between;gap:10px;
padding:14px 18px 10px;border-bottom:1px solid var(--line);z-index:1}
.detail-kicker{color:var(--muted);font-size:11px;text-transform:uppercase;letter-spacing:.6px}
#detail h2{margin:0;font-size:14px;font-family:ui-monospace,SFMono-Regular,Menlo,Consolas,monospace;
word-break:break-all}
#detail-meta{color:var(--muted);font-size:12px;margin-top:2px}
#detail-close{border:0;background:#f1f3f5;border-radius:6px;font-size:20px;width:32px;height:32px;cursor:pointer;
flex:none}
#detail-body{padding:4px 18px}
.episode-block{margin-top:14px}
.episode-block h3{font-size:13px;margin:0 0 6px}
.verdict-list{margin:0 0 8px;padding:0;list-style:none;font-size:12px}
.verdict-list li{margin:2px 0;white-space:nowrap;overflow:hidden;text-overflow:ellipsis}
td.kind{white-space:nowrap;max-width:130px;overflow:hidden;text-overflow:ellipsis}
table.steps .badge{font-size:9px;line-height:14px;margin-right:6px;vertical-align:1px}
table.steps{font-size:12px}
table.steps td{padding:3px 8px;border-bottom:1px solid #f1f3f5}
table.steps td.lbl{font-family:ui-monospace,SFMono-Regular,Menlo,Consolas,monospace;word-break:break-all}
table.steps tr.in-loop td{background:#fff9f2}
table.steps tr.in-label td:first-child{box-shadow:inset 3px 0 0 #1971c2}
table.steps tr.hl td{background:#ffe8cc}
table.steps tr.hl td.lbl{font-weight:700}
table.steps tr.at-verdict td:first-child{box-shadow:inset 3px 0 0 var(--block)}
table.steps tr.gap td{color:var(--muted);text-align:center;font-style:italic}
.dot{display:inline-block;width:9px;height:9px;border-radius:2px;margin-right:5px;vertical-align:-1px}
#tooltip{position:fixed;pointer-events:none;background:#212529;color:#fff;font-size:12px;padding:4px 8px;
border-radius:5px;max-width:520px;z-index:20;font-family:ui-monospace,SFMono-Regular,Menlo,Consolas,monospace}
@media (max-width:900px){.run-row{grid-template-columns:1fr}main{padding:16px}}
table.runs td.source,table.runs td.model{max-width:220px;overflow:hidden;text-overflow:ellipsis;white-space:nowrap;
color:#495057}
table.runs td{white-space:nowrap}
table.runs td.patterns{max-width:260px;overflow:hidden;text-overflow:ellipsis}
table.runs td.run-id{white-space:nowrap;font-family:ui-monospace,SFMono-Regular,Menlo,Consolas,monospace;font-size:12px}
table.sortable th{cursor:pointer;user-select:none;white-space:nowrap}
table.sortable th:hover{background:#e9ecef}
.sort-mark{display:inline-block;width:1em;color:var(--accent)}
th[aria-sort=ascending] .sort-mark::after{content:"▲"}th[aria-sort=descending] .sort-mark::after{content:"▼"}
.filters{display:flex;flex-wrap:wrap;gap:8px 16px;align-items:center;background:var(--card);
border:1px solid var(--line);border-radius:10px;padding:8px 14px;margin-bottom:10px;font-size:13px}
.filters label{color:#495057}
.filters input,.filters select{font:inherit;padding:3px 6px;border:1px solid #ced4da;border-radius:6px;background:#fff}
.filters input{width:220px}
#f-count{color:var(--muted);margin-left:auto}
[hidden]{display:none !important}
.key i.lane{height:6px;width:18px}
.timeline .label-span.missed{stroke:#1864ab;stroke-width:.5}
details.text summary{cursor:pointer;list-style:none}
details.text summary::-webkit-details-marker{display:none}
details.text summary::before{content:"▸ ";color:var(--accent)}
details.text[open] summary::before{content:"▾ "}
details.text pre{white-space:pre-wrap;word-break:break-word;background:#f8f9fa;border:1px solid #e9ecef;
border-radius:6px;padding:6px 8px;margin:4px 0 2px;max-height:420px;overflow:auto;font-size:12px;font-weight:400}
.label-list{margin:0 0 8px;padding:0;list-style:none;font-size:12px}
.label-list li{margin:2px 0}
.label-chip{display:inline-block;padding:0 6px;border-radius:4px;color:#fff;font-size:11px;font-weight:700;
margin-right:6px}
.label-chip.caught{background:#2f9e44}.label-chip.missed{background:#1971c2}
.verdict-msg{color:#495057;margin:0 0 0 18px;white-space:normal}
.metrics td,.metrics th{font-size:13px}
.issue-list{background:var(--card);border:1px solid var(--line);border-radius:10px;margin:0;padding:6px 0;
list-style:none;max-height:520px;overflow:auto}
.issue-list li{padding:4px 14px;border-bottom:1px solid #f1f3f5;font-size:13px}
.issue-list li:last-child{border-bottom:0}
.issue-list .rid{font-family:ui-monospace,SFMono-Regular,Menlo,Consolas,monospace;font-size:12px}
.evalgrid{display:grid;grid-template-columns:repeat(auto-fit,minmax(520px,1fr));gap:12px}
"""

JS: Final = r"""
(function () {
  "use strict";
  var data = JSON.parse(document.getElementById("report-data").textContent);
  var panel = document.getElementById("detail");
  var body = document.getElementById("detail-body");
  var tooltip = document.getElementById("tooltip");
  var colours = data.colours;
  var SEVERITY = {nudge: 1, block: 2, stop: 3};

  function el(tag, cls, text) {
    var node = document.createElement(tag);
    if (cls) node.className = cls;
    if (text !== undefined && text !== null) node.textContent = String(text);
    return node;
  }

  function byRecord(run) {
    var map = new Map();
    run.steps.forEach(function (s) {
      if (!map.has(s[0])) map.set(s[0], []);
      map.get(s[0]).push(s);
    });
    return map;
  }

  function select(i) {
    document.querySelectorAll(".run-link.selected").forEach(function (n) { n.classList.remove("selected"); });
    document.querySelectorAll('.run-link[data-run="' + i + '"]').forEach(function (n) { n.classList.add("selected"); });
  }

  function money(value) {
    return (value >= 1 ? value.toFixed(2) : String(Number(value.toPrecision(4)))) + " " + data.currency;
  }

  function blocksOf(run) {
    var spans = [];
    run.episodes.forEach(function (e) { spans.push([e.start, e.end]); });
    run.labels.forEach(function (l) { spans.push([l.start, l.end]); });
    spans.sort(function (a, b) { return a[0] - b[0] || a[1] - b[1]; });
    var out = [];
    spans.forEach(function (s) {
      var last = out[out.length - 1];
      if (last && s[0] <= last[1] + 1) last[1] = Math.max(last[1], s[1]);
      else out.push([s[0], s[1]]);
    });
    return out;
  }

  function stepRow(s, inLoop, hl, at) {
    var tr = el("tr", "step-row");
    tr.setAttribute("data-step", String(s[0]));
    if (inLoop) tr.classList.add("in-loop");
    if (hl) tr.classList.add("hl");
    if (at) { tr.classList.add("at-verdict"); tr.title = at.action + ": " + at.reason; }
    tr.appendChild(el("td", "num", s[0]));
    var kind = el("td", "kind");
    var name = s[1] === "call" ? (s[2] || "call") : s[1];
    kind.title = name;
    var dot = el("span", "dot");
    dot.style.background = colourOf(s);
    kind.appendChild(dot);
    kind.appendChild(document.createTextNode(name));
    tr.appendChild(kind);
    var what = el("td", "lbl");
    var line = what;
    if (s[5]) {
      var details = el("details", "text");
      line = el("summary");
      details.appendChild(line);
      details.appendChild(el("pre", "", s[5]));
      what.appendChild(details);
    }
    if (at) line.appendChild(el("span", "badge " + at.action, at.action));
    line.appendChild(document.createTextNode(s[3]));
    tr.appendChild(what);
    return tr;
  }

  function stepTable(run, records, lo, hi, inside, hl, at) {
    var table = el("table", "steps");
    var head = el("tr");
    ["step", "kind", "what"].forEach(function (h) { head.appendChild(el("th", "", h)); });
    var thead = el("thead"); thead.appendChild(head); table.appendChild(thead);
    var tbody = el("tbody");
    var wanted = [];
    for (var r = lo; r <= hi; r++) if (records.has(r)) wanted.push(r);
    var limit = 80;
    var parts = wanted.length > limit ?
      [wanted.slice(0, limit / 2), wanted.slice(wanted.length - limit / 2)] : [wanted];
    parts.forEach(function (part, n) {
      if (n > 0) {
        var gap = el("tr", "gap");
        var td = el("td", "", "… " + (wanted.length - limit) + " steps …");
        td.colSpan = 3; gap.appendChild(td); tbody.appendChild(gap);
      }
      part.forEach(function (r) {
        records.get(r).forEach(function (s, k) {
          var last = k === records.get(r).length - 1;
          var row = stepRow(s, inside(r), hl.has(r), last ? at.get(r) : undefined);
          if (run.labels.some(function (l) { return r >= l.start && r <= l.end; })) row.classList.add("in-label");
          tbody.appendChild(row);
        });
      });
    });
    table.appendChild(tbody);
    return table;
  }

  function show(i, focus) {
    var run = data.runs[i];
    if (!run) return;
    select(i);
    document.getElementById("detail-title").textContent = run.id;
    var meta = [run.length + " steps", run.verdicts.length + " verdicts", run.turns + " steps inside loops"];
    if (run.source) meta.unshift(run.source);
    if (run.model) meta.push("model " + run.model);
    if (run.cost !== null) meta.push("cost " + money(run.cost) + " (" + money(run.loop_cost) + " inside loops)");
    if (run.label_verdict) meta.push("labelled " + run.label_verdict);
    document.getElementById("detail-meta").textContent = meta.join(" · ");
    body.textContent = "";
    if (run.partial) body.appendChild(el("p", "note", "A long run: only the steps around its loops were kept."));
    var records = byRecord(run);
    var blocks = blocksOf(run);
    var target = null;
    if (!blocks.length) {
      var block = el("div", "episode-block");
      block.appendChild(el("h3", "", "No loop found: the first " + Math.min(data.clean_steps, run.length) + " steps"));
      var never = function () { return false; };
      block.appendChild(stepTable(run, records, 0, data.clean_steps - 1, never, new Set(), new Map()));
      body.appendChild(block);
    }
    blocks.forEach(function (span, k) {
      var block = el("div", "episode-block");
      block.setAttribute("data-episode", String(k));
      block.setAttribute("data-start", String(span[0]));
      block.setAttribute("data-end", String(span[1]));
      var patterns = [];
      run.episodes.forEach(function (e) {
        if (e.start > span[1] || e.end < span[0]) return;
        e.patterns.forEach(function (p) { if (patterns.indexOf(p) < 0) patterns.push(p); });
      });
      block.appendChild(el("h3", "", (patterns.length ? "Loop " : "Labelled loop ") + (k + 1) + ": steps " +
        span[0] + "–" + span[1] + (patterns.length ? " · " + patterns.join(", ") : " · no verdict")));
      var labels = el("ul", "label-list");
      run.labels.forEach(function (l) {
        if (l.start > span[1] || l.end < span[0]) return;
        var li = el("li");
        li.appendChild(el("span", "label-chip " + (l.caught ? "caught" : "missed"), l.caught ? "caught" : "missed"));
        li.appendChild(document.createTextNode("labelled " + l.pattern + ", steps " + l.start + "–" + l.end +
          " (a loop from step " + l.detectable_at + ")" + (l.note ? ": " + l.note : "")));
        labels.appendChild(li);
      });
      if (labels.childNodes.length) block.appendChild(labels);
      var list = el("ul", "verdict-list");
      var hl = new Set();
      var at = new Map();
      run.verdicts.forEach(function (v) {
        if (v.index < span[0] || v.index > span[1]) return;
        v.hl.forEach(function (p) { hl.add(p); });
        if (!at.has(v.index) || SEVERITY[v.action] > SEVERITY[at.get(v.index).action]) at.set(v.index, v);
        var li = el("li");
        li.appendChild(el("span", "badge " + v.action, v.action));
        var text = " step " + v.index + " · " + v.pattern + " ×" + v.count + " · level " + v.level +
          (v.detector ? " · " + v.detector : "") + " — " + v.reason;
        li.appendChild(document.createTextNode(text));
        li.title = v.action + text + (v.message ? "\n\nmessage: " + v.message : "");
        list.appendChild(li);
      });
      if (list.childNodes.length) block.appendChild(list);
      var inLoop = function (r) {
        return run.episodes.some(function (e) { return r >= e.start && r <= e.end; });
      };
      var lo = Math.max(0, span[0] - data.context), hi = span[1] + data.context;
      block.appendChild(stepTable(run, records, lo, hi, inLoop, hl, at));
      body.appendChild(block);
      if (focus !== undefined && focus >= span[0] && focus <= span[1]) target = block;
    });
    panel.hidden = false;
    panel.scrollTop = 0;
    if (target) target.scrollIntoView({block: "start"});
  }

  function colourOf(step) {
    if (step[1] === "call") {
      return Object.prototype.hasOwnProperty.call(colours.tools, step[2]) ? colours.tools[step[2]] : colours.other;
    }
    return colours.kinds[step[1]] || colours.kinds.system;
  }

  function open(node) {
    var step = node.getAttribute("data-step");
    show(Number(node.getAttribute("data-run")), step === null ? undefined : Number(step));
  }

  document.querySelectorAll(".run-link, .issue-link").forEach(function (node) {
    node.addEventListener("click", function () { open(node); });
    node.addEventListener("keydown", function (ev) {
      if (ev.key === "Enter" || ev.key === " ") { ev.preventDefault(); open(node); }
    });
  });
  document.getElementById("detail-close").addEventListener("click", function () { panel.hidden = true; });
  document.addEventListener("keydown", function (ev) { if (ev.key === "Escape") panel.hidden = true; });

  // filters and search: the same choice applies to the table's rows and the timelines
  var search = document.getElementById("f-search");
  var pickers = ["pattern", "source", "model", "show"].map(function (n) { return document.getElementById("f-" + n); });
  var rows = Array.prototype.slice.call(document.querySelectorAll(".run-link[data-run]"));
  function words(node, name) { return (node.getAttribute(name) || "").split(" "); }
  function matches(node) {
    var pattern = pickers[0] && pickers[0].value, source = pickers[1] && pickers[1].value;
    var model = pickers[2] && pickers[2].value, show = pickers[3] ? pickers[3].value : "";
    var action = node.getAttribute("data-action");
    if (pattern && words(node, "data-patterns").indexOf(pattern) < 0) return false;
    if (source && node.getAttribute("data-source") !== source) return false;
    if (model && node.getAttribute("data-model") !== model) return false;
    if (show === "loops" && action === "clean") return false;
    if (show && show !== "loops" && show !== action && words(node, "data-flags").indexOf(show) < 0) return false;
    var q = search ? search.value.trim().toLowerCase() : "";
    if (q) {
      var id = (node.getAttribute("data-id") || "").toLowerCase();
      var tools = words(node, "data-tools").map(function (t) { return t.toLowerCase(); });
      if (id.indexOf(q) < 0 && !tools.some(function (t) { return t.indexOf(q) >= 0; })) return false;
    }
    return true;
  }
  function applyFilters() {
    var shown = new Set();
    rows.forEach(function (node) {
      var ok = matches(node);
      node.hidden = !ok;
      if (ok) shown.add(node.getAttribute("data-run"));
    });
    var count = document.getElementById("f-count");
    if (count) count.textContent = shown.size + " of " + data.runs.length + " runs shown";
    var none = document.getElementById("no-match");
    if (none) none.hidden = shown.size > 0;
  }
  if (search) search.addEventListener("input", applyFilters);
  pickers.forEach(function (p) { if (p) p.addEventListener("change", applyFilters); });
  applyFilters();

  // sortable columns: click a column's name (again to reverse)
  document.querySelectorAll("table.sortable").forEach(function (table) {
    var heads = table.querySelectorAll("th");
    heads.forEach(function (th, col) {
      function sort() {
        var down = th.getAttribute("aria-sort") !== "descending";
        heads.forEach(function (h) { h.setAttribute("aria-sort", "none"); });
        th.setAttribute("aria-sort", down ? "descending" : "ascending");
        var numeric = th.getAttribute("data-kind") === "num";
        var tbody = table.tBodies[0];
        var list = Array.prototype.slice.call(tbody.rows);
        list.sort(function (a, b) {
          var x = a.cells[col].getAttribute("data-v"), y = b.cells[col].getAttribute("data-v");
          var c = numeric ? Number(x) - Number(y) : x.localeCompare(y);
          return down ? -c : c;
        });
        list.forEach(function (r) { tbody.appendChild(r); });
      }
      th.addEventListener("click", sort);
      th.addEventListener("keydown", function (ev) { if (ev.key === "Enter") { ev.preventDefault(); sort(); } });
    });
  });

  document.querySelectorAll("svg.timeline").forEach(function (svg) {
    var run = data.runs[Number(svg.getAttribute("data-run"))];
    var records = byRecord(run);
    svg.addEventListener("mousemove", function (ev) {
      var box = svg.getBoundingClientRect();
      var r = Math.floor((ev.clientX - box.left) / box.width * Math.max(run.length, 1));
      var steps = records.get(r);
      if (!steps) { tooltip.hidden = true; return; }
      tooltip.textContent = "step " + r + " · " + steps.map(function (s) { return s[3]; }).join(" · ");
      tooltip.hidden = false;
      tooltip.style.left = Math.min(ev.clientX + 12, window.innerWidth - 540) + "px";
      tooltip.style.top = (ev.clientY + 14) + "px";
    });
    svg.addEventListener("mouseleave", function () { tooltip.hidden = true; });
  });
})();
"""
