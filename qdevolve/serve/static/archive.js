/* The archive page: feature-space heatmap of the elites and best/QD-score curves. */
"use strict";
(() => {
  const {el, getJSON, fmt, short, programHref, tipBox, ramp, poll} = window.QD;
  const runId = window.QD.runId;
  const heat = window.QD.chart("heatmap"), curves = window.QD.chart("curves");
  let renders = 0, front = null;

  /* Several objectives: every ok program at its first two objectives, the archive's members
     outlined, its non-dominated members (the front) filled and joined by a line. */
  function drawPareto(p) {
    const card = document.getElementById("pareto-card");
    card.hidden = false;
    if (front === null) {
      front = window.QD.chart("pareto");
      front.on("click", e => { if (e.data && e.data.point) location.assign(programHref(e.data.point.program_id)); });
    }
    const [ax, ay] = p.axes, dir = p.objectives;
    const tip = q => tipBox("program " + short(q.program_id) + (q.front ? " (front)" : q.member ? " (archive)" : ""),
                            Object.keys(dir).map(n => [n + " (" + dir[n] + ")", q.objectives[n]]));
    const item = q => ({value: [q.objectives[ax], q.objectives[ay]], point: q,
                        ...(q.member && !q.front ? {itemStyle: {borderWidth: 2}} : {})});
    const others = p.points.filter(q => !q.front), best = p.points.filter(q => q.front);
    const line = best.map(item).sort((a, b) => a.value[0] - b.value[0]);
    front.setOption({
      animation: false,
      tooltip: {confine: true, formatter: e => e.data && e.data.point ? tip(e.data.point) : ""},
      legend: {data: ["programs", "Pareto front"], top: 0},
      grid: {left: 80, right: 30, top: 30, bottom: 60},
      xAxis: {type: "value", name: ax + " (" + dir[ax] + ")", nameLocation: "middle", nameGap: 30, scale: true},
      yAxis: {type: "value", name: ay + " (" + dir[ay] + ")", nameLocation: "middle", nameGap: 55, scale: true},
      series: [
        {name: "programs", type: "scatter", symbolSize: 7, data: others.map(item),
         itemStyle: {color: "#bbbbbb", borderColor: "#4e79a7", borderWidth: 0}},
        {name: "Pareto front", type: "line", step: false, symbol: "circle", symbolSize: 12, data: line,
         lineStyle: {color: "#d62728", width: 1.5}, itemStyle: {color: "#d62728"}},
      ],
    }, {notMerge: true});
    document.getElementById("pareto-summary").textContent =
      p.n_front + " programs on the front of " + p.n_members + " in the archive · " + p.points.length +
      " programs plotted · " + Object.keys(dir).map(n => n + " " + dir[n]).join(", ");
    document.body.dataset.paretoFront = String(p.n_front);
    document.body.dataset.paretoPoints = String(p.points.length);
  }

  function eliteTip(e, dims) {
    const rows = [["score", e.score], ["island", e.island]];
    for (const d of dims) rows.push([d, e.features ? e.features[d] : null]);
    return tipBox("elite " + short(e.program_id), rows);
  }

  /* The colour scale of the heatmap: its ends, the decimals that tell them apart (the scale's
     labels are drawn with a fixed number of decimals, 0 by default), and the caption shown
     under the chart; one value in every filled cell is said so, not drawn as a range. */
  function scoreScale(scores) {
    if (!scores.length) return {lo: 0, hi: 1, precision: 0, single: false, caption: "no filled cell"};
    const lo = Math.min(...scores), hi = Math.max(...scores), span = hi - lo;
    if (!(span > 0)) {
      const mag = Math.abs(lo) > 0 ? Math.floor(Math.log10(Math.abs(lo))) : 0;
      const precision = Math.min(10, Math.max(0, 3 - mag));
      return {lo, hi: lo + Math.max(Math.abs(lo), 1) * 1e-9, precision, single: true,
              caption: "colour: every filled cell scores " + lo.toFixed(precision)};
    }
    const precision = Math.min(10, Math.max(0, Math.ceil(-Math.log10(span / 100))));
    return {lo, hi, precision, single: false,
            caption: "colour: best score per cell, from " + lo.toFixed(precision) + " (lowest) to " +
                     hi.toFixed(precision) + " (highest)"};
  }

  function drawGrid(a) {
    const g = a.grid, dims = a.feature_dimensions;
    const scale = scoreScale(g.cells.map(c => c.score));
    const lo = scale.lo, hi = scale.hi;
    document.getElementById("heat-scale").textContent = scale.caption;
    heat.setOption({
      animation: false,
      tooltip: {confine: true, formatter: p => eliteTip(p.data.elite, dims)},
      grid: {left: 110, right: 30, top: 20, bottom: 140},
      xAxis: {type: "category", name: dims[0], nameLocation: "middle", nameGap: 62, data: g.labels[0],
              axisLabel: {rotate: 40}, splitArea: {show: true}},
      yAxis: {type: "category", name: dims[1], nameLocation: "middle", nameGap: 90, data: g.labels[1], splitArea: {show: true}},
      visualMap: {min: lo, max: hi, calculable: !scale.single, precision: scale.precision, orient: "horizontal",
                  left: "center", bottom: 0, inRange: {color: (scale.single ? [0.5, 0.5] : [0, 0.25, 0.5, 0.75, 1]).map(ramp)},
                  text: scale.single ? ["", "every cell " + lo.toFixed(scale.precision)]
                                     : [hi.toFixed(scale.precision) + " best", "score " + lo.toFixed(scale.precision)]},
      series: [{type: "heatmap", data: g.cells.map(c => ({value: [c.x, c.y, c.score], elite: c})),
                label: {show: g.bins[0] * g.bins[1] <= 144, formatter: p => fmt(p.value[2], 3), fontSize: 10}}],
    }, {notMerge: true});
  }

  function drawScatter(a) {
    const dims = a.feature_dimensions;
    document.getElementById("heat-scale").textContent = "";
    const one = dims.length < 2;
    const pts = a.elites.filter(e => e.features && typeof e.features[dims[0]] === "number");
    heat.setOption({
      animation: false,
      tooltip: {confine: true, formatter: p => eliteTip(p.data.elite, dims)},
      grid: {left: 80, right: 30, top: 20, bottom: 60},
      xAxis: {type: "value", name: dims[0] || "feature", nameLocation: "middle", nameGap: 30, scale: true},
      yAxis: {type: "value", name: one ? "score" : dims[1], nameLocation: "middle", nameGap: 55, scale: true},
      series: [{type: "scatter", symbolSize: 9,
                data: pts.map(e => ({value: [e.features[dims[0]], one ? e.score : e.features[dims[1]]], elite: e,
                                     itemStyle: {color: ramp(0.7)}}))}],
    }, {notMerge: true});
  }

  function drawCurves(a) {
    curves.setOption({
      animation: false,
      tooltip: {trigger: "axis", formatter: ps => tipBox("after " + ps[0].value[0] + " evaluations",
                                                          ps.map(p => [p.seriesName, p.value[1]]))},
      legend: {data: ["best score", "QD-score"], top: 0},
      grid: {left: 70, right: 70, top: 30, bottom: 45},
      xAxis: {type: "value", name: "evaluations", nameLocation: "middle", nameGap: 28, min: 0},
      yAxis: [{type: "value", name: "best score", scale: true}, {type: "value", name: "QD-score", scale: true}],
      series: [{name: "best score", type: "line", step: "end", showSymbol: false, data: a.best_curve, color: "#d62728"},
               {name: "QD-score", type: "line", step: "end", showSymbol: false, yAxisIndex: 1, data: a.qd_curve, color: "#4e79a7"}],
    }, {notMerge: true});
  }

  async function load() {
    const a = await getJSON("/api/runs/" + encodeURIComponent(runId) + "/archive");
    if (a.grid) drawGrid(a); else drawScatter(a);
    if (a.pareto) drawPareto(a.pareto);
    drawCurves(a);
    const best = a.best_curve.length ? a.best_curve[a.best_curve.length - 1][1] : null;
    const qd = a.qd_curve.length ? a.qd_curve[a.qd_curve.length - 1][1] : null;
    document.getElementById("archive-summary").textContent =
      (a.archive || "archive") + " · " + a.n_elites + " elites" +
      (a.grid ? " · " + a.grid.cells.length + " of " + a.grid.bins[0] * a.grid.bins[1] + " cells filled (" +
                fmt(100 * a.grid.coverage, 3) + "%)" : " · feature space (no grid)") +
      " · " + a.evaluations + " evaluations · best " + fmt(best) + " · QD-score " + fmt(qd);
    renders += 1;
    document.body.dataset.archiveReady = String(renders);
    document.body.dataset.archiveElites = String(a.n_elites);
  }

  heat.on("click", e => { if (e.data && e.data.elite) location.assign(programHref(e.data.elite.program_id)); });
  const stampUrl = "/api/runs/" + encodeURIComponent(runId) + "/stamp";
  window.QD.stampThen(stampUrl, load).then(stamp => poll(stampUrl, load, stamp))
    .catch(err => { document.getElementById("archive-summary").textContent = "error: " + err.message; });
})();
