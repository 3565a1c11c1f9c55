/* qdevolve serve: shared helpers. Everything from the database is set as text
   (textContent / text nodes), never parsed as HTML. */
"use strict";
window.QD = (() => {
  const body = document.body;
  const pollMs = Math.max(250, Number(body.dataset.poll) || 2000);

  function el(tag, props, ...kids) {
    const e = document.createElement(tag);
    for (const [k, v] of Object.entries(props || {})) {
      if (v === undefined || v === null) continue;
      if (k === "text") e.textContent = String(v);
      else if (k === "class") e.className = v;
      else if (k === "href") e.setAttribute("href", v);
      else if (k === "title") e.title = String(v);
      else e.dataset[k] = String(v);
    }
    for (const kid of kids) {
      if (kid === null || kid === undefined) continue;
      e.append(kid instanceof Node ? kid : document.createTextNode(String(kid)));
    }
    return e;
  }

  async function getJSON(url) {
    const r = await fetch(url, {headers: {"Accept": "application/json"}, cache: "no-store"});
    const data = await r.json();
    if (!r.ok) throw new Error(data && data.error ? data.error : ("HTTP " + r.status));
    return data;
  }

  function fmt(v, digits) {
    if (v === null || v === undefined) return "-";
    if (typeof v === "number") {
      if (Number.isInteger(v)) return String(v);
      return Number(v.toPrecision(digits || 5)).toString();
    }
    return String(v);
  }

  function short(id) { return String(id || "").slice(0, 12); }
  function programHref(id) { return "/programs/" + encodeURIComponent(id); }
  function programLink(id, text) { return el("a", {href: programHref(id), text: text || short(id)}); }
  function when(ts) { return ts ? new Date(ts * 1000).toISOString().replace("T", " ").slice(0, 19) : "-"; }

  /** A tooltip body: one line per [label, value] pair, all text. */
  function tipBox(title, rows) {
    const box = el("div", {class: "tip"}, el("b", {text: title}));
    for (const [k, v] of rows) box.append(el("div", {}, el("span", {class: "k", text: k + " "}), fmt(v)));
    return box;
  }

  const PALETTE = ["#4e79a7", "#f28e2b", "#59a14f", "#e15759", "#76b7b2", "#edc948", "#b07aa1",
                   "#ff9da7", "#9c755f", "#1f77b4", "#8c564b", "#17becf"];
  function category(key, keys) {
    const i = keys.indexOf(key);
    return i < 0 ? "#999999" : PALETTE[i % PALETTE.length];
  }
  const RAMP = [[68, 1, 84], [59, 82, 139], [33, 145, 140], [94, 201, 98], [253, 231, 37]];  // viridis stops
  function ramp(t) {
    t = Math.min(1, Math.max(0, Number.isFinite(t) ? t : 0));
    const x = t * (RAMP.length - 1), i = Math.min(RAMP.length - 2, Math.floor(x)), f = x - i;
    const c = RAMP[i].map((a, k) => Math.round(a + f * (RAMP[i + 1][k] - a)));
    return "rgb(" + c.join(",") + ")";
  }

  /** Poll `url` every data-poll ms; call onChange(data) when its JSON differs from the last answer.
      `initial` is the answer the page's data was read after (so a write in between is not missed);
      without it the first answer only sets the baseline. */
  function poll(url, onChange, initial) {
    let last = initial === undefined ? null : JSON.stringify(initial), ticks = 0;
    const live = document.getElementById("live");
    async function tick() {
      try {
        const data = await getJSON(url);
        const key = JSON.stringify(data);
        if (last !== null && key !== last) {
          ticks += 1;
          await onChange(data);
          if (live) live.dataset.updates = String(ticks);
        }
        last = key;
        if (live) { live.textContent = "live · checked " + new Date().toLocaleTimeString(); live.className = "live on"; }
      } catch (err) {
        if (live) { live.textContent = "offline: " + err.message; live.className = "live off"; }
      }
      setTimeout(tick, pollMs);
    }
    tick();
  }

  function chart(id) {
    const node = document.getElementById(id);
    const c = echarts.init(node, null, {renderer: "canvas"});
    window.addEventListener("resize", () => c.resize());
    return c;
  }

  /** The stamp at `url` now, then `load()`: pass the stamp to poll() so nothing written meanwhile is missed. */
  async function stampThen(url, load) {
    const stamp = await getJSON(url);
    await load();
    return stamp;
  }

  return {stampThen, el, getJSON, fmt, short, programHref, programLink, when, tipBox, category, ramp, poll, chart,
          runId: body.dataset.run || null, PALETTE};
})();
