// The triage page: filters every sample of data/samples.js (window.CALLCHECK_SAMPLES, a columnar
// index written by build) and renders the matches a page at a time. Text from the data is only
// ever set as textContent or attribute values, never parsed as HTML.
(function () {
  "use strict";
  var D = window.CALLCHECK_SAMPLES;
  var count = document.getElementById("count");
  if (!D) {
    count.textContent = "data/samples.js did not load: the samples are in data/samples.csv.";
    return;
  }
  var N = D.o.length;
  // The first FIRST samples are the first round; the rest are feedback samples (older data
  // has none), listed only when the round filter asks for them.
  var FIRST = typeof D.first === "number" ? D.first : N;
  var styles = D.styles || [], parents = D.p || [], runRound = D.runs.f || [];
  // Per sample: its run directory (runs are stored once, samples follow in key order).
  var run = new Int32Array(N);
  var i, j, k = 0;
  for (i = 0; i < D.runs.n.length; i++) {
    for (j = 0; j < D.runs.n[i]; j++) run[k++] = i;
  }
  var PASS = 0, ERROR = D.outcomes.length - 1;
  var el = function (id) { return document.getElementById(id); };
  var f = { round: el("f-round"), outcome: el("f-outcome"), label: el("f-label"), model: el("f-model"), tag: el("f-tag"), task: el("f-task"), q: el("f-q") };
  if (!f.round) {
    // A site without feedback samples has no round filter: the first round it is.
    f.round = document.createElement("select");
    f.round.appendChild(new Option("first round", ""));
  }
  function options(select, names) {
    names.forEach(function (n, ix) {
      var o = document.createElement("option");
      o.value = String(ix);
      o.textContent = n;
      select.appendChild(o);
    });
  }
  options(f.label, D.outcomes.slice(1, ERROR));
  options(f.model, D.models);
  options(f.tag, D.tags);
  options(f.task, D.tasks);
  // The label select lists labels only: its option values are outcome codes minus one.
  var body = el("rows"), more = el("more");
  var matches = [], shown = 0, PAGE = 100;

  function state() {
    var p = new URLSearchParams();
    ["round", "outcome", "label", "model", "tag", "task", "q"].forEach(function (n) {
      if (f[n].value !== "") p.set(n, n === "round" || n === "outcome" || n === "q" ? f[n].value : f[n].options[f[n].selectedIndex].textContent);
    });
    return p.toString();
  }
  function restore() {
    var p = new URLSearchParams(location.hash.slice(1));
    ["round", "outcome", "label", "model", "tag", "task", "q"].forEach(function (n) {
      var v = p.get(n);
      if (v === null) return;
      if (n === "round" || n === "outcome" || n === "q") { f[n].value = v; return; }
      for (var x = 0; x < f[n].options.length; x++) {
        if (f[n].options[x].textContent === v && f[n].options[x].value !== "") f[n].selectedIndex = x;
      }
    });
  }

  function filter() {
    // "" = the first round; "1" = every feedback sample; a style's name = that style's.
    var round = f.round.value;
    var style = round === "" || round === "1" ? 0 : 1 + styles.indexOf(round);
    var outcome = f.outcome.value;
    var label = f.label.value === "" ? -1 : Number(f.label.value) + 1;
    var model = f.model.value === "" ? -1 : Number(f.model.value);
    var tag = f.tag.value === "" ? -1 : Number(f.tag.value);
    var task = f.task.value === "" ? -1 : Number(f.task.value);
    var q = f.q.value.trim().toLowerCase();
    var taskOk = null;
    if (tag >= 0) {
      taskOk = new Uint8Array(D.tasks.length);
      D.taskTags.forEach(function (tags, t) { if (tags.indexOf(tag) >= 0) taskOk[t] = 1; });
    }
    var detailOk = null;
    if (q !== "") {
      detailOk = new Uint8Array(D.details.length);
      D.details.forEach(function (d, x) { if (d.toLowerCase().indexOf(q) >= 0) detailOk[x] = 1; });
    }
    matches = [];
    var from = round === "" ? 0 : FIRST, to = round === "" ? FIRST : N;
    for (var s = from; s < to; s++) {
      if (style > 0 && runRound[run[s]] !== style) continue;
      var o = D.o.charCodeAt(s) - 97;
      if (outcome === "fail" && (o === PASS || o === ERROR)) continue;
      if (outcome === "error" && o !== ERROR) continue;
      if (outcome === "pass" && o !== PASS) continue;
      if (label >= 0 && o !== label) continue;
      var r = run[s];
      if (model >= 0 && D.runs.m[r] !== model) continue;
      if (task >= 0 && D.runs.t[r] !== task) continue;
      if (taskOk && !taskOk[D.runs.t[r]]) continue;
      if (detailOk && !detailOk[D.d[s]]) continue;
      matches.push(s);
    }
    body.textContent = "";
    shown = 0;
    render();
    var h = state();
    try {
      if (h !== location.hash.slice(1)) history.replaceState(null, "", h === "" ? location.pathname : "#" + h);
    } catch (e) { /* some file:// setups refuse it: the filters still work */ }
  }

  function cell(tr, text, cls) {
    var td = document.createElement("td");
    td.textContent = text;
    if (cls) td.className = cls;
    tr.appendChild(td);
    return td;
  }
  // The run page's anchor of sample s: failures and errors are listed under #fail-.
  function href(s) {
    var r = run[s], o = D.o.charCodeAt(s) - 97;
    return "t/" + D.models[D.runs.m[r]] + "/" + D.tasks[D.runs.t[r]] + "/" + D.runNames[D.runs.r[r]] + "/index.html#" + (o !== PASS ? "fail-" : "s-") + D.names[D.s[s]];
  }
  function render() {
    var frag = document.createDocumentFragment();
    var end = Math.min(matches.length, shown + PAGE);
    for (var x = shown; x < end; x++) {
      var s = matches[x], r = run[s], o = D.o.charCodeAt(s) - 97;
      var model = D.models[D.runs.m[r]], task = D.tasks[D.runs.t[r]];
      var runName = D.runNames[D.runs.r[r]], name = D.names[D.s[s]];
      var tr = document.createElement("tr");
      cell(tr, model);
      cell(tr, task);
      var a = document.createElement("a");
      a.href = href(s);
      a.textContent = name;
      a.title = "run " + runName;
      var td = document.createElement("td");
      td.appendChild(a);
      var parent = s >= FIRST ? parents[s - FIRST] : -1;
      if (s >= FIRST) {
        // A feedback sample: its style, and the sample it follows up.
        td.appendChild(document.createTextNode(" " + (styles[runRound[r] - 1] || "feedback") + ", after "));
        if (parent >= 0) {
          var up = document.createElement("a");
          up.className = "parent";
          up.href = href(parent);
          up.textContent = D.runNames[D.runs.r[run[parent]]] + "/" + D.names[D.s[parent]];
          up.title = "the sample this follows up";
          td.appendChild(up);
        } else {
          td.appendChild(document.createTextNode("a sample not in this build"));
        }
      }
      tr.appendChild(td);
      cell(tr, D.outcomes[o], o === PASS ? "s-pass" : o === ERROR ? "s-error" : "s-fail");
      cell(tr, D.details[D.d[s]]);
      frag.appendChild(tr);
    }
    body.appendChild(frag);
    shown = end;
    var among = f.round.value === "" ? FIRST + " samples" : (N - FIRST) + " feedback samples";
    count.textContent = matches.length + " of " + among + " match" + (shown < matches.length ? "; showing the first " + shown : "") + ".";
    more.hidden = shown >= matches.length;
  }

  restore();
  ["round", "outcome", "label", "model", "tag", "task"].forEach(function (n) { f[n].addEventListener("change", filter); });
  var timer = 0;
  f.q.addEventListener("input", function () { clearTimeout(timer); timer = setTimeout(filter, 150); });
  more.addEventListener("click", render);
  filter();
  // Time from navigation to the first rendered page of rows, for the benchmark.
  count.setAttribute("data-render-ms", String(Math.round(performance.now())));
})();
