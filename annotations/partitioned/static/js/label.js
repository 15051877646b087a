// Labelling page of every study type: the one guard that keeps typed text from shortcuts,
// keyboard shortcuts (one key press, one action), the shortcuts overlay, the lease countdown
// with a warning before it runs out (``data-warn-seconds`` on the lease line) and a way on
// when it has, heartbeat while the specialist works; the flag form's keys; "Undo" removed
// when its window ends.
(function () {
  "use strict";
  // the page's language (Django's JavaScript catalog, /jsi18n/; English without it)
  const gettext = window.gettext || ((text) => text);
  const interpolate = window.interpolate || ((text, args) => args.reduce(
    (out, arg) => out.replace("%s", arg), text));
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

  // One guard for the keys of every labelling page (this file is loaded first on each): a
  // key typed in a text field — an input that takes text, a textarea, a select, anything
  // contenteditable — or anywhere in the flag form (key !) is the field's, never a shortcut.
  // This listener (on window, capture phase) runs before every page script's and stops the
  // event there; the browser still types the key. The fields keep two keys of their own:
  // Esc leaves the field (in the flag form: closes it) and Ctrl/Cmd+Enter sends its form.
  const NOT_TEXT = ["radio", "checkbox", "button", "submit", "reset", "image", "file", "range",
                    "color"];
  function typingIn(el) {
    if (!el || el.nodeType !== 1) return false;
    if (el.isContentEditable) return true;
    const tag = el.tagName.toLowerCase();
    if (tag === "textarea" || tag === "select") return true;
    return tag === "input" && !NOT_TEXT.includes((el.type || "text").toLowerCase());
  }
  function flagClose() {
    const box = document.getElementById("flag-box");
    if (box) box.innerHTML = "";
  }
  function send(form) {
    if (!form) return;
    const button = form.querySelector("button.submit:not(:disabled)")
      || form.querySelector("button:not([type=button]):not(:disabled)");
    if (!button) return;
    // a form swapped in by htmx is enabled when the swap settles: enable it now
    if (window.htmx) htmx.process(form);
    button.click();
  }
  window.addEventListener("keydown", function (event) {
    const target = event.target;
    const flag = target.closest ? target.closest("form.flag-form") : null;
    if (!flag && !typingIn(target)) return;
    event.stopPropagation();
    lastActivity = Date.now();
    if (event.isComposing) return;
    if (event.key === "Escape") {
      event.preventDefault();
      if (flag) flagClose(); else target.blur();
    } else if (event.key === "Enter" && (event.ctrlKey || event.metaKey)) {
      event.preventDefault();
      send(flag || target.form || (target.closest && target.closest("form")));
    } else if (flag && event.key === "Enter" && target.tagName === "INPUT") {
      event.preventDefault();  // a radio button's Enter would send the flag before the note
    }
  }, true);
  document.addEventListener("click", function (event) {
    if (event.target.closest && event.target.closest("[data-flag-cancel]")) flagClose();
  });

  // The page's keys (typed text never gets here: see the guard above). Radio buttons and
  // check boxes keep the keys (the rating page of assisted studies chooses with them).
  document.addEventListener("keydown", function (event) {
    lastActivity = Date.now();
    // A held key repeats keydown events: each would answer a query nobody read.
    if (event.repeat) return;
    if (event.ctrlKey || event.metaKey || event.altKey) return;
    const tag = (event.target.tagName || "").toLowerCase();
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
    lease.querySelector(".countdown").textContent = gettext("time is up");
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
    // "Undo" is offered only while there is something to undo: its window ends at data-until
    document.querySelectorAll("form.undo[data-until]").forEach(function (form) {
      if (Date.parse(form.dataset.until) <= Date.now()) form.remove();
    });
    const lease = document.getElementById("lease");
    if (lease) {
      const left = Math.round((Date.parse(lease.dataset.expires) - Date.now()) / 1000);
      const label = lease.querySelector(".countdown");
      if (left <= 0) {
        expire(lease);
      } else {
        label.textContent = interpolate(gettext("%s left"), [Math.floor(left / 60) + ":" + String(left % 60).padStart(2, "0")]);
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
