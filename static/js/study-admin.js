// The researcher's admin pages: a <select data-submit-on-change> submits its form when a
// choice is made (in a static file: the Content-Security-Policy runs no inline handler).
document.addEventListener("change", function (event) {
  const select = event.target.closest && event.target.closest("select[data-submit-on-change]");
  if (select && select.form) select.form.submit();
});
