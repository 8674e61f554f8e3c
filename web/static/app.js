// Host Finder web app: small progressive enhancements. Every page works without this file:
// forms post, links navigate, the table page's state is its URL.
"use strict";

(function () {
  const csrf = () => (document.querySelector('meta[name="csrf-token"]') || {}).content || "";
  // A time as the pages print theirs (UTC, 24-hour): "21:59:55 UTC" (length 19) or "21:59 UTC" (16).
  const utcClock = (date, length) => date.toISOString().slice(11, length) + " UTC";

  // --- what a screen reader is told: the page's always-present live region (base.html) -----------
  const announcer = document.getElementById("announce");
  let announcing = null;
  // The sentence goes in a moment after the region is emptied, so the same sentence twice (a
  // second search with the same count) is announced again, and a page's own first reading
  // (its title, the focused element) is not cut short.
  // Sentences asked for while one waits are said together (a done flash and a draft offered on
  // the same page), not the last alone.
  let pending = [];
  const announce = (text, delay = 150) => {
    if (!announcer) return;
    clearTimeout(announcing);
    announcer.textContent = "";
    const said = (text || "").replace(/\s+/g, " ").trim();
    if (said && !pending.includes(said)) pending.push(said);
    if (pending.length) {
      announcing = setTimeout(() => { announcer.textContent = pending.join(" "); pending = []; }, delay);
    }
  };
  const focusOn = (el, options) => {
    if (!el) return false;
    if (!el.matches("a[href], button, input, select, textarea, [tabindex]")) el.setAttribute("tabindex", "-1");
    el.focus(options);
    return document.activeElement === el;
  };

  // Selects marked data-autosubmit (the org switcher) submit their form when chosen with a
  // pointer. With the keyboard each arrow key is a change: there a change only shows the Switch
  // button, and Enter on the select (or the button) switches, so nobody changes organisation by
  // browsing the list.
  let keyed = null;  // the select the last key press went to (none since a pointer was used)
  const autosubmits = (el) => el && el.matches && el.matches("select[data-autosubmit]") && el.form;
  document.addEventListener("pointerdown", () => { keyed = null; }, true);
  document.addEventListener("keydown", (ev) => {
    const el = ev.target;
    if (!autosubmits(el)) return;
    keyed = el;
    if (ev.key === "Enter" && !ev.altKey && !ev.ctrlKey && !ev.metaKey) {
      ev.preventDefault();
      if (el.form.requestSubmit) el.form.requestSubmit(); else el.form.submit();
    }
  }, true);
  document.addEventListener("change", (ev) => {
    const el = ev.target;
    if (!autosubmits(el)) return;
    if (keyed !== el) { el.form.submit(); return; }
    el.form.querySelectorAll(".js-hide").forEach((b) => b.classList.remove("js-hide"));
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
  let loading = null;   // the AbortController of the grid fetch in flight, if one is
  // Live refresh is coalesced: at most one grid fetch in flight, and a change refreshes at most
  // once every REFRESH_GAP ms. A change arriving meanwhile only marks the grid stale, and one fetch
  // follows when the current one ends or the gap has passed: an agent writing 20 times a second
  // costs each open page about one render a second, not twenty (aborting a fetch does not stop
  // the server's work). A hidden tab refreshes once it is shown again.
  const REFRESH_GAP = 1000;
  let stale = false;    // a change came that no fetch started since has taken in
  let started = 0;      // when the last grid fetch started (Date.now())
  let due = null;       // the timer of the fetch that follows
  const schedule = () => {
    if (!stale || loading || due || document.hidden) return;
    due = window.setTimeout(() => { due = null; if (stale && !loading) reloadGrid(); },
                            Math.max(0, started + REFRESH_GAP - Date.now()));
  };
  const refreshSoon = () => { stale = true; schedule(); };
  document.addEventListener("visibilitychange", schedule);
  // The grid's scrolling boxes (the table's card on a desktop, the table itself on a phone),
  // by their place in the grid, with how far each is scrolled: the new markup is scrolled the same.
  const scrollers = () => Array.from(grid.querySelectorAll(".scroll, .scroll table"));
  const scrollOf = () => scrollers().map((el) => [el.scrollLeft, el.scrollTop]);
  const rescroll = (kept) => scrollers().forEach((el, i) => {
    if (!kept[i]) return;
    if (kept[i][0]) el.scrollLeft = kept[i][0];
    if (kept[i][1]) el.scrollTop = kept[i][1];
  });

  // What the keyboard focus is on inside the grid, to find its match in the grid's new markup:
  // the same link (its address), a pager link (rel, or its place in the bottom pager), a sort
  // heading (its column), a record's link (its row's record), else the summary.
  const focusKey = (el) => {
    const row = el.closest("tr[data-href]");
    const th = el.closest("th");
    return {
      id: el.id, tag: el.tagName, href: el.getAttribute("href"), rel: el.getAttribute("rel"), text: el.textContent.trim(),
      column: th ? Array.prototype.indexOf.call(th.parentNode.children, th) : -1,
      record: row ? row.getAttribute("data-href") : null, bottom: !!el.closest(".pager.bottom"),
    };
  };
  const refocus = (key) => {
    const all = (css) => Array.from(grid.querySelectorAll(css));
    const found = (key.id && document.getElementById(key.id) && grid.contains(document.getElementById(key.id))
                   && document.getElementById(key.id))
      // (the pagers above and below the grid hold the same links: the one that had the focus)
      || (key.bottom && all(".pager.bottom a").find((a) => a.textContent.trim() === key.text))
      || (key.href && all(key.tag.toLowerCase() + "[href]").find((a) => a.getAttribute("href") === key.href
                                                                  && !a.closest(".pager.bottom")))
      || (key.rel && all(`a[rel="${key.rel}"]`).find((a) => !a.closest(".pager.bottom")))
      || (key.column >= 0 && all(`thead th:nth-child(${key.column + 1}) a`)[0])
      || (key.record && all("tr[data-href]").find((tr) => tr.getAttribute("data-href") === key.record)
          ?.querySelector("a"))
      || document.getElementById("summary");
    if (found) focusOn(found, { preventScroll: true });
  };

  // A search's count is to be said even when a live refresh cancels the search's own fetch.
  let sayNext = false;
  async function reloadGrid(url, { say = false } = {}) {
    if (!grid) return;
    sayNext = sayNext || say;
    if (loading) loading.abort();   // (a search typed or Refresh: the newer view wins)
    const mine = loading = new AbortController();
    if (due) { window.clearTimeout(due); due = null; }
    stale = false;
    started = Date.now();
    try {
      const resp = await fetch(url || window.location.href, { credentials: "same-origin", signal: mine.signal,
                                                              headers: { "Accept": "text/html" } });
      const html = await resp.text();
      const doc = new DOMParser().parseFromString(html, "text/html");
      const fresh = doc.getElementById("grid");
      if (fresh) {
        // The markup is replaced: a focus inside it would fall to the page's start. It goes to
        // the same thing in the new markup (or the summary), where the person left it.
        const had = document.activeElement;
        const key = had && had !== grid && grid.contains(had) ? focusKey(had) : null;
        const scrolled = scrollOf();
        grid.innerHTML = fresh.innerHTML;
        rescroll(scrolled);
        if (key) refocus(key);
        if (doc.title) document.title = doc.title;
        const summary = document.getElementById("summary");
        if (sayNext && summary) announce(summary.textContent);
        sayNext = false;
      }
      // New record carries the view too (search as you type changed it), for its "Back to".
      const freshNew = doc.getElementById("new-record");
      const newRecord = document.getElementById("new-record");
      if (freshNew && newRecord) newRecord.href = freshNew.getAttribute("href");
      // What Export takes (the whole table, with its count) is said beside its links: kept true.
      const freshExport = doc.getElementById("export-what");
      const exportWhat = document.getElementById("export-what");
      if (freshExport && exportWhat) exportWhat.textContent = freshExport.textContent;
      // (Not a live region: the clock changing on every refresh is not news to be read out.)
      if (status) status.textContent = "Live · updated " + utcClock(new Date(), 19);
    } catch (err) {
      if (err.name !== "AbortError" && status) {
        status.textContent = "Could not refresh; use Refresh";
        announce(status.textContent);
      }
    } finally {
      // (an aborted fetch's end is not the end of the one that replaced it)
      if (loading === mine) { loading = null; schedule(); }
    }
  }

  const events = document.querySelector("[data-events]");
  if (events && window.EventSource) {
    let source = null;
    let polling = null;
    let connectedBefore = false;
    let retry = null;
    let asked = 0;   // streams asked for again after a 204
    const open = () => {
      retry = null;
      source = new EventSource(events.getAttribute("data-events"));
      source.addEventListener("ready", () => {
        if (polling) { window.clearInterval(polling); polling = null; status && (status.textContent = "Live"); }
        if (status) { status.classList.add("on"); if (!status.textContent) status.textContent = "Live"; }
        if (connectedBefore) refreshSoon(); // a change may have come while reconnecting
        connectedBefore = true;
      });
      source.addEventListener("change", refreshSoon);
      source.onerror = () => {
        if (status) status.classList.remove("on");
        // Closed for good (the server had no stream free and answered 204): poll instead, and
        // ask for a stream again each minute, since other pages may have closed theirs.
        if (source.readyState === EventSource.CLOSED) {
          if (!polling) {
            polling = window.setInterval(() => { if (!document.hidden) refreshSoon(); }, 15000);
            if (status) { status.textContent = "Refreshing every 15 s"; announce("Live refresh unavailable: refreshing every 15 s"); }
          }
          // The first time soon: a page just left gives its stream back within a second or two
          // (someone clicking through tables), so this one need not poll for a minute.
          const reask = Number(events.getAttribute("data-reask-ms")) || 60000;
          if (!retry) retry = window.setTimeout(open, asked++ ? reask : Math.min(3000, reask));
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

  // The table's query as a URL with only the fields that say something (an empty filter is no
  // filter), so the address stays readable and shareable; back to the first page.
  const queryForm = document.getElementById("table-query");
  const queryUrl = () => {
    const params = new URLSearchParams();
    for (const [k, v] of new FormData(queryForm)) if (String(v).trim() !== "") params.append(k, v);
    params.delete("page");
    return queryForm.getAttribute("action") + (params.toString() ? "?" + params : "");
  };
  if (queryForm) {
    queryForm.addEventListener("submit", (ev) => {
      ev.preventDefault();
      window.location.assign(queryUrl());
    });
  }
  // Search as you type: the URL follows (so reload and bookmarks keep the view), the grid reloads.
  const search = queryForm && queryForm.querySelector('input[type="search"]');
  if (search && grid) {
    let timer = null;
    search.addEventListener("input", () => {
      clearTimeout(timer);
      timer = setTimeout(() => {
        const url = queryUrl();
        window.history.replaceState(null, "", url);
        reloadGrid(url, { say: true });  // the new count is read out; the focus stays in the box
      }, 250);
    });
  }

  // --- the columns editor: add rows without a round trip -----------------------------------------
  const editor = document.getElementById("columns-editor");
  const addColumn = document.getElementById("add-column");
  const addRow = () => {
    const rows = editor.querySelectorAll("tbody tr.column-row");
    const last = rows[rows.length - 1];
    const copy = last.cloneNode(true);
    const index = rows.length;
    copy.querySelectorAll("input, select, textarea").forEach((el) => {
      el.name = el.name.replace(/^col-\d+-/, "col-" + index + "-");
      if (el.type === "checkbox") el.checked = false;
      else if (el.tagName === "SELECT") el.selectedIndex = 0;
      else el.value = "";
    });
    copy.querySelectorAll("input[name$='-remove']").forEach((el) => (el.closest("label") || el).remove());
    last.after(copy);
    return copy;
  };
  if (editor && addColumn) {
    addColumn.hidden = false;
    addColumn.addEventListener("click", () => addRow().querySelector("input").focus());
    // A draft of this editor may hold rows added here before it was sent: the rows come back
    // before its values do, so none of them is lost.
    editor.closest("form").addEventListener("hostfinder:restore", (ev) => {
      const indexes = ev.detail.map((kept) => Array.isArray(kept) && /^col-(\d+)-/.exec(kept[0]))
        .filter(Boolean).map((m) => Number(m[1]));
      const wanted = indexes.length ? Math.max(...indexes) + 1 : 0;
      while (editor.querySelectorAll("tbody tr.column-row").length < wanted) addRow();
    });
  }

  // Inline hints on the record form as a field is left: a number that is not one, a required
  // field left empty. They never block the save: the store's answer is the rule, shown beside
  // each field when it refuses.
  // A hint is tied to its field: it has an id, the field is aria-invalid and described by it
  // (before the column's description), and both go when the hint goes, unless a problem the
  // server named is still shown beside the field.
  const fieldOf = (control) => control.querySelector('[id^="field-"]');
  const describedBy = (field, id, on) => {
    const ids = (field.getAttribute("aria-describedby") || "").split(/\s+/).filter((x) => x && x !== id);
    if (on) ids.unshift(id);
    if (ids.length) field.setAttribute("aria-describedby", ids.join(" "));
    else field.removeAttribute("aria-describedby");
  };
  const hint = (control, text) => {
    let el = control.querySelector(".problem.inline");
    const field = fieldOf(control);
    if (!text) {
      if (el) { if (field) describedBy(field, el.id, false); el.remove(); }
      const still = !!control.querySelector(".problem");
      control.classList.toggle("invalid", still);
      if (field && !still) field.removeAttribute("aria-invalid");
      return;
    }
    if (!el) {
      el = document.createElement("div"); el.className = "problem inline";
      el.id = "inline-" + (field ? field.id : "problem");
      control.appendChild(el);
    }
    el.textContent = text;
    control.classList.add("invalid");
    if (field) { field.setAttribute("aria-invalid", "true"); describedBy(field, el.id, true); }
  };
  // A hint shown while a mouse button is down would move the Save button from under the click
  // that left the field (the click would then land nowhere): it waits until the click is done.
  let pressing = false;
  let waiting = [];
  document.addEventListener("pointerdown", () => { pressing = true; }, true);
  const released = () => {
    setTimeout(() => { pressing = false; const due = waiting; waiting = []; due.forEach((fn) => fn()); }, 0);
  };
  document.addEventListener("pointerup", released, true);
  document.addEventListener("pointercancel", released, true);  // a touch that became a scroll
  // A date and time with a part left empty: the browser holds it as "bad input" and would send
  // it as no value at all, which the server cannot tell from an emptied field.
  const partlyFilled = (el) => el.type === "datetime-local" && el.validity && el.validity.badInput;
  const INCOMPLETE = "This date and time is incomplete: fill in every part.";  // (the server's sentence, data-incomplete, when the page has one)
  document.addEventListener("focusout", (ev) => {
    const control = ev.target.closest && ev.target.closest(".record-form .control");
    if (!control || !ev.target.name) return;
    const value = (ev.target.value || "").trim();
    let text = "";
    if (control.dataset.kind === "number" && value && !/^-?(\d+\.?\d*|\.\d+)([eE][-+]?\d+)?$/.test(value)) {
      text = "expected a number, such as 42 or 3.5";
    } else if (partlyFilled(ev.target)) {
      text = control.dataset.incomplete || INCOMPLETE;
    } else if (control.hasAttribute("data-required") && !value && ev.target.type !== "checkbox") {
      text = "required";
    }
    if (pressing) waiting.push(() => hint(control, text));
    else hint(control, text);
  });

  // The record form's dates and times. The hidden _incomplete field names those partly filled,
  // so that even a save sent past this script is refused by the server, not stored as no value.
  // A Clear box (an optional one holding a value) is the explicit way to remove the value:
  // ticking it empties the input, typing a date unticks it, and an input emptied of every part
  // (which the browser tells from a partly filled one) ticks it when the form is sent.
  const noteIncomplete = (form) => {
    const field = form.querySelector('input[name="_incomplete"]');
    if (field) field.value = Array.from(form.querySelectorAll('input[type="datetime-local"]'))
      .filter(partlyFilled).map((el) => el.name).join(",");
  };
  const clearBoxOf = (input) => input.form && input.form.querySelector(`input[data-clears="${input.id}"]`);
  document.addEventListener("input", (ev) => {
    const el = ev.target;
    if (!el.form || !el.form.matches(".record-form") || el.type !== "datetime-local") return;
    noteIncomplete(el.form);
    const box = clearBoxOf(el);
    if (box && (el.value !== "" || partlyFilled(el))) box.checked = false;
    const stopped = el.closest(".control").querySelector(".problem.inline[role=alert]");
    if (!partlyFilled(el) && stopped) hint(el.closest(".control"), "");  // (set below when a save stopped on this field)
  });
  document.addEventListener("change", (ev) => {
    const box = ev.target;
    if (!box.matches || !box.matches("input[data-clears]")) return;
    const input = document.getElementById(box.getAttribute("data-clears"));
    if (!input) return;
    const shown = box.form.querySelector(`input[name="orig.${input.name}"]`);
    if (box.checked) input.value = "";
    else if (input.value === "" && shown) input.value = shown.value;  // unticked: the stored value again
    noteIncomplete(box.form);
    hint(input.closest(".control"), "");
  });
  // Sent (before any other submit handler, the draft's included): a date and time left partly
  // filled stops the save, with the sentence beside the field and everything typed still there.
  document.addEventListener("submit", (ev) => {
    const form = ev.target;
    if (!form.matches || !form.matches(".record-form")) return;
    noteIncomplete(form);
    const dates = Array.from(form.querySelectorAll('input[type="datetime-local"]'));
    dates.forEach((el) => {
      const box = clearBoxOf(el);
      if (box && el.value === "" && !partlyFilled(el)) box.checked = true;
    });
    const partial = dates.filter(partlyFilled);
    if (!partial.length) return;
    ev.preventDefault();
    partial.forEach((el) => {
      const control = el.closest(".control");
      hint(control, control.dataset.incomplete || INCOMPLETE);
      control.querySelector(".problem.inline").setAttribute("role", "alert");
    });
    partial[0].focus();
  }, true);

  // --- where the focus goes when a page arrives ------------------------------------------------
  // A refused form: the first field with a problem takes the focus (the server marked each such
  // field aria-invalid, described by its problems). A list's checkboxes: the first box.
  const firstInvalid = document.querySelector(
    'form :is(input, select, textarea, [role=group])[aria-invalid="true"]');
  const params = new URLSearchParams(window.location.search);
  // A save refused because the note or task changed meanwhile: its short alert's heading.
  const conflictHead = document.getElementById("conflict-heading");
  // A save that went through (?done=): its sentence is focused and read out. A save of one row's
  // access (a table's Access tab, an agent's or a guild's State) keeps the focus on that row.
  const doneFlash = params.has("done") && document.querySelector(".flash.ok");
  const ACCESS = "hostfinder-access-saved";
  const store = (() => { try { return window.sessionStorage; } catch (err) { return null; } })();
  document.addEventListener("submit", (ev) => {
    const form = ev.target;
    if (store && form.matches && form.matches("form.access-form[id]")) {
      try { store.setItem(ACCESS, window.location.pathname + "#" + form.id); } catch (err) { /* full */ }
    }
  });
  const savedAccess = () => {
    if (params.get("done") !== "access") return null;
    const kept = store && store.getItem(ACCESS);
    if (store) store.removeItem(ACCESS);
    const who = /^([ga])(\d+)$/.exec(params.get("who") || "");
    const id = who ? `access-${who[1] === "g" ? "guild_id" : "agent_id"}-${who[2]}`
      : kept && kept.startsWith(window.location.pathname + "#") ? kept.slice(window.location.pathname.length + 1) : null;
    const form = id && document.getElementById(id);
    return form && form.querySelector("select");
  };
  // A change of the table's view (search, filters, sort, page) reloads the page: the focus goes
  // to the summary, which says what is listed now (the title says it too).
  const viewChanged = Array.from(params.keys()).some((k) => k === "q" || k === "sort" || k === "page" || k.startsWith("f."));
  const summary = document.getElementById("summary");
  // A page opened at a fragment (#collections, #call-...): Chromium clears the focus when it
  // scrolls to it, after the page has loaded, so the focus is placed after that.
  const settled = (fn) => {
    if (!window.location.hash) { fn(); return; }
    const later = () => setTimeout(() => requestAnimationFrame(fn), 0);
    if (document.readyState === "complete") later(); else window.addEventListener("load", later, { once: true });
  };
  settled(() => {
  if (firstInvalid) {
    if (firstInvalid.getAttribute("role") === "group") focusOn(firstInvalid.querySelector("input") || firstInvalid);
    else firstInvalid.focus();
  } else if (conflictHead) {
    focusOn(conflictHead);
  } else if (document.querySelector(".flash.stale")) {
    // (a record saved over a newer version: the newer values and what was typed are below it)
    focusOn(document.querySelector(".flash.stale"));
  } else if (doneFlash) {
    if (!focusOn(savedAccess())) focusOn(doneFlash);
    announce(doneFlash.textContent, 400);
  } else if (viewChanged && summary && !document.querySelector("[autofocus]")) {
    focusOn(summary);
  }
  });

  // A run's page opened at a step (Open step: #call-<id>): every change of that tool call is
  // marked, the step itself in words too (aria-current, "Opened step"), and its file's link
  // takes the focus.
  let step = null;
  try {
    step = window.location.hash.startsWith("#call-") &&
      document.getElementById(decodeURIComponent(window.location.hash.slice(1)));
  } catch (err) { /* a fragment that is not valid percent-encoding: no step to mark */ }
  if (step && step.dataset.call) {
    document.querySelectorAll("table.steps tr[data-call]").forEach((tr) => {
      if (tr.dataset.call === step.dataset.call) tr.classList.add("step");
    });
    step.setAttribute("aria-current", "step");
    const what = step.querySelector("td.name");
    if (what && !what.querySelector(".opened-step")) {
      what.append(" ", Object.assign(document.createElement("span"), { className: "opened-step", textContent: "Opened step" }));
    }
    settled(() => focusOn(step.querySelector("td a[href]") || step));
  }

  // --- drafts: what was typed survives a save refused before its form could answer ------------------
  // A save that meets an ended session or a stale security token gets a bare 401/403 page, and
  // the form with what was typed is gone. Forms marked data-draft keep their values in this tab's
  // sessionStorage while they are edited; back on the form (after logging in again, or a reload)
  // a notice offers them back. A save that went through lands on a page with ?done=, which drops
  // the drafts this tab sent. Hidden fields come back too: a record's or note's version then
  // makes a draft of an older version a stale save, shown as one, never a silent overwrite.
  const DRAFT = "hostfinder-draft:";
  const storage = (() => { try { return window.sessionStorage; } catch (err) { return null; } })();
  const draftFields = (form) => Array.from(form.elements).filter(
    (el) => el.name && el.name !== "csrf_token" && !/^(submit|button|reset|file|password)$/.test(el.type));
  const snapshot = (form) => draftFields(form).map((el) => [el.name,
    /^(checkbox|radio)$/.test(el.type) ? el.checked
      : el.multiple ? Array.from(el.selectedOptions).map((o) => o.value) : el.value]);
  // Values go back by name, in order among the fields of one name (a list's checkboxes), so a
  // form of another shape takes what it has a field for: a record's form that became a new
  // record's (deleted meanwhile) has no version fields. A form that grows rows (the columns
  // editor) adds them first, on the hostfinder:restore event.
  const restore = (form, values) => {
    form.dispatchEvent(new CustomEvent("hostfinder:restore", { detail: values }));
    const byName = new Map();
    values.forEach((kept) => {
      if (!Array.isArray(kept) || typeof kept[0] !== "string") return;
      if (!byName.has(kept[0])) byName.set(kept[0], []);
      byName.get(kept[0]).push(kept[1]);
    });
    draftFields(form).forEach((el) => {
      const left = byName.get(el.name);
      if (!left || !left.length) return;  // no value kept for this field: leave it
      const v = left.shift();
      if (typeof v === "boolean") el.checked = v;
      else if (Array.isArray(v)) Array.from(el.options || []).forEach((o) => { o.selected = v.includes(o.value); });
      else el.value = v;
      el.dispatchEvent(new Event("input", { bubbles: true }));
    });
  };
  // A save refused as stale shows the newer values, and the person's changes only in its notice:
  // the form's data-typed holds them (column -> what was typed: a text, or a list's ticked values;
  // a date and time cleared is ""). The draft of that page is its form with them typed in, at the
  // version the page shows, so Restore on the next visit brings them back without undoing the
  // other writer's change. A field changed on that page itself keeps what it holds now.
  const typedOf = (form) => {
    try {
      const typed = JSON.parse(form.getAttribute("data-typed") || "null");
      return typed && typeof typed === "object" && !Array.isArray(typed) ? typed : null;
    } catch (err) { return null; }
  };
  const columnOf = (name) => name.startsWith("_clear.") ? name.slice("_clear.".length) : name;
  const withTyped = (form, typed, values) => {
    const els = draftFields(form);
    return values.map(([name, value], i) => {
      const col = columnOf(name), el = els[i];
      if (!el || !Object.prototype.hasOwnProperty.call(typed, col)) return [name, value];
      const t = typed[col];
      if (name !== col) return [name, t === ""];  // the Clear box: ticked when the date was cleared
      if (Array.isArray(t)) return [name, el.type === "checkbox" ? t.includes(el.value) : value];
      return [name, el.type === "checkbox" ? value : String(t)];
    });
  };
  const put = (key, value) => { try { storage.setItem(key, JSON.stringify(value)); } catch (err) { /* full */ } };
  const read = (key) => { try { return JSON.parse(storage.getItem(key) || "null"); } catch (err) { return null; } };

  // A save went through (?done=): drop the draft of the form that sent it, and only that one
  // (another form's draft, refused earlier in this tab, still waits to be restored).
  const SENT = "hostfinder-draft-sent";
  if (storage && new URLSearchParams(window.location.search).has("done")) {
    const sent = storage.getItem(SENT);
    if (sent) { storage.removeItem(sent); storage.removeItem(SENT); }
  }
  // A note renamed or moved from its own page: the rename is a form of its own, so what the
  // editor held unsaved was kept as the draft of the old name's page, which shows no editor any
  // more. It goes with the note: the new name's page (?done=renamed) offers it.
  const MOVED = "hostfinder-draft-moved";
  if (storage && new URLSearchParams(window.location.search).get("done") === "renamed") {
    const from = storage.getItem(MOVED);
    const to = DRAFT + window.location.pathname + "#note-editor";
    storage.removeItem(MOVED);
    const draft = from && from !== to && read(from);
    if (draft && Array.isArray(draft.values)) {
      // A rename adds one version: a draft based on the version before it is based on this one
      // (any other change since still makes its save a conflict, which shows both texts).
      const field = document.querySelector("#note-editor input[name=version]");
      const now = field ? Number(field.value) : NaN;
      const values = draft.values.map((entry) => Array.isArray(entry) && entry[0] === "version"
        && Number(entry[1]) + 1 === now ? ["version", String(now)] : entry);
      put(to, { ...draft, values, reason: draft.reason || "the note was renamed before it was saved" });
      storage.removeItem(from);
    }
  }
  document.addEventListener("submit", (ev) => {
    if (storage && ev.target.id === "rename-form" && document.getElementById("note-editor")) {
      storage.setItem(MOVED, DRAFT + window.location.pathname + "#note-editor");
    }
  });
  // Logging out ends this tab's drafts: the next person to log in here is not offered them.
  document.addEventListener("submit", (ev) => {
    const action = ev.target.getAttribute && (ev.target.getAttribute("action") || "");
    if (storage && action.endsWith("/logout")) {
      for (let i = storage.length - 1; i >= 0; i--) {
        const key = storage.key(i);
        if (key && (key.startsWith(DRAFT) || key === SENT)) storage.removeItem(key);
      }
    }
  });
  // A save refused before its form could answer lands on the message page: its sentence is the
  // reason the draft that was sent is not saved.
  const message = document.querySelector("section.message .sentence");
  const sentKey = storage && storage.getItem(SENT);
  if (message && sentKey) {
    const draft = read(sentKey);
    if (draft && draft.sent) put(sentKey, { ...draft, reason: message.textContent.trim() });
  }
  document.querySelectorAll("form[data-draft]").forEach((form) => {
    if (!storage) return;
    // Keyed by the form's own page: a refusal is served at the URL the form posted to, which for
    // the task editor is not its page (data-draft-page says which is).
    const page = form.getAttribute("data-draft-page") || window.location.pathname;
    const key = DRAFT + page + "#" + (form.id || form.getAttribute("action"));
    const shownValues = snapshot(form);
    const shown = JSON.stringify(shownValues);
    let offering = false;
    // What this form's draft holds: what it holds now, and on a stale save's page the person's
    // changes in each column not changed here since (see withTyped).
    const typed = typedOf(form);
    const base = typed && withTyped(form, typed, shownValues);
    const draftOf = (now) => {
      if (!base || now.length !== base.length) return now;
      const touched = new Set(now.filter(([name, v], i) => JSON.stringify(v) !== JSON.stringify(shownValues[i][1]))
        .map(([name]) => columnOf(name)));
      return now.map((entry, i) => touched.has(columnOf(entry[0])) ? entry : base[i]);
    };
    // A refusal the form itself answered (problems, a stale save) already shows what was typed;
    // an editor that shows unsaved text (data-unsaved) keeps it as the draft until a save goes
    // through, so leaving the page (a link on the conflict page) does not lose it.
    const answered = document.querySelector(".flash.error, .flash.stale, .conflict");
    const unsaved = form.hasAttribute("data-unsaved");
    const kept = answered ? null : read(key);
    // The refusal this page shows is why its text was not saved: the draft keeps that sentence.
    const refusal = answered && (answered.querySelector("strong, h2") || answered).textContent.trim();
    if (unsaved) put(key, { at: Date.now(), values: draftOf(snapshot(form)), sent: false, reason: refusal || "" });
    else if (answered) storage.removeItem(key);
    if (kept && Array.isArray(kept.values) && JSON.stringify(kept.values) !== shown) {
      offering = true;
      const notice = document.createElement("div");
      notice.className = "flash draft";
      notice.setAttribute("role", "status");
      const keptAt = new Date(kept.at);
      const when = isNaN(keptAt) ? "an earlier visit" : utcClock(keptAt, 16);  // (storage may hold anything)
      // Only what is known: the refusal's own sentence when a page gave one; otherwise that the
      // save was sent and no page confirmed it, or just that it was not saved.
      const reason = typeof kept.reason === "string" && kept.reason
        ? `: ${kept.reason.replace(/[.\s]+$/, "")}.` : kept.sent ? ": the save was sent, but no page confirmed it." : ".";
      notice.append(`What you typed here at ${when} was not saved${reason} `);
      const take = Object.assign(document.createElement("button"), { type: "button", textContent: "Restore it" });
      const drop = Object.assign(document.createElement("button"), { type: "button", textContent: "Discard",
                                                                     className: "secondary" });
      notice.append(take, " ", drop);
      form.prepend(notice);
      announce(notice.textContent.replace(/Restore it\s*Discard\s*$/, "") + " Restore it or Discard, at the top of the form.", 600);
      // The notice goes once answered: the focus goes to the form's first field (it would fall
      // to the page's start with the button), and what happened is read out.
      const firstField = () => Array.from(form.elements).find((el) => el.name && el.type !== "hidden" && !el.disabled
        && el.getClientRects().length && el.getAttribute("aria-hidden") !== "true");
      take.addEventListener("click", () => {
        offering = false; notice.remove(); restore(form, kept.values);
        put(key, { at: Date.now(), values: snapshot(form), sent: false });
        focusOn(firstField());
        announce("Restored what you typed. It is not saved yet.");
      });
      drop.addEventListener("click", () => {
        offering = false; notice.remove(); storage.removeItem(key);
        focusOn(firstField());
        announce("Discarded what you typed earlier.");
      });
    }
    const keep = () => {
      if (offering) return;  // the offered draft stays until it is restored or discarded
      const now = snapshot(form);
      if (JSON.stringify(now) === shown && !unsaved) storage.removeItem(key);
      else put(key, { at: Date.now(), values: draftOf(now), sent: false });
    };
    form.addEventListener("input", keep);
    form.addEventListener("change", keep);
    form.addEventListener("submit", (ev) => {
      if (offering || ev.defaultPrevented) return;  // not sent (a date left partly filled)
      put(key, { at: Date.now(), values: snapshot(form), sent: true });
      try { storage.setItem(SENT, key); } catch (err) { /* full */ }
    });
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
  window.HostFinder = { csrf, reloadGrid, announce };
})();
