// Rating page of assisted studies (label.js does the lease, heartbeat, timer, answer keys
// and the guard of typed text): keys that expand the AI fact-check's sections, the key of
// the comment box, and the record of
// what the rater does with the fact-check (sections expanded or collapsed, links opened),
// posted to the server, which stamps its own time.
(function () {
  "use strict";
  const SECTION_KEYS = { r: "reasoning", j: "judgments", v: "evidence", g: "search", f: "confidence" };
  let shownAt = Date.now();

  function card() { return document.querySelector("#work article.rating"); }

  function csrf() {
    try { return JSON.parse(document.body.getAttribute("hx-headers"))["X-CSRFToken"]; } catch (e) { return ""; }
  }

  function post(event) {
    const c = card();
    if (!c || !c.dataset.eventsUrl) return;
    event.client_ms = Math.max(0, Math.round(Date.now() - shownAt));
    fetch(c.dataset.eventsUrl, {
      method: "POST", credentials: "same-origin", keepalive: true,
      headers: { "Content-Type": "application/json", "X-CSRFToken": csrf() },
      body: JSON.stringify(event),
    }).catch(function () { /* a lost event is not worth an error on the rater's screen */ });
  }

  function traceIndex(el) {
    const t = el.closest("[data-trace]");
    return t && t.closest(".ai-trace.debate") ? Number(t.dataset.trace) : null;
  }

  document.addEventListener("toggle", function (event) {
    const details = event.target;
    if (!(details instanceof HTMLDetailsElement) || !details.dataset.section) return;
    if (!details.closest(".ai-panel") || !card()) return;
    const e = { kind: details.open ? "expand" : "collapse", section: details.dataset.section };
    const trace = traceIndex(details);
    if (trace !== null) e.trace = trace;
    post(e);
  }, true);

  function onLink(event) {
    if (event.type === "auxclick" && event.button !== 1) return;  // middle click: new tab
    const link = event.target.closest && event.target.closest(".ai-panel a[data-link]");
    if (!link || !card()) return;
    const e = { kind: "open_link", section: link.dataset.link.split(":")[0], target: link.dataset.link };
    const trace = traceIndex(link);
    if (trace !== null) e.trace = trace;
    post(e);
  }
  document.addEventListener("click", onLink);
  document.addEventListener("auxclick", onLink);

  // Keys typed in the comment box never get here (label.js's guard keeps them, with Esc and
  // Ctrl+Enter); m moves into it, in every arm.
  document.addEventListener("keydown", function (event) {
    if (event.repeat || event.ctrlKey || event.metaKey || event.altKey) return;
    const dialog = document.getElementById("shortcuts");
    if (dialog && dialog.open) return;
    const key = event.key.toLowerCase();
    const c = card();
    if (!c) return;
    if (key === "m") {
      const box = c.querySelector("textarea[name=comment]");
      if (box) { event.preventDefault(); box.focus(); }
      return;
    }
    const section = SECTION_KEYS[key];
    if (section) {
      const all = c.querySelectorAll('.ai-panel details[data-section="' + section + '"]');
      if (!all.length) return;
      event.preventDefault();
      const open = !all[0].open;
      all.forEach(function (d) { d.open = open; });
    }
  });

  // "Can't confidently assess" asks no confidence: the confidence choices are switched off
  // (and cleared); any other label makes them required (the server checks the same).
  function confidenceFollowLabel(form) {
    const box = form && form.querySelector("fieldset.confidence");
    if (!box || box.hasAttribute("data-preview")) return;
    const label = form.querySelector("input[name=label]:checked");
    const notAsked = !!label && label.value === "cant_assess";
    box.disabled = notAsked;
    box.classList.toggle("not-asked", notAsked);
    box.querySelectorAll("input[name=confidence]").forEach(function (input) {
      input.required = !notAsked;
      if (notAsked) input.checked = false;
    });
  }
  document.addEventListener("change", function (event) {
    if (event.target.name === "label") confidenceFollowLabel(event.target.form);
  });
  function confidenceReady() {
    const c = card();
    if (c) confidenceFollowLabel(c.querySelector("form.rating-form"));
  }

  document.body.addEventListener("htmx:afterSwap", function () {
    shownAt = Date.now();
    confidenceReady();
  });
  document.addEventListener("DOMContentLoaded", confidenceReady);
})();
