// Host Finder web app: small progressive enhancements. Every page works without this file:
// forms post, links navigate, the table page's state is its URL.
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
    const question = ev.target.getAttribute && ev.target.getAttribute("data-confirm");
    if (question && !window.confirm(question)) ev.preventDefault();
  });

  // A record row opens its record when clicked anywhere (the id cell is the real link).
  document.addEventListener("click", (ev) => {
    const row = ev.target.closest && ev.target.closest("tr[data-href]");
    if (!row || ev.target.closest("a, button, input, select, label")) return;
    if (window.getSelection && String(window.getSelection())) return; // selecting text, not opening
    window.location.href = row.getAttribute("data-href");
  });

  // --- the table page: reload the grid in place (live refresh, search as you type) ---------------
  const grid = document.getElementById("grid");
  const status = document.getElementById("live-status");
  let loading = null;

  async function reloadGrid(url) {
    if (!grid) return;
    if (loading) loading.abort();
    loading = new AbortController();
    try {
      const resp = await fetch(url || window.location.href, { credentials: "same-origin", signal: loading.signal,
                                                              headers: { "Accept": "text/html" } });
      const html = await resp.text();
      const doc = new DOMParser().parseFromString(html, "text/html");
      const fresh = doc.getElementById("grid");
      if (fresh) grid.innerHTML = fresh.innerHTML;
      if (status) status.textContent = "Live · updated " + new Date().toLocaleTimeString();
    } catch (err) {
      if (err.name !== "AbortError" && status) status.textContent = "Could not refresh; use Refresh";
    }
  }

  const events = document.querySelector("[data-events]");
  if (events && window.EventSource) {
    let source = null;
    let polling = null;
    let connectedBefore = false;
    const open = () => {
      source = new EventSource(events.getAttribute("data-events"));
      source.addEventListener("ready", () => {
        if (status) { status.classList.add("on"); if (!status.textContent) status.textContent = "Live"; }
        if (connectedBefore) reloadGrid(); // a change may have come while reconnecting
        connectedBefore = true;
      });
      source.addEventListener("change", () => reloadGrid());
      source.onerror = () => {
        if (status) status.classList.remove("on");
        // Closed for good (the server had no stream free and answered 204): poll instead.
        if (source.readyState === EventSource.CLOSED && !polling) {
          polling = window.setInterval(() => { if (!document.hidden) reloadGrid(); }, 15000);
          if (status) status.textContent = "Refreshing every 15 s";
        }
      };
    };
    open();
    window.addEventListener("pagehide", () => source && source.close());
  }

  const refresh = document.getElementById("refresh");
  if (refresh && grid) {
    refresh.addEventListener("click", (ev) => { ev.preventDefault(); reloadGrid(); });
  }

  // Search as you type: the URL follows (so reload and bookmarks keep the view), the grid reloads.
  const queryForm = document.getElementById("table-query");
  const search = queryForm && queryForm.querySelector('input[type="search"]');
  if (search && grid) {
    let timer = null;
    search.addEventListener("input", () => {
      clearTimeout(timer);
      timer = setTimeout(() => {
        const params = new URLSearchParams();
        for (const [k, v] of new FormData(queryForm)) if (String(v).trim() !== "") params.append(k, v);
        params.delete("page");
        const url = queryForm.getAttribute("action") + (params.toString() ? "?" + params : "");
        window.history.replaceState(null, "", url);
        reloadGrid(url);
      }, 250);
    });
  }

  // --- the columns editor: add rows without a round trip -----------------------------------------
  const editor = document.getElementById("columns-editor");
  const addColumn = document.getElementById("add-column");
  if (editor && addColumn) {
    addColumn.hidden = false;
    addColumn.addEventListener("click", () => {
      const rows = editor.querySelectorAll("tbody tr.column-row");
      const last = rows[rows.length - 1];
      const copy = last.cloneNode(true);
      const index = rows.length;
      copy.querySelectorAll("input, select").forEach((el) => {
        el.name = el.name.replace(/^col-\d+-/, "col-" + index + "-");
        if (el.type === "checkbox") el.checked = false;
        else if (el.tagName === "SELECT") el.selectedIndex = 0;
        else el.value = "";
      });
      copy.querySelectorAll("td:last-child input[name$='-remove']").forEach((el) => el.remove());
      last.after(copy);
      copy.querySelector("input").focus();
    });
  }

  // Inline hints on the record form as a field is left: a number that is not one, a required
  // field left empty. They never block the save: the store's answer is the rule, shown beside
  // each field when it refuses.
  const hint = (control, text) => {
    let el = control.querySelector(".problem.inline");
    if (!text) { if (el) el.remove(); control.classList.toggle("invalid", !!control.querySelector(".problem")); return; }
    if (!el) { el = document.createElement("div"); el.className = "problem inline"; control.appendChild(el); }
    el.textContent = text;
    control.classList.add("invalid");
  };
  document.addEventListener("focusout", (ev) => {
    const control = ev.target.closest && ev.target.closest(".record-form .control");
    if (!control || !ev.target.name) return;
    const value = (ev.target.value || "").trim();
    if (control.dataset.kind === "number" && value && !/^-?(\d+\.?\d*|\.\d+)([eE][-+]?\d+)?$/.test(value)) {
      hint(control, "expected a number, such as 42 or 3.5");
    } else if (control.hasAttribute("data-required") && !value && ev.target.type !== "checkbox") {
      hint(control, "required");
    } else {
      hint(control, "");
    }
  });

  // "/" jumps to the search box, as in most table tools.
  document.addEventListener("keydown", (ev) => {
    if (ev.key !== "/" || ev.ctrlKey || ev.metaKey || ev.altKey) return;
    const target = ev.target;
    if (target && (target.isContentEditable || /^(INPUT|TEXTAREA|SELECT)$/.test(target.tagName))) return;
    const box = document.querySelector('input[type="search"]');
    if (box) { ev.preventDefault(); box.focus(); box.select(); }
  });

  document.documentElement.classList.add("js");
  window.HostFinder = { csrf, reloadGrid };
})();
