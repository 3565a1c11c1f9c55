/* The policy page: per version pass@k and effective answers (stored by qdevolve eval-policy),
   loss, KL, entropy, D_n, pass@1 of the rollouts, programs produced. */
"use strict";
(() => {
  const {el, getJSON, fmt, tipBox, poll} = window.QD;
  const runId = window.QD.runId;
  const train = window.QD.chart("policy-train"), outcome = window.QD.chart("policy-outcome");
  const evalChart = window.QD.chart("policy-evals");
  let renders = 0;

  function series(rows, key, name, extra) {
    return {name, type: "line", data: rows.map(r => [r.version, r[key]]), connectNulls: true, ...(extra || {})};
  }
  const axisTip = ps => tipBox("version " + ps[0].value[0], ps.map(p => [p.seriesName, p.value[1]]));

  async function load() {
    const d = await getJSON("/api/runs/" + encodeURIComponent(runId) + "/policy");
    const rows = d.versions;
    const summary = document.getElementById("policy-summary");
    const charts = document.getElementById("policy-charts"), table = document.getElementById("versions");
    charts.hidden = table.hidden = !rows.length;  // no policy: no empty charts, the page says so
    if (!rows.length) {
      summary.textContent = "This run trained no policy, so it has no policy versions to chart. A joined run " +
        "(qdevolve run EXAMPLE --policy tiny, or a train: section in config.yaml) records one version per trainer step.";
      renders += 1;
      document.body.dataset.policyReady = String(renders);
      document.body.dataset.policyVersions = "0";
      return;
    }
    summary.textContent = rows.length + " policy versions · objective " + (rows[rows.length - 1].objective || "-") +
      " · pass@1 counts a rollout correct when its reward ≥ " + fmt(d.correct_threshold);
    const xAxis = {type: "value", name: "policy version", nameLocation: "middle", nameGap: 28, minInterval: 1};
    drawEvals(d.evals || {rows: [], ks: []}, xAxis);
    train.setOption({
      animation: false, tooltip: {trigger: "axis", formatter: axisTip}, legend: {top: 0},
      grid: {left: 70, right: 70, top: 30, bottom: 45}, xAxis,
      yAxis: [{type: "value", name: "loss", scale: true}, {type: "value", name: "KL / entropy", scale: true}],
      series: [series(rows, "loss", "loss"), series(rows, "kl", "KL", {yAxisIndex: 1}),
               series(rows, "entropy", "entropy", {yAxisIndex: 1})],
    }, {notMerge: true});
    outcome.setOption({
      animation: false, tooltip: {trigger: "axis", formatter: axisTip}, legend: {top: 0},
      grid: {left: 70, right: 70, top: 30, bottom: 45}, xAxis,
      yAxis: [{type: "value", name: "D_n / programs", scale: true}, {type: "value", name: "pass@1", min: 0, max: 1}],
      series: [series(rows, "D_n", "D_n"), {name: "programs", type: "bar", data: rows.map(r => [r.version, r.programs])},
               series(rows, "pass@1", "pass@1", {yAxisIndex: 1})],
    }, {notMerge: true});
    train.resize(); outcome.resize();  // drawn while hidden (a run whose first version just arrived)
    const tbody = document.querySelector("#versions tbody");
    tbody.replaceChildren(...rows.map(r => el("tr", {version: r.version},
      el("td", {class: "num", text: r.version}), el("td", {class: "num", text: fmt(r.parent_version)}),
      el("td", {text: r.objective || "-"}), el("td", {class: "num", text: fmt(r.step)}),
      ...["loss", "kl", "entropy", "D_n", "pass@1"].map(k => el("td", {class: "num", text: fmt(r[k], 4)})),
      el("td", {class: "num", text: r.rollouts}),
      el("td", {class: "num"}, el("a", {href: "/runs/" + encodeURIComponent(runId) + "?pv=" + r.version, text: r.programs})),
      el("td", {class: "num", text: r.ok}), el("td", {class: "num", text: fmt(r.best_score)}),
      el("td", {class: "num", text: fmt((r.metrics || {}).targets_solved)}))));  // train.solved_by (a problem suite)
    renders += 1;
    document.body.dataset.policyReady = String(renders);
    document.body.dataset.policyVersions = String(rows.length);
  }

  function drawEvals(ev, xAxis) {
    const box = document.getElementById("policy-evals"), note = document.getElementById("policy-evals-summary");
    const rows = ev.rows || [];
    box.hidden = !rows.length;
    document.body.dataset.policyEvals = String(rows.length);
    if (!rows.length) {
      note.textContent = "No version has been scored yet: qdevolve eval-policy --task TASK --db DB --all stores " +
        "pass@k and effective answers per version, charted here.";
      return;
    }
    note.textContent = "Scored by eval-policy (" + ev.key + "): pass@k and effective answers per version.";
    evalChart.setOption({
      animation: false, tooltip: {trigger: "axis", formatter: axisTip}, legend: {top: 0},
      grid: {left: 70, right: 70, top: 30, bottom: 45}, xAxis,
      yAxis: [{type: "value", name: "pass@k", min: 0, max: 1}, {type: "value", name: "effective answers", scale: true}],
      series: [...ev.ks.map(k => series(rows, "pass@" + k, "pass@" + k)),
               series(rows, "effective_outcomes", "effective answers", {yAxisIndex: 1, lineStyle: {type: "dashed"}})],
    }, {notMerge: true});
    evalChart.resize();
  }

  const stampUrl = "/api/runs/" + encodeURIComponent(runId) + "/stamp";
  window.QD.stampThen(stampUrl, load).then(stamp => poll(stampUrl, load, stamp))
    .catch(err => { document.getElementById("policy-summary").textContent = "error: " + err.message; });
})();
