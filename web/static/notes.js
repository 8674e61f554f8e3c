// Host Finder notes browser and agent State: small enhancements of the editors. Without this file
// the editors are plain forms that post.
"use strict";

(function () {
  document.querySelectorAll("form#note-editor, form#task-editor").forEach((form) => {
    const area = form.querySelector("textarea");
    const flag = form.querySelector(".dirty");
    if (!area) return;
    // A page that answered a refused or conflicting save shows text that is not saved yet.
    const saved = form.hasAttribute("data-unsaved") ? null : area.value;
    let submitting = false;
    const dirty = () => area.value !== saved;
    if (flag && dirty()) flag.textContent = "Unsaved changes";
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

  // The task editor's Insert box: puts ![[display-path]] at the cursor (the spec's Insert note and
  // Insert table). Without this script the box stays hidden and embeds are typed by hand.
  const box = document.getElementById("insert-embed");
  const task = document.getElementById("task-content");
  if (box && task) {
    box.hidden = false;
    const input = document.getElementById("embed-path");
    document.getElementById("insert-embed-button").addEventListener("click", () => {
      const path = input.value.trim().replace(/^\/+|\/+$/g, "");
      if (!path) { input.focus(); return; }
      const embed = "![[" + path + "]]";
      const start = task.selectionStart, end = task.selectionEnd;
      task.value = task.value.slice(0, start) + embed + task.value.slice(end);
      task.selectionStart = task.selectionEnd = start + embed.length;
      task.dispatchEvent(new Event("input"));
      input.value = "";
      task.focus();
    });
  }
})();
