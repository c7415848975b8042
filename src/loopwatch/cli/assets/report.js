
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
