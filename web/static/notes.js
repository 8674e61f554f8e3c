// Host Finder notes browser and agent State: small enhancements of the editors. Without this file
// the editors are plain forms that post.
"use strict";

(function () {
  document.querySelectorAll("form#note-editor, form#task-editor").forEach((form) => {
    const area = form.querySelector("textarea");
    const flag = form.querySelector(".dirty");
    if (!area) return;
    const saved = area.value;
    let submitting = false;
    const dirty = () => area.value !== saved;
    area.addEventListener("input", () => { if (flag) flag.textContent = dirty() ? "Unsaved changes" : ""; });
    // Ctrl+S / Cmd+S saves, as in an editor.
    area.addEventListener("keydown", (ev) => {
      if ((ev.ctrlKey || ev.metaKey) && ev.key === "s") { ev.preventDefault(); form.requestSubmit(); }
    });
    form.addEventListener("submit", () => { submitting = true; });
    // Leaving with unsaved text asks first (the browser's own dialog).
    window.addEventListener("beforeunload", (ev) => {
      if (!submitting && dirty()) { ev.preventDefault(); ev.returnValue = ""; }
    });
  });
})();
