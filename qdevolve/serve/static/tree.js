/* The runs table and the lineage tree of one run (ECharts tree series). */
"use strict";
(() => {
  const {el, getJSON, fmt, short, programHref, programLink, when, tipBox, category, ramp, poll} = window.QD;
  const runId = window.QD.runId;
  const form = document.getElementById("filters");
  const FIELDS = ["color", "status", "operator", "gen_min", "gen_max", "limit", "root", "pv"];
  let chart = null, data = null, draws = 0;

  async function renderRuns() {
    const answer = await getJSON("/api/runs");
    const runs = answer.runs;
    const tbody = document.querySelector("#runs tbody");
    tbody.replaceChildren(...runs.map(r => el("tr", {run: r.id, class: r.id === runId ? "here" : ""},
      el("td", {}, el("a", {href: "/runs/" + encodeURIComponent(r.id), text: r.name})),
      el("td", {}, el("code", {text: short(r.id)})),
      el("td", {}, el("span", {class: "status s-" + r.status, text: r.status})),
      el("td", {class: "num", text: r.programs}), el("td", {class: "num", text: r.evaluations}),
      el("td", {class: "num", text: fmt(r.best_score)}), el("td", {text: when(r.updated_at)}),
      el("td", {}, el("a", {href: "/runs/" + encodeURIComponent(r.id) + "/archive", text: "archive"}), " · ",
        el("a", {href: "/runs/" + encodeURIComponent(r.id) + "/policy", text: "policy"})))));
    document.body.dataset.runsReady = String(runs.length);
    return answer;
  }

  function params() {
    const p = new URLSearchParams(location.search);
    const out = {};
    for (const k of FIELDS) if (p.get(k)) out[k] = p.get(k);
    return out;
  }

  function setParams(p) {
    const q = new URLSearchParams();
    for (const k of FIELDS) if (p[k]) q.set(k, p[k]);
    history.replaceState(null, "", location.pathname + (q.toString() ? "?" + q : ""));
  }

  function fillForm(p, facets) {
    const ops = form.elements.operator;
    const current = p.operator || "";
    ops.replaceChildren(el("option", {text: "all"}), ...facets.operators.map(o => el("option", {text: o})));
    ops.options[0].value = "";
    ops.value = current;
    for (const k of ["color", "status", "gen_min", "gen_max", "limit"]) if (form.elements[k]) form.elements[k].value = p[k] || (k === "color" ? "score" : "");
    const unfocus = document.getElementById("unfocus");
    unfocus.hidden = !p.root;
  }

  function colourOf(n, mode, facets, lo, hi) {
    if (mode === "op") return category(n.op, facets.operators);
    if (mode === "island") return category(n.island, facets.islands);
    if (mode === "pv") return n.pv === null ? "#bbbbbb" : category(n.pv, facets.policy_versions);
    if (n.status !== "ok" || n.score === null) return n.status ? "#9a9a9a" : "#ffffff";
    return ramp(hi > lo ? (n.score - lo) / (hi - lo) : 1);
  }

  function toItem(n, mode, facets, lo, hi) {
    const failed = n.status !== null && n.status !== "ok";
    const item = {
      name: short(n.id), value: n.score, node: n, children: [],
      symbol: n.extra_parents.length ? "diamond" : (n.context ? "emptyCircle" : "circle"),
      symbolSize: n.best ? 16 : (n.hidden > 0 ? Math.min(18, 7 + 2.2 * Math.log2(1 + n.hidden)) : 7),
      itemStyle: {color: colourOf(n, mode, facets, lo, hi), opacity: n.context ? 0.3 : (failed ? 0.35 : 1),
                  borderColor: n.best_path ? "#d62728" : (n.status === null ? "#555" : "rgba(0,0,0,0.35)"),
                  borderWidth: n.best_path ? 2.5 : 0.6},
    };
    if (n.best_path) item.lineStyle = {color: "#d62728", width: 3, opacity: 1};
    else if (failed || n.context) item.lineStyle = {opacity: 0.3};
    if (n.best) item.label = {show: true, position: "right", formatter: "best " + fmt(n.score, 4), color: "#d62728", fontWeight: "bold"};
    return item;
  }

  /* A drawn leaf whose descendants were left out (the page's node limit cut the tree there) says
     how many: "+N deeper" next to it, so a cut is never mistaken for the end of a lineage. */
  function markCuts(items) {
    for (const item of items) {
      const n = item.node;
      if (!n || item.children.length || !(n.hidden > 0)) continue;
      const text = "+" + n.hidden + " deeper";
      item.label = n.best ? {...item.label, formatter: item.label.formatter + "  " + text}
                          : {show: true, position: "right", formatter: text, color: "#666", fontSize: 10};
    }
  }

  function build(nodes, mode, facets) {
    const scores = nodes.filter(n => n.status === "ok" && n.score !== null).map(n => n.score);
    const lo = scores.length ? Math.min(...scores) : 0, hi = scores.length ? Math.max(...scores) : 1;
    const byId = new Map(), roots = [];
    for (const n of nodes) byId.set(n.id, toItem(n, mode, facets, lo, hi));
    for (const n of nodes) {
      const item = byId.get(n.id);
      if (n.parent && byId.has(n.parent)) byId.get(n.parent).children.push(item); else roots.push(item);
    }
    markCuts(byId.values());
    renderLegend(mode, facets, lo, hi);
    if (roots.length === 1) return roots[0];
    return {name: data.run_name, children: roots, symbol: "rect", symbolSize: 8, itemStyle: {color: "#444"}, node: null};
  }

  function renderLegend(mode, facets, lo, hi) {
    const box = document.getElementById("legend");
    const sw = (color, text, cls) => { const s = el("span", {class: "sw " + (cls || "")}); s.style.background = color; return el("span", {class: "key"}, s, text); };
    const keys = mode === "op" ? facets.operators : mode === "island" ? facets.islands : mode === "pv" ? facets.policy_versions : null;
    const items = keys ? keys.map(k => sw(category(k, keys), String(k)))
      : [sw(ramp(0), "score " + fmt(lo, 4)), sw(ramp(0.5), "…"), sw(ramp(1), fmt(hi, 4))];
    items.push(sw("#9a9a9a", "failed (dimmed)", "dim"), sw("#ffffff", "not evaluated"), sw("#d62728", "best path"),
               el("span", {class: "key", text: "◆ crossover · ○ kept for context · larger = hidden descendants"}));
    box.replaceChildren(...items);
  }

  function tooltip(p) {
    const n = p.data && p.data.node;
    if (!n) return tipBox(String(p.name), [["programs", data.total]]);
    const rows = [["status", n.status || "not evaluated"], ["score", n.score], ["generation", n.gen], ["operator", n.op],
                  ["island", n.island], ["policy version", n.pv]];
    if (n.hidden) rows.push(["hidden descendants", n.hidden]);
    if (n.extra_parents.length) rows.push(["other parents", n.extra_parents.map(short).join(", ")]);
    return tipBox(short(n.id) + (n.best ? " (best)" : ""), rows);
  }

  function showNode(n) {
    const side = document.getElementById("node");
    if (!n) return;
    const p = params();
    const focus = new URLSearchParams({...p, root: n.id});
    side.replaceChildren(
      el("h3", {}, programLink(n.id, short(n.id))),
      el("p", {}, el("span", {class: "status s-" + (n.status || "pending"), text: n.status || "not evaluated"}), " score ", fmt(n.score)),
      el("p", {text: "generation " + n.gen + " · " + n.op + " · island " + fmt(n.island) + " · policy " + fmt(n.pv)}),
      el("p", {text: n.hidden ? n.hidden + " descendants not drawn" : "every descendant drawn"}),
      ...n.extra_parents.map(x => el("p", {}, "crossover parent ", programLink(x))),
      el("p", {}, el("a", {href: location.pathname + "?" + focus, id: "focus-link", text: "focus on this subtree"})),
      el("p", {}, el("a", {href: programHref(n.id), text: "open program →"})));
  }

  function draw() {
    const mode = params().color || "score";
    const root = build(data.nodes, mode, data.facets);
    chart.setOption({
      animation: false,
      tooltip: {trigger: "item", confine: true, formatter: tooltip},
      series: [{type: "tree", id: "lineage", data: [root], orient: "LR", layout: "orthogonal", roam: true,
                top: "3%", bottom: "3%", left: "3%", right: "10%", initialTreeDepth: -1, expandAndCollapse: false,
                label: {show: false}, leaves: {label: {show: false}},
                lineStyle: {color: "#9db0c8", width: 1, curveness: 0.5}, emphasis: {focus: "ancestor"}}],
    }, {notMerge: true});
    const best = data.best ? " · best " + fmt(data.best_score) + " (" + short(data.best) + ")" : "";
    const focus = data.root ? " · focused on " + short(data.root) : "";
    document.getElementById("tree-summary").textContent =
      "drawing " + data.shown + " of " + data.in_scope + " programs (" + data.matching + " match the filters" +
      (data.truncated ? "; the rest are aggregated into their ancestors" : "") + ")" + focus + best;
  }

  async function loadTree() {
    const p = params();
    const q = new URLSearchParams();
    for (const k of FIELDS) if (k !== "color" && p[k]) q.set(k, p[k]);
    data = await getJSON("/api/runs/" + encodeURIComponent(runId) + "/tree?" + q);
    fillForm(p, data.facets);
    draw();
  }

  async function main() {
    const runsShown = renderRuns();  // in parallel with the tree below
    if (!runId) {
      const seen = await runsShown;
      poll("/api/runs", async () => {
        const {runs} = await renderRuns();
        if (runs.length) location.assign("/runs/" + encodeURIComponent(runs[0].id));
      }, seen);
      return;
    }
    chart = window.QD.chart("tree");
    chart.on("finished", () => {
      if (!data) return;
      draws += 1;
      document.body.dataset.treeReady = String(draws);
      document.body.dataset.treeNodes = String(data.shown);
      document.body.dataset.treePrograms = String(data.total);
    });
    chart.on("click", e => { if (e.data && e.data.node) showNode(e.data.node); });
    chart.on("dblclick", e => { if (e.data && e.data.node) location.assign(programHref(e.data.node.id)); });
    form.addEventListener("change", () => {
      const p = params();
      for (const k of ["color", "status", "operator", "gen_min", "gen_max", "limit"]) p[k] = form.elements[k].value;
      setParams(p);
      if (Object.keys(p).length && data && p.color !== undefined) loadTree();
    });
    form.addEventListener("submit", e => e.preventDefault());
    document.getElementById("fit").addEventListener("click", () => draw());
    document.getElementById("unfocus").addEventListener("click", e => { e.preventDefault(); const p = params(); delete p.root; setParams(p); loadTree(); });
    const stampUrl = "/api/runs/" + encodeURIComponent(runId) + "/stamp";
    const stamp = await window.QD.stampThen(stampUrl, loadTree);
    await runsShown;
    poll(stampUrl, async () => { await renderRuns(); await loadTree(); }, stamp);
  }

  main().catch(err => {
    const s = document.getElementById("tree-summary") || document.querySelector("main");
    if (s) s.textContent = "error: " + err.message;
  });
})();
