// Labelling page: keyboard shortcuts (one key press, one action), the shortcuts overlay,
// the lease countdown with a warning before it runs out (``data-warn-seconds`` on the lease
// line) and a way on when it has, heartbeat while the specialist works; the flag form's keys.
(function () {
  "use strict";
  const HEARTBEAT_MS = 30000;
  let lastActivity = Date.now();
  let lastBeat = 0;

  function work() { return document.getElementById("work"); }
  function dialog() { return document.getElementById("shortcuts"); }

  function toggleHelp() {
    const d = dialog();
    if (!d) return;
    if (d.open) d.close(); else d.showModal();
  }

  // The flag form (key !, every study type) keeps its keys: Esc closes it, Ctrl+Enter (or
  // its button) sends it, and nothing typed there reaches the page's answer keys (this
  // listener runs first, in the capture phase).
  function flagClose() {
    const box = document.getElementById("flag-box");
    if (box) box.innerHTML = "";
  }
  document.addEventListener("keydown", function (event) {
    const form = event.target.closest && event.target.closest("form.flag-form");
    if (!form) return;
    event.stopPropagation();
    if (event.key === "Escape") { event.preventDefault(); flagClose(); }
    else if (event.key === "Enter" && (event.ctrlKey || event.metaKey)) {
      event.preventDefault();
      form.requestSubmit();
    } else if (event.key === "Enter" && event.target.tagName === "INPUT") {
      event.preventDefault();  // a radio button's Enter would send the flag before the note
    }
  }, true);
  document.addEventListener("click", function (event) {
    if (event.target.closest && event.target.closest("[data-flag-cancel]")) flagClose();
  });

  document.addEventListener("keydown", function (event) {
    lastActivity = Date.now();
    // A held key repeats keydown events: each would answer a query nobody read.
    if (event.repeat) return;
    if (event.ctrlKey || event.metaKey || event.altKey) return;
    const tag = (event.target.tagName || "").toLowerCase();
    // Typing goes to text fields; radio buttons and check boxes keep the keys (the rating
    // page of assisted studies chooses with them).
    const typing = tag === "input" && !["radio", "checkbox"].includes(event.target.type);
    if (typing || tag === "textarea" || tag === "select") return;
    if (event.key === "?") { event.preventDefault(); toggleHelp(); return; }
    if (dialog() && dialog().open) return;  // Esc closes it (the browser's own handling)
    if (tag === "summary" && event.key === "Enter") return;  // opens the guidelines
    const key = event.key === "Enter" ? "Enter" : event.key.toLowerCase();
    // A button, or the label of a radio button (clicking it chooses the option).
    const button = work() && work().querySelector('[data-key="' + key + '"]:not(:disabled)');
    if (button) {
      event.preventDefault();
      // htmx enables swapped-in forms when the swap settles (some ms later): a key pressed
      // in between would submit the form natively (a full page load). Enable it now.
      if (window.htmx) htmx.process(button.closest("form") || button);
      button.click();
    }
  });
  ["mousemove", "click", "scroll"].forEach(function (name) {
    document.addEventListener(name, function () { lastActivity = Date.now(); }, { passive: true });
  });
  const helpOpen = document.getElementById("help-open");
  if (helpOpen) helpOpen.addEventListener("click", toggleHelp);

  function expire(lease) {
    if (lease.classList.contains("expired")) return;
    lease.classList.add("expired");
    lease.querySelector(".countdown").textContent = "time is up";
    const card = lease.closest("article.query");
    if (!card) return;
    card.classList.add("expired");
    card.querySelectorAll("form.answers button, form.answers input, form.skip button")
      .forEach(function (b) { b.disabled = true; });
    // typed text stays readable and can be copied (a disabled box cannot be selected)
    card.querySelectorAll("form.answers textarea").forEach(function (a) { a.readOnly = true; });
    const warning = lease.querySelector(".lease-warning");
    if (warning) warning.hidden = true;
    const next = card.querySelector(".expired-next");
    if (next) {
      next.hidden = false;
      next.querySelectorAll("button").forEach(function (b) { b.disabled = false; });
    }
  }

  function tick() {
    const lease = document.getElementById("lease");
    if (lease) {
      const left = Math.round((Date.parse(lease.dataset.expires) - Date.now()) / 1000);
      const label = lease.querySelector(".countdown");
      if (left <= 0) {
        expire(lease);
      } else {
        label.textContent = Math.floor(left / 60) + ":" + String(left % 60).padStart(2, "0") + " left";
        const warnAt = Number(lease.dataset.warnSeconds || 0);
        if (warnAt && left <= warnAt && !lease.classList.contains("ending")) {
          lease.classList.add("ending");
          const warning = lease.querySelector(".lease-warning");
          if (warning) warning.hidden = false;
        }
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
