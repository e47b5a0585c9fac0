// Live parts of the console's pages, over server-sent events carrying rendered HTML:
// [data-sse] elements are replaced by each event; the messages page's "follow"
// checkbox appends new record rows as they come.
"use strict";

const MAX_FOLLOWED_ROWS = 1000;
const streams = [];

function open(url) {
  const es = new EventSource(url);
  streams.push(es);
  return es;
}

function swapLive(el) {
  const status = document.getElementById("live-status");
  const es = open(el.dataset.sse);
  es.addEventListener(el.dataset.sseEvent || "message", (e) => {
    el.innerHTML = e.data;
    if (status) status.classList.remove("stale");
  });
  es.onerror = () => { if (status) status.classList.add("stale"); };
}

function follow(box) {
  const status = document.getElementById("follow-status");
  const body = document.querySelector("#records tbody");
  let es = null;
  box.addEventListener("change", () => {
    if (es) { es.close(); es = null; }
    if (!box.checked) { status.textContent = "off"; return; }
    status.textContent = "connecting";
    es = open(box.dataset.follow);
    es.addEventListener("status", (e) => { status.textContent = e.data; });
    es.addEventListener("records", (e) => {
      body.insertAdjacentHTML("beforeend", e.data);
      while (body.rows.length > MAX_FOLLOWED_ROWS) body.deleteRow(0);
      const last = body.rows[body.rows.length - 1];
      if (last) box.dataset.follow = box.dataset.follow.replace(/offset=\d+/, "offset=" + (Number(last.dataset.offset) + 1));
    });
    // EventSource reconnects by itself; say so rather than stay silent.
    es.onerror = () => { status.textContent = "reconnecting"; };
  });
}

// Closed before the page goes, so leaving a page is not a failed request.
window.addEventListener("pagehide", () => streams.forEach((es) => es.close()));

document.addEventListener("DOMContentLoaded", () => {
  document.querySelectorAll("[data-sse]").forEach(swapLive);
  const box = document.getElementById("follow");
  if (box) follow(box);
});
