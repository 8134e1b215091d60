// K12Vista Studio front end: CSRF for htmx, KaTeX typesetting, small helpers.
// Loaded as a file (the CSP allows no inline script).
(function () {
  "use strict";

  // LaTeX inside Chinese text: inline $...$ and \(...\), display $$...$$ and \[...\].
  var MATH_DELIMITERS = [
    { left: "$$", right: "$$", display: true },
    { left: "\\[", right: "\\]", display: true },
    { left: "\\(", right: "\\)", display: false },
    { left: "$", right: "$", display: false },
  ];

  function typeset(root) {
    if (!window.renderMathInElement) return;
    var regions = Array.prototype.slice.call(root.querySelectorAll("[data-math]"));
    if (root.matches && root.matches("[data-math]")) regions.push(root);
    regions.forEach(function (el) {
      window.renderMathInElement(el, {
        delimiters: MATH_DELIMITERS,
        throwOnError: false, // a broken formula shows in red, the rest of the text still renders
        trust: false,
        strict: "ignore",
      });
    });
  }

  // Live preview: text is assigned as text (never parsed as HTML), then typeset.
  function bindPreviews(root) {
    root.querySelectorAll("[data-math-source]").forEach(function (input) {
      var target = document.getElementById(input.getAttribute("data-math-source"));
      if (!target || input.dataset.bound) return;
      input.dataset.bound = "1";
      var update = function () {
        target.textContent = input.value;
        typeset(target.closest("[data-math]") || target);
      };
      input.addEventListener("input", update);
      update();
    });
  }

  // Keyboard shortcuts: buttons declare theirs with data-shortcut="ctrl+s"; the form being typed in goes
  // first (Ctrl+Enter in the reason for rejecting rejects, elsewhere it accepts). Alt+key moves to the
  // form marked data-alt-focus="key" (the reason for rejecting, with Alt+R).
  function bindShortcuts() {
    document.addEventListener("keydown", function (event) {
      if (event.altKey && !event.ctrlKey && !event.metaKey && event.key.length === 1) {
        var region = document.querySelector('[data-alt-focus="' + event.key.toLowerCase() + '"]');
        var field = region && region.querySelector("textarea, input:not([type=hidden]), select");
        if (field) { event.preventDefault(); field.focus(); }
        return;
      }
      if (!(event.ctrlKey || event.metaKey)) return;
      var key = event.key === "Enter" ? "enter" : event.key.toLowerCase();
      var selector = '[data-shortcut="ctrl+' + key + '"]';
      var own = event.target.closest && event.target.closest("form");
      var button = (own && own.querySelector(selector)) || document.querySelector(selector);
      if (!button) return;
      event.preventDefault();
      button.click();
    });
  }

  // A text box takes the keys typed into it ("?" included); a select, a radio or a button does not.
  function typingIn(el) {
    return !!(el && el.matches && (el.matches("textarea, input:not([type=radio]):not([type=checkbox]):not([type=button]):not([type=submit])") || el.isContentEditable));
  }
  window.k12vistaTypingIn = typingIn;

  // The keys of a task screen in a dialog: "?" outside a text box, F1 anywhere, or its button; Esc closes.
  function bindKeysHelp() {
    var dialog = document.getElementById("keys-help");
    if (!dialog || !dialog.showModal) return;
    var toggle = function () { if (dialog.open) dialog.close(); else dialog.showModal(); };
    document.querySelectorAll("[data-keys-help-open]").forEach(function (button) { button.addEventListener("click", toggle); });
    document.addEventListener("keydown", function (event) {
      if (event.ctrlKey || event.metaKey || event.altKey) return;
      if (event.key === "F1" || (event.key === "?" && !typingIn(event.target))) {
        event.preventDefault();
        event.stopImmediatePropagation();
        toggle();
      }
    }, true);
  }

  // The question's box on its page image, placed from PDF points.
  function placeBoxes(root) {
    root.querySelectorAll(".bbox[data-bbox]").forEach(function (box) {
      var b = box.dataset.bbox.split(",").map(Number);
      var size = box.dataset.pageSize.split(",").map(Number);
      box.style.left = (100 * b[0] / size[0]) + "%";
      box.style.top = (100 * b[1] / size[1]) + "%";
      box.style.width = (100 * (b[2] - b[0]) / size[0]) + "%";
      box.style.height = (100 * (b[3] - b[1]) / size[1]) + "%";
    });
  }

  // Step editor: move, split, merge, add and delete steps in the list; the
  // form submits the textareas in their order.
  function stepPreview(li) {
    var area = li.querySelector("textarea");
    var preview = li.querySelector(".step-preview");
    if (!area || !preview) return;
    preview.textContent = area.value;
    typeset(preview.closest("[data-math]") || preview);
  }

  function bindStepEditor(root) {
    var list = root.querySelector("#step-list");
    if (!list || list.dataset.bound) return;
    list.dataset.bound = "1";
    var renumber = function () {
      list.querySelectorAll("li").forEach(function (li, i) {
        var area = li.querySelector("textarea");
        if (area) area.setAttribute("aria-label", area.getAttribute("aria-label").replace(/\d+$/, String(i + 1)));
      });
    };
    var blank = function (text) {
      var li = list.querySelector("li").cloneNode(true);
      li.querySelector("textarea").value = text || "";
      return li;
    };
    list.addEventListener("input", function (event) {
      var li = event.target.closest("li");
      if (li) stepPreview(li);
    });
    // Undo (Alt+Z or the Undo button): each tool remembers the list as it was before it ran.
    var history = [];
    var undoButton = root.querySelector("[data-step-undo]");
    var showUndo = function () { if (undoButton) undoButton.disabled = !history.length; };
    var snapshot = function () {
      var items = Array.prototype.slice.call(list.children);
      var active = document.activeElement && document.activeElement.closest ? document.activeElement.closest("#step-list > li") : null;
      return { texts: items.map(function (li) { return li.querySelector("textarea").value; }), focus: Math.max(0, items.indexOf(active)) };
    };
    var undo = function () {
      var last = history.pop();
      showUndo();
      if (!last) return;
      var template = list.querySelector("li");
      while (list.children.length < last.texts.length) list.appendChild(template.cloneNode(true));
      while (list.children.length > last.texts.length) list.lastElementChild.remove();
      Array.prototype.forEach.call(list.children, function (li, i) {
        li.querySelector("textarea").value = last.texts[i];
        stepPreview(li);
      });
      renumber();
      list.dispatchEvent(new CustomEvent("steps-changed", { bubbles: true }));
      list.children[Math.min(last.focus, list.children.length - 1)].querySelector("textarea").focus();
    };
    if (undoButton) undoButton.addEventListener("click", undo);
    document.addEventListener("keydown", function (event) {
      if (event.altKey && !event.ctrlKey && !event.metaKey && (event.key === "z" || event.key === "Z")) {
        event.preventDefault();
        event.stopImmediatePropagation();
        undo();
      }
    }, true);
    showUndo();
    list.addEventListener("click", function (event) {
      var button = event.target.closest("button[data-step]");
      if (!button) return;
      history.push(snapshot());
      showUndo();
      var li = button.closest("li");
      var area = li.querySelector("textarea");
      var focus = li; // where typing goes on: the new step after a split or an add
      switch (button.dataset.step) {
        case "up": if (li.previousElementSibling) list.insertBefore(li, li.previousElementSibling); break;
        case "down": if (li.nextElementSibling) list.insertBefore(li.nextElementSibling, li); break;
        case "add": focus = blank(""); li.after(focus); break;
        case "split":
          var at = area.selectionStart || 0;
          var rest = area.value.slice(at).trim();
          area.value = area.value.slice(0, at).trim();
          var added = blank(rest);
          li.after(added);
          stepPreview(added);
          focus = added;
          break;
        case "merge":
          var next = li.nextElementSibling;
          if (next) { area.value = (area.value + " " + next.querySelector("textarea").value).trim(); next.remove(); }
          break;
        case "delete":
          focus = li.previousElementSibling || li.nextElementSibling;
          if (list.children.length > 1) li.remove(); else area.value = "";
          break;
      }
      stepPreview(li);
      renumber();
      list.dispatchEvent(new CustomEvent("steps-changed", { bubbles: true }));
      if (!focus || !list.contains(focus)) focus = list.querySelector("li");
      focus.querySelector("textarea").focus();
    });
    // Alt+key runs the tool of the step being edited (the buttons show their key).
    list.addEventListener("keydown", function (event) {
      if (!event.altKey) return;
      var li = event.target.closest("li");
      if (!li) return;
      var key = event.key.length === 1 ? event.key.toLowerCase() : event.key;
      var button = li.querySelector('button[data-step-key="' + key + '"]');
      if (!button) return;
      event.preventDefault();
      button.click();
    });
    list.querySelectorAll("li").forEach(stepPreview);
  }

  // "Split at the cursor": the offset comes from where the cursor is in the text.
  function bindSplit(root) {
    root.querySelectorAll("[data-split-from]").forEach(function (button) {
      button.addEventListener("click", function () {
        var source = document.getElementById(button.dataset.splitFrom);
        var at = button.form.querySelector("input[name=at]");
        if (source && at && source.selectionStart) at.value = source.selectionStart;
      });
    });
  }

  // The menu collapses behind a button on narrow screens; without JS it stays open (CSS keys on html.js).
  function bindNavToggle() {
    var button = document.querySelector("[data-nav-toggle]");
    if (!button) return;
    button.addEventListener("click", function () {
      var open = button.closest("header").classList.toggle("nav-open");
      button.setAttribute("aria-expanded", open ? "true" : "false");
    });
  }

  // Work pages hold a lock on their question: while the page is open it is renewed by a POST every few
  // minutes (opening a page never changes anything on the server).
  var HEARTBEAT_MS = 5 * 60 * 1000;

  function post(url) {
    var token = document.querySelector('meta[name="csrf-token"]');
    return fetch(url, { method: "POST", credentials: "same-origin", headers: { "X-CSRFToken": token ? token.content : "" } });
  }

  function bindHeartbeat(root) {
    root.querySelectorAll("[data-heartbeat]").forEach(function (el) {
      window.setInterval(function () { post(el.dataset.heartbeat); }, HEARTBEAT_MS);
    });
  }

  // The session's current CSRF token, fetched again after a sign-in in another tab rotated it: the page's
  // meta tag (read by every fetch and htmx request) and its forms' fields take it, so no work is lost.
  function refreshCsrf(url) {
    return fetch(url, { credentials: "same-origin", headers: { Accept: "application/json" } })
      .then(function (response) { return response.ok ? response.json() : Promise.reject(response.status); })
      .then(function (data) {
        var meta = document.querySelector('meta[name="csrf-token"]');
        if (meta) meta.content = data.token;
        document.querySelectorAll("input[name=csrfmiddlewaretoken]").forEach(function (input) { input.value = data.token; });
        return data.token;
      });
  }
  window.k12vistaRefreshCsrf = refreshCsrf;

  // Autosaving forms: the status says at once when a save failed or was refused, a save that could not reach
  // the server is tried again by itself (waiting 1, 2, 4 … 60 s), a stale CSRF token is fetched again, and
  // leaving the page with changes not yet saved asks first. Messages come translated from the status
  // element's data-* (read once: a saved answer replaces the element).
  function bindAutosave(root) {
    root.querySelectorAll("form[data-warn-unsaved]").forEach(function (form) {
      var status = form.querySelector("#autosave-status") || document.getElementById("autosave-status");
      var texts = status ? Object.assign({}, status.dataset) : {};
      var dirty = false;
      var failures = 0;
      var retryTimer = null;
      var tokenRefreshed = false;
      var say = function (key, cls, n) {
        status = document.getElementById("autosave-status") || status;
        if (!status) return;
        status.textContent = (texts[key] || "").replace("%s", String(n));
        status.className = cls || "muted";
      };
      var saveAgain = function () { if (window.htmx) window.htmx.trigger(form, "retry-save"); };
      var retryLater = function () {
        failures += 1;
        var seconds = Math.min(60, Math.pow(2, failures - 1));
        say("retry", "status-failed", seconds);
        clearTimeout(retryTimer);
        retryTimer = setTimeout(saveAgain, seconds * 1000);
      };
      form.addEventListener("input", function () { dirty = true; say("unsaved"); });
      form.addEventListener("steps-changed", function () { dirty = true; say("unsaved"); });
      form.addEventListener("submit", function () { dirty = false; });
      form.addEventListener("htmx:afterRequest", function (event) {
        if (event.detail.successful) { dirty = false; failures = 0; tokenRefreshed = false; }
      });
      form.addEventListener("htmx:responseError", function (event) {
        var xhr = event.detail.xhr;
        if (xhr.status === 409) {
          say("conflict", "status-failed");
        } else if (xhr.status === 403 && texts.csrfUrl && !tokenRefreshed && /id="error-csrf"/.test(xhr.responseText)) {
          tokenRefreshed = true;
          refreshCsrf(texts.csrfUrl).then(saveAgain, retryLater);
        } else if (xhr.status >= 500 || xhr.status === 429) {
          retryLater();
        } else {
          say("failed", "status-failed");
        }
      });
      form.addEventListener("htmx:sendError", retryLater);
      // After a conflict: "Keep mine" saves this page's version over the one now saved (its version is in the
      // button), "Load the other version" leaves this page's changes on purpose.
      document.addEventListener("click", function (event) {
        var keep = event.target.closest("[data-keep-mine]");
        var version = form.querySelector("input[name=version]");
        if (keep && version) version.value = keep.dataset.keepMine;
        if (event.target.closest("[data-load-theirs]")) dirty = false;
      });
      window.addEventListener("beforeunload", function (event) {
        if (!dirty) return;
        event.preventDefault();
        event.returnValue = texts.leave || "";
      });
    });
  }

  // When a job shown on the page ends, the page fetches itself again and puts in what the job produced:
  // the regions marked data-refresh-on-job, or the whole of <main> on pages that mark none.
  function refreshAfterJob() {
    fetch(window.location.href, { credentials: "same-origin" })
      .then(function (response) { return response.ok ? response.text() : Promise.reject(response.status); })
      .then(function (html) {
        var fresh = new DOMParser().parseFromString(html, "text/html");
        var regions = document.querySelectorAll("main [data-refresh-on-job][id]");
        var pairs = regions.length
          ? Array.prototype.map.call(regions, function (el) { return [el, fresh.getElementById(el.id)]; })
          : [[document.querySelector("main"), fresh.querySelector("main")]];
        pairs.forEach(function (pair) {
          if (!pair[0] || !pair[1]) return;
          var replacement = document.importNode(pair[1], true);
          pair[0].replaceWith(replacement);
          if (window.htmx) window.htmx.process(replacement);
          typeset(replacement);
          placeBoxes(replacement);
        });
      })
      .catch(function () { /* the page still shows the finished job; a reload shows the rest */ });
  }

  // Filters that apply when chosen: a change is copied at once into the form that acts on them (its hidden
  // fields of the same names), then the filter form is sent to show what it selects.
  function bindApplyOnChange(root) {
    root.querySelectorAll("form[data-apply-on-change]").forEach(function (form) {
      var target = document.getElementById(form.dataset.applyOnChange);
      form.addEventListener("change", function (event) {
        var field = event.target;
        if (!field.name) return;
        if (target) {
          target.querySelectorAll("input[type=hidden]").forEach(function (copy) {
            if (copy.name === field.name) copy.value = field.value;
          });
        }
        form.requestSubmit ? form.requestSubmit() : form.submit();
      });
    });
  }

  // The user page warns, before saving, when the roles ticked put the person under the blind rule.
  function bindBlindRuleWarning() {
    var note = document.getElementById("blind-rule-warning");
    if (!note) return;
    var form = note.closest("form");
    var readers = note.dataset.readers.split(",");
    var update = function () {
      var ticked = Array.prototype.map.call(form.querySelectorAll("input[name=roles]:checked"), function (box) { return box.value; });
      note.hidden = !(ticked.indexOf(note.dataset.annotator) >= 0 && ticked.some(function (r) { return readers.indexOf(r) >= 0; }));
    };
    form.addEventListener("change", update);
    update();
  }

  // A box that scrolls sideways (a wide table on a phone) takes the focus, so that the arrow keys can scroll
  // what a mouse or a finger would; checked again when the window's width changes.
  function focusableScrollers() {
    document.querySelectorAll("main .card, main [style*='overflow']").forEach(function (box) {
      var scrolls = box.scrollWidth > box.clientWidth + 1 && /auto|scroll/.test(getComputedStyle(box).overflowX);
      if (scrolls && !box.hasAttribute("tabindex")) {
        box.setAttribute("tabindex", "0");
        box.dataset.scrollFocus = "1";
      } else if (!scrolls && box.dataset.scrollFocus) {
        box.removeAttribute("tabindex");
        delete box.dataset.scrollFocus;
      }
    });
  }
  var resizeTimer = null;
  window.addEventListener("resize", function () { clearTimeout(resizeTimer); resizeTimer = setTimeout(focusableScrollers, 200); });
  window.addEventListener("load", focusableScrollers);

  document.documentElement.classList.add("js");

  document.addEventListener("DOMContentLoaded", function () {
    bindShortcuts();
    bindKeysHelp();
    bindNavToggle();
    bindHeartbeat(document);
    bindAutosave(document);
    document.body.addEventListener("job-finished", refreshAfterJob);
    bindSplit(document);
    placeBoxes(document);
    bindStepEditor(document);
    var token = document.querySelector('meta[name="csrf-token"]');
    if (token) {
      document.body.addEventListener("htmx:configRequest", function (event) {
        event.detail.headers["X-CSRFToken"] = token.content;
      });
    }
    typeset(document);
    bindPreviews(document);
    // Fragments swapped in by htmx get the same treatment.
    document.body.addEventListener("htmx:load", function (event) {
      typeset(event.detail.elt.parentNode || event.detail.elt);
      bindPreviews(event.detail.elt);
    });
    bindApplyOnChange(document);
    bindBlindRuleWarning();
    document.querySelectorAll("[data-autosubmit]").forEach(function (el) {
      el.addEventListener("change", function () { el.form.submit(); });
    });
  });
})();
