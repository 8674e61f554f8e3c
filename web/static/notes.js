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

  // The task editor's Insert box (the spec's Insert note and Insert table): takes a note or table
  // the task may embed and puts its embed, ![[display-path]], on a line of its own at the cursor
  // (at the end of the task until the cursor has been placed in it). Its list starts with the
  // tables the agent reaches and the first notes of the organisation, the guild and the agent; as
  // the person types, the server is asked for those whose path holds what is typed (data-find,
  // at most 50 an answer), so a note among an agent's 10 000 is found too. A path typed whole
  // that no list has shown is checked with the server before it goes in; anything else is
  // refused beside the box, before the task is touched. Without this script the box stays
  // hidden and embeds are typed by hand.
  const box = document.getElementById("insert-embed");
  const task = document.getElementById("task-content");
  if (box && task) {
    box.hidden = false;
    const input = document.getElementById("embed-path");
    const problem = document.getElementById("embed-problem");
    const hint = document.getElementById("embed-hint");
    const list = document.getElementById("embed-choices");
    const findUrl = box.getAttribute("data-find");
    const first = Array.from(list.options, (o) => o.value);  // what the page offered
    const firstHint = hint ? hint.textContent : "";
    const known = new Set(first);  // every path the page or an answer offered: each may be inserted
    let placed = false;  // has the cursor been put somewhere in the task?
    ["focus", "mouseup", "keyup", "select"].forEach((type) => task.addEventListener(type, () => { placed = true; }));
    const say = (text) => {
      problem.textContent = text;
      problem.hidden = !text;
      if (text) input.setAttribute("aria-invalid", "true"); else input.removeAttribute("aria-invalid");
    };
    const offer = (paths) => {
      list.replaceChildren(...paths.map((path) => { const o = document.createElement("option"); o.value = path; return o; }));
    };
    // The server's answer for a text: {q, paths, more, exact}; null when it could not be had (the
    // session ended: the answer is the login page, not JSON).
    const ask = async (text) => {
      if (!findUrl) return null;
      try {
        const r = await fetch(findUrl + "?q=" + encodeURIComponent(text),
                              { credentials: "same-origin", headers: { Accept: "application/json" } });
        if (!r.ok || !(r.headers.get("Content-Type") || "").includes("application/json")) return null;
        return await r.json();
      } catch (err) {
        return null;
      }
    };
    let timer = null, asked = 0;
    input.addEventListener("input", () => {
      say("");
      clearTimeout(timer);
      const text = input.value.trim();
      if (!text) {
        offer(first);
        if (hint) hint.textContent = firstHint;
        return;
      }
      timer = setTimeout(async () => {
        const mine = ++asked;
        const answer = await ask(text);
        if (!answer || mine !== asked) return;  // (a later keystroke's answer is the one shown)
        answer.paths.forEach((path) => known.add(path));
        offer(answer.paths);
        if (hint) {
          const n = answer.paths.length;
          hint.textContent = !n ? `no note or table this task can embed has “${text}” in its path`
            : answer.more ? `the first ${n} with “${text}” in their path are listed: type more to narrow them`
            : n === 1 ? `one has “${text}” in its path: choose it from the list`
            : `${n} have “${text}” in their path: choose one from the list`;
        }
      }, 200);
    });
    const refuse = (path) => {
      const example = first[0];
      say(example
        ? `${path} is not one of the notes or tables offered here, so nothing was inserted: choose one ` +
          `from the list that opens as you type (a full display path, such as ${example}).`
        : `${path} was not inserted: this agent reads no note or table yet; create a note first.`);
      input.focus();
    };
    const put = (path) => {
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
      offer(first);
      if (hint) hint.textContent = firstHint;
      task.focus();
    };
    const insert = async () => {
      // (A search still waiting or under way would put a hint about earlier text beside the outcome.)
      clearTimeout(timer);
      asked++;
      if (hint) hint.textContent = firstHint;
      const path = input.value.trim().replace(/^\/+|\/+$/g, "");
      if (!path) {
        say("Type part of a note's or table's name, then choose it from the list that opens.");
        input.focus();
        return;
      }
      if (known.has(path)) { put(path); return; }
      // A display path typed whole that no list has shown yet (the lists hold 50 at a time): the
      // server says whether the task may embed it. Other text is no path: refused at once.
      if (!/^org\/\d+\//.test(path)) { refuse(path); return; }
      const answer = await ask(path);
      if (answer === null) {
        say(`${path} could not be checked, so nothing was inserted: the page could not ask the server ` +
            "(your session may have ended). Reload the page and try again.");
        input.focus();
      } else if (answer.exact) {
        known.add(path);
        put(path);
      } else {
        say(`${path} is not a note or table this task can embed, so nothing was inserted: a task embeds ` +
            "its agent's own notes, its guild's, the organisation's and the tables the agent reaches. " +
            "Choose one from the list that opens as you type.");
        input.focus();
      }
    };
    document.getElementById("insert-embed-button").addEventListener("click", insert);
    // Enter in the box inserts (it would otherwise submit the task form).
    input.addEventListener("keydown", (ev) => { if (ev.key === "Enter") { ev.preventDefault(); insert(); } });
  }
})();
