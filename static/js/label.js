// Labelling page: keyboard shortcuts, lease countdown, heartbeat while the specialist is active.
(function () {
  "use strict";
  const HEARTBEAT_MS = 30000;
  let lastActivity = Date.now();
  let lastBeat = 0;

  function work() { return document.getElementById("work"); }

  document.addEventListener("keydown", function (event) {
    lastActivity = Date.now();
    if (event.ctrlKey || event.metaKey || event.altKey) return;
    const tag = (event.target.tagName || "").toLowerCase();
    if (tag === "input" || tag === "textarea") return;
    const key = event.key === "Enter" ? "Enter" : event.key.toLowerCase();
    const button = work() && work().querySelector('button[data-key="' + key + '"]:not(:disabled)');
    if (button) { event.preventDefault(); button.click(); }
  });
  ["mousemove", "click", "scroll"].forEach(function (name) {
    document.addEventListener(name, function () { lastActivity = Date.now(); }, { passive: true });
  });

  function tick() {
    const lease = document.getElementById("lease");
    if (lease) {
      const left = Math.round((Date.parse(lease.dataset.expires) - Date.now()) / 1000);
      const label = lease.querySelector(".countdown");
      if (left <= 0) {
        lease.classList.add("expired");
        label.textContent = "expired — your answer will not be accepted; get the next query";
        work().querySelectorAll("button.answer").forEach(function (b) { b.disabled = true; });
      } else {
        label.textContent = Math.floor(left / 60) + ":" + String(left % 60).padStart(2, "0");
        const active = Date.now() - lastActivity < HEARTBEAT_MS * 2;
        if (active && Date.now() - lastBeat > HEARTBEAT_MS) { lastBeat = Date.now(); beat(lease); }
      }
    }
    const timer = document.querySelector(".timer");
    if (timer && timer.dataset.started) {
      timer.textContent = Math.max(0, Math.round((Date.now() - Date.parse(timer.dataset.started)) / 1000)) + " s";
    }
  }

  function beat(lease) {
    htmx.ajax("POST", lease.dataset.heartbeatUrl, { source: lease, target: "#lease", swap: "outerHTML" });
  }

  document.body.addEventListener("htmx:afterSwap", function () { lastBeat = Date.now(); tick(); });
  setInterval(tick, 1000);
  tick();
})();
