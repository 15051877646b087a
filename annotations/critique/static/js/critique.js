// Critique task page: the keys of the answer form (label.js, loaded first, runs the lease
// countdown, the expired-lease switch, the shortcuts overlay and Enter). One key press,
// one action; keys do nothing while typing, except Esc (leave the text box) and
// Ctrl/Cmd+Enter (submit).
(function () {
  "use strict";

  function card() { return document.querySelector("#work article.critique-task"); }

  function pick(selector) {
    const c = card();
    const input = c && c.querySelector(selector);
    if (!input || input.disabled) return false;
    input.checked = true;
    input.dispatchEvent(new Event("change", { bubbles: true }));
    const label = input.closest("label");
    if (label) { label.classList.add("flash"); setTimeout(function () { label.classList.remove("flash"); }, 250); }
    return true;
  }

  function submit() {
    const c = card();
    const button = c && c.querySelector("form.critique-form button.submit:not(:disabled)");
    if (!button) return false;
    if (window.htmx) htmx.process(button.closest("form"));
    button.click();
    return true;
  }

  document.addEventListener("keydown", function (event) {
    if (event.repeat) return;
    const dialog = document.getElementById("shortcuts");
    if (dialog && dialog.open) return;
    const tag = (event.target.tagName || "").toLowerCase();
    const typing = tag === "textarea" || (tag === "input" && event.target.type === "text");
    if (event.key === "Enter" && (event.ctrlKey || event.metaKey)) {
      if (submit()) event.preventDefault();
      return;
    }
    if (typing) {
      if (event.key === "Escape") { event.preventDefault(); event.target.blur(); }
      return;
    }
    if (event.ctrlKey || event.metaKey || event.altKey) return;
    if (tag === "input" || tag === "select" || (tag === "button" && event.key.startsWith("Arrow"))) return;
    const c = card();
    if (!c) return;
    let done = false;
    if (event.key === "/") {
      const area = c.querySelector("textarea[name=reasoning]");
      if (area && !area.disabled) { area.focus(); done = true; }
    } else if (event.key === "x") {
      const levels = c.querySelectorAll("details.chain-level");
      const open = Array.prototype.some.call(levels, function (d) { return d.open; });
      levels.forEach(function (d) { d.open = !open; });
      done = levels.length > 0;
    } else if (event.key.startsWith("Arrow")) {
      done = pick('input[data-key-choice="' + event.key + '"]');
    } else if (/^[1-5]$/.test(event.key)) {
      done = pick('input[data-key-confidence="' + event.key + '"]');
    } else if (/^[a-z]$/i.test(event.key) && !event.shiftKey) {
      done = pick('input[data-key-final="' + event.key.toLowerCase() + '"]');
    }
    if (done) event.preventDefault();
  });

  function tick() {
    const el = document.querySelector("#work .elapsed");
    if (!el || !el.dataset.started) return;
    const s = Math.max(0, Math.round((Date.now() - Date.parse(el.dataset.started)) / 1000));
    el.textContent = Math.floor(s / 60) + ":" + String(s % 60).padStart(2, "0");
  }
  setInterval(tick, 1000);
  document.body.addEventListener("htmx:afterSwap", tick);
  tick();
})();
