// Critique task page: the keys of the answer form (label.js, loaded first, runs the lease
// countdown, the expired-lease switch, the shortcuts overlay, Enter, and the guard that
// keeps keys typed in the text box from shortcuts, except Esc and Ctrl/Cmd+Enter). One key
// press, one action.
(function () {
  "use strict";
  const gettext = window.gettext || ((text) => text);

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

  // Keys typed in the text box never get here: label.js's guard keeps them (with Esc, which
  // leaves the box, and Ctrl/Cmd+Enter, which submits).
  document.addEventListener("keydown", function (event) {
    if (event.repeat) return;
    const dialog = document.getElementById("shortcuts");
    if (dialog && dialog.open) return;
    const tag = (event.target.tagName || "").toLowerCase();
    if (event.key === "Enter" && (event.ctrlKey || event.metaKey)) {
      if (submit()) event.preventDefault();
      return;
    }
    if (event.ctrlKey || event.metaKey || event.altKey) return;
    // arrows on a focused radio button or button move between them (the browser's own)
    if ((tag === "input" || tag === "button") && event.key.startsWith("Arrow")) return;
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

// Drafts: what the annotator types and picks is kept in this browser (localStorage, one
// entry per task) as they go, so a reload, a crash or the end of the time limit loses
// nothing: the page brings it back whenever the same task is shown again, and forgets it
// once the answer is recorded or the task skipped. Entries older than two days are dropped.
(function () {
  "use strict";
  const PREFIX = "oversight:critique-draft:";
  const KEEP_MS = 2 * 24 * 3600 * 1000;
  const FIELDS = ["choice", "final", "confidence"];
  let sent = null;  // the task whose answer or skip is on its way
  let sentSkip = false;

  function store() { try { return window.localStorage; } catch (e) { return null; } }
  function card() { return document.querySelector("#work article.critique-task"); }

  function save() {
    const c = card();
    const form = c && c.querySelector("form.critique-form");
    const s = store();
    if (!form || !s || form.reasoning.readOnly) return;
    const draft = { reasoning: form.reasoning.value, at: Date.now() };
    FIELDS.forEach(function (name) {
      const picked = form.querySelector("input[name=" + name + "]:checked");
      if (picked) draft[name] = picked.value;
    });
    try { s.setItem(PREFIX + c.dataset.taskId, JSON.stringify(draft)); } catch (e) { /* full */ }
  }

  function restore() {
    const c = card();
    const form = c && c.querySelector("form.critique-form");
    const s = store();
    if (!form || !s || c.dataset.draftChecked) return;
    c.dataset.draftChecked = "1";
    let draft = null;
    try { draft = JSON.parse(s.getItem(PREFIX + c.dataset.taskId) || "null"); } catch (e) { return; }
    // an answer taken back by undo is in the form (from the server); a draft of it typed
    // since in this browser is newer
    const takenBack = !!form.dataset.takenBack;
    if (!draft) { if (takenBack) save(); return; }
    let back = false;
    if (draft.reasoning && (takenBack ? draft.reasoning !== form.reasoning.value
                                      : !form.reasoning.value.trim())) {
      form.reasoning.value = draft.reasoning;
      back = true;
    }
    FIELDS.forEach(function (name) {
      const checked = form.querySelector("input[name=" + name + "]:checked");
      if (!draft[name] || (checked && (!takenBack || checked.value === draft[name]))) return;
      const input = form.querySelector("input[name=" + name + '][value="' + draft[name] + '"]');
      if (input) { input.checked = true; back = true; }
    });
    if (back) {
      const note = document.createElement("p");
      note.className = "notice draft-restored";
      note.setAttribute("role", "status");
      note.dataset.testid = "draft-restored";
      note.textContent = gettext("Your draft of this task was brought back from this browser.");
      form.parentNode.insertBefore(note, form);
    }
  }

  function tidy() {
    const s = store();
    if (!s) return;
    const old = Date.now() - KEEP_MS;
    for (let i = s.length - 1; i >= 0; i--) {
      const key = s.key(i);
      if (!key || key.indexOf(PREFIX) !== 0) continue;
      let at = 0;
      try { at = (JSON.parse(s.getItem(key)) || {}).at || 0; } catch (e) { /* unreadable */ }
      if (at < old) s.removeItem(key);
    }
  }

  document.addEventListener("input", function (event) {
    if (event.target.closest && event.target.closest("form.critique-form")) save();
  });
  document.addEventListener("change", function (event) {
    if (event.target.closest && event.target.closest("form.critique-form")) save();
  });
  document.body.addEventListener("htmx:beforeRequest", function (event) {
    const form = event.detail.elt.closest && event.detail.elt.closest("form");
    const c = card();
    if (form && c && (form.classList.contains("critique-form") || form.classList.contains("skip"))) {
      sent = c.dataset.taskId;
      sentSkip = form.classList.contains("skip");
    }
  });
  document.body.addEventListener("htmx:afterSwap", function () {
    const c = card();
    const s = store();
    // recorded or skipped: the page moved on from the task (an incomplete answer shows it
    // again; an answer refused because the time ran out keeps the draft)
    const moved = !c || c.dataset.taskId !== sent;
    const recorded = !!document.querySelector('#work [data-testid="recorded"]');
    const expired = !!document.querySelector('#work [data-testid="message"].expired');
    if (sent && s && moved && (recorded || (sentSkip && !expired))) s.removeItem(PREFIX + sent);
    sent = null;
    restore();
  });
  tidy();
  restore();
})();
