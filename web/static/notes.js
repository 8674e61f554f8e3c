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

  // The task editor's Insert box (the spec's Insert note and Insert table): takes one of the
  // notes and tables it offers and puts its embed, ![[display-path]], on a line of its own at the
  // cursor (at the end of the task until the cursor has been placed in it). Anything else is
  // refused beside the box, before the task is touched. Without this script the box stays hidden
  // and embeds are typed by hand.
  const box = document.getElementById("insert-embed");
  const task = document.getElementById("task-content");
  if (box && task) {
    box.hidden = false;
    const input = document.getElementById("embed-path");
    const problem = document.getElementById("embed-problem");
    const offered = new Set(Array.from(document.querySelectorAll("#embed-choices option"), (o) => o.value));
    let placed = false;  // has the cursor been put somewhere in the task?
    ["focus", "mouseup", "keyup", "select"].forEach((type) => task.addEventListener(type, () => { placed = true; }));
    const say = (text) => {
      problem.textContent = text;
      problem.hidden = !text;
      if (text) input.setAttribute("aria-invalid", "true"); else input.removeAttribute("aria-invalid");
    };
    input.addEventListener("input", () => say(""));
    const insert = () => {
      const path = input.value.trim().replace(/^\/+|\/+$/g, "");
      if (!path) {
        say("Type part of a note's or table's name, then choose it from the list that opens.");
        input.focus();
        return;
      }
      if (!offered.has(path)) {
        const example = offered.values().next().value;
        say(example
          ? `${path} is not one of the notes or tables offered here, so nothing was inserted: choose one ` +
            `from the list that opens as you type (a full display path, such as ${example}).`
          : `${path} was not inserted: this agent reads no note or table yet; create a note first.`);
        input.focus();
        return;
      }
      say("");
      const value = task.value;
      const start = placed ? task.selectionStart : value.length;
      const end = placed ? task.selectionEnd : value.length;
      const before = value.slice(0, start), after = value.slice(end);
      const line = (before && !before.endsWith("\n") ? "\n" : "") + "![[" + path + "]]" +
                   (after.startsWith("\n") ? "" : "\n");
      task.value = before + line + after;
      task.selectionStart = task.selectionEnd = before.length + line.length;  // just after the embed's line
      task.dispatchEvent(new Event("input", { bubbles: true }));
      input.value = "";
      task.focus();
    };
    document.getElementById("insert-embed-button").addEventListener("click", insert);
    // Enter in the box inserts (it would otherwise submit the task form).
    input.addEventListener("keydown", (ev) => { if (ev.key === "Enter") { ev.preventDefault(); insert(); } });
  }
})();
