// Host Finder web app: small progressive enhancements. Every page works without this file.
"use strict";

(function () {
  const csrf = () => (document.querySelector('meta[name="csrf-token"]') || {}).content || "";

  // Selects marked data-autosubmit (the org switcher) submit their form on change.
  document.addEventListener("change", (ev) => {
    const el = ev.target;
    if (el.matches && el.matches("select[data-autosubmit]") && el.form) el.form.submit();
  });

  // Forms marked data-confirm ask first, naming what will go.
  document.addEventListener("submit", (ev) => {
    const form = ev.target;
    const question = form.getAttribute("data-confirm");
    if (question && !window.confirm(question)) ev.preventDefault();
  });

  document.documentElement.classList.add("js");
  window.HostFinder = { csrf };
})();
