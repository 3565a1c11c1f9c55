/* The program page: keeps status, score, reason and children current while the run writes. */
"use strict";
(() => {
  const {el, fmt, short, programLink, poll} = window.QD;
  const pid = document.body.dataset.program;

  function update(d) {
    const status = document.getElementById("status");
    status.textContent = d.status || "not evaluated yet";
    status.className = "status s-" + (d.status || "pending");
    document.getElementById("score").textContent = fmt(d.score);
    document.getElementById("reason").textContent = d.error || "-";
    const list = document.getElementById("children");
    const items = d.children.map(c => el("li", {}, programLink(c.id), " gen " + c.generation + " · " + c.operator + " · ",
      el("span", {class: "status s-" + (c.status || "pending"), text: c.status || "pending"}), " " + fmt(c.score)));
    list.replaceChildren(...(items.length ? items : [el("li", {class: "muted", text: "none yet"})]));
    document.body.dataset.liveChildren = String(d.children.length);
  }

  document.body.dataset.programReady = "1";
  // the server rendered the page before this poll's first answer: render from that answer too
  poll("/api/programs/" + encodeURIComponent(pid) + "/live", update, {});
})();
