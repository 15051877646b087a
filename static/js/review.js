// The Review page's keys (core.reviews): j/k move between answers, a accepts, r goes to the
// reason box (Enter there rejects), u undoes a rejection, o opens the answer's item. A key
// typed into a box (the reason, any input) is text, never a shortcut.
(function () {
  "use strict";
  var lastId = null;

  function cards() {
    return Array.prototype.slice.call(document.querySelectorAll('[data-testid="answer"]'));
  }

  function typing(target) {
    return target && target.closest &&
      target.closest('input, textarea, select, [contenteditable=""], [contenteditable="true"]');
  }

  function focusCard(card) {
    if (!card) { return; }
    lastId = card.dataset.answer;
    card.focus();
    card.scrollIntoView({block: "nearest"});
  }

  function press(card, key) {
    var control = card.querySelector('[data-key="' + key + '"]');
    if (control) { lastId = card.dataset.answer; control.click(); }
  }

  document.addEventListener("keydown", function (event) {
    if (event.ctrlKey || event.metaKey || event.altKey || typing(event.target)) { return; }
    var list = cards();
    if (!list.length) { return; }
    var index = list.findIndex(function (c) { return c.contains(document.activeElement); });
    var card = index >= 0 ? list[index] : null;
    switch (event.key) {
      case "j":
        focusCard(list[Math.min(index + 1, list.length - 1)]);
        break;
      case "k":
        focusCard(list[Math.max(index - 1, 0)]);
        break;
      case "a":
        if (card) { press(card, "accept"); }
        break;
      case "u":
        if (card) { press(card, "undo"); }
        break;
      case "o":
        if (card) { press(card, "open"); }
        break;
      case "r":
        if (card) {
          var box = card.querySelector('[data-testid="reason"]');
          if (box) { lastId = card.dataset.answer; box.focus(); }
        }
        break;
      default:
        return;
    }
    event.preventDefault();
  });

  document.addEventListener("focusin", function (event) {
    var card = event.target.closest && event.target.closest('[data-testid="answer"]');
    if (card) { lastId = card.dataset.answer; }
  });

  // a decision swaps its card: keep the keyboard on it
  document.body.addEventListener("htmx:afterSettle", function () {
    if (lastId) { focusCard(document.getElementById("answer-" + lastId)); }
  });
}());
