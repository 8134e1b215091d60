// The step-labelling screen: keys 1-9 label the current step and move on (an error
// label opens its reason; Enter or Esc there goes on to the next step), J/K and
// the arrows move between steps, U undoes the last change, "?" (or "d") opens
// the label definitions, and the labels autosave to the API with the draft's
// version (a save from another tab is refused, never overwritten). Without
// JavaScript the form still saves and submits by itself.
(function () {
  "use strict";

  // A label is saved at once (the person sees it within a blink); typing a reason waits for a pause.
  var LABEL_SAVE_DELAY_MS = 30;
  var TYPING_SAVE_DELAY_MS = 800;

  function init() {
    var form = document.getElementById("labelling-form");
    if (!form) return;
    var steps = Array.prototype.slice.call(form.querySelectorAll(".label-step"));
    var definitions = document.getElementById("label-definitions");
    var readonly = form.hasAttribute("data-readonly");
    var current = -1;

    function focusStep(index, scroll) {
      if (!steps.length) return;
      index = Math.max(0, Math.min(steps.length - 1, index));
      if (current >= 0 && steps[current]) steps[current].classList.remove("focused");
      current = index;
      steps[current].classList.add("focused");
      steps[current].focus({ preventScroll: true });
      if (scroll !== false) steps[current].scrollIntoView({ block: "nearest" });
      showCounter();
    }

    // --- what each step shows: the chosen label's name, its reason box, the counter ------
    var counterCurrent = document.getElementById("label-current");
    var counterDone = document.getElementById("label-done");
    function checkedOf(step) { return step.querySelector("input[type=radio]:checked"); }
    function reasonOf(step) { return step.querySelector("textarea"); }
    function showStep(step) {
      var checked = checkedOf(step);
      var reason = reasonOf(step);
      var name = step.querySelector(".chosen-name");
      if (name) name.textContent = checked ? checked.getAttribute("aria-label") : "";
      if (reason) reason.hidden = !(checked && checked.dataset.error === "1") && !reason.value.trim();
    }
    function showCounter() {
      if (counterCurrent) counterCurrent.textContent = String(Math.max(current, 0) + 1);
      if (counterDone) counterDone.textContent = String(steps.filter(checkedOf).length);
    }
    steps.forEach(showStep);

    // --- undo: each change remembers what the step held before it ----------------------
    var history = [];
    function snapshot(step) {
      var checked = checkedOf(step);
      var reason = reasonOf(step);
      return { step: step, label: checked ? checked.value : "", reason: reason ? reason.value : "" };
    }
    function undo() {
      var last = history.pop();
      if (!last) return;
      var step = last.step;
      step.querySelectorAll("input[type=radio]").forEach(function (r) { r.checked = r.value === last.label; });
      var reason = reasonOf(step);
      if (reason) reason.value = last.reason;
      showStep(step);
      focusStep(steps.indexOf(step));
      form.dispatchEvent(new Event("change", { bubbles: true }));
      if (status && form.dataset.undoneText) status.textContent = form.dataset.undoneText;
    }
    // A label chosen with the mouse is undoable too (remembered before the click changes it).
    form.addEventListener("pointerdown", function (event) {
      var choice = event.target.closest(".label-choice");
      if (choice && !readonly) history.push(snapshot(choice.closest(".label-step")));
    });

    function toggleDefinitions() {
      if (definitions) definitions.open = !definitions.open;
    }

    function choose(step, key) {
      var radio = step.querySelector('input[type=radio][data-key="' + key + '"]');
      if (!radio || radio.disabled) return;
      history.push(snapshot(step));
      radio.checked = true;
      var reason = reasonOf(step);
      // A correct step has no reason: choosing CS clears one left from an error label.
      if (radio.dataset.error !== "1" && reason) reason.value = "";
      showStep(step);
      radio.dispatchEvent(new Event("change", { bubbles: true }));
      if (radio.dataset.error === "1") {
        // An error label needs a reason: go straight to it.
        if (reason) reason.focus();
      } else if (current < steps.length - 1) {
        focusStep(current + 1);
      } else {
        showCounter();
      }
    }

    // A reason edit is one undoable change, remembered when the box is entered.
    form.addEventListener("focusin", function (event) {
      if (event.target.matches("textarea")) event.target.dataset.before = JSON.stringify(snapshot(event.target.closest(".label-step")));
    });
    form.addEventListener("focusout", function (event) {
      var area = event.target;
      if (!area.matches("textarea") || !area.dataset.before) return;
      var before = JSON.parse(area.dataset.before);
      if (before.reason !== area.value) history.push({ step: area.closest(".label-step"), label: before.label, reason: before.reason });
      delete area.dataset.before;
    });

    // A click anywhere in a step makes it the current one.
    form.addEventListener("focusin", function (event) {
      var step = event.target.closest(".label-step");
      if (!step) return;
      var index = steps.indexOf(step);
      if (index !== current) {
        if (current >= 0 && steps[current]) steps[current].classList.remove("focused");
        current = index;
        step.classList.add("focused");
      }
    });

    document.addEventListener("keydown", function (event) {
      if (event.ctrlKey || event.metaKey || event.altKey) return;
      var target = event.target;
      var typing = target.matches && target.matches("textarea, input[type=text], input[type=number], select");
      if (typing) {
        if (event.key === "Escape" || (event.key === "Enter" && !event.shiftKey && target.matches("textarea.reason"))) {
          // Leave the reason for the next step, so that keys label again (Shift+Enter: a new line).
          var owner = target.closest(".label-step");
          event.preventDefault();
          if (owner) {
            var at = steps.indexOf(owner);
            focusStep(at < steps.length - 1 ? at + 1 : at);
          } else {
            target.blur();
          }
        }
        return;
      }
      if (event.key === "?" || event.key === "d" || event.key === "D") {
        event.preventDefault();
        toggleDefinitions();
        return;
      }
      if (readonly || !steps.length) return;
      if (event.key === "u" || event.key === "U") {
        event.preventDefault();
        undo();
        return;
      }
      if (/^[1-9]$/.test(event.key)) {
        event.preventDefault();
        if (current < 0) focusStep(0);
        choose(steps[current], event.key);
      } else if (event.key === "j" || event.key === "J" || (event.key === "ArrowDown" && !target.matches("input[type=radio]"))) {
        event.preventDefault();
        focusStep(current + 1);
      } else if (event.key === "k" || event.key === "K" || (event.key === "ArrowUp" && !target.matches("input[type=radio]"))) {
        event.preventDefault();
        focusStep(current - 1);
      }
    });

    if (readonly) return;
    // After a refused submit, start at the first step that needs something; otherwise at the first step not
    // labelled yet (a reload mid-item goes on where the person was, never back over step 1).
    var problem = form.querySelector("[data-problem]");
    var unlabelled = steps.filter(function (step) { return !checkedOf(step); })[0];
    var first = problem ? steps.indexOf(problem.closest(".label-step")) : (unlabelled ? steps.indexOf(unlabelled) : 0);
    if (steps.length) (window.whenShown || function (fn) { fn(); })(function () { focusStep(first, !!problem || first > 0); });

    // --- the tab's id and its undo history live in sessionStorage, so they come through a reload -----------
    var store = window.sessionStorage;
    var historyKey = "k12vista-undo:" + form.dataset.draftUrl;
    var navigation = (performance.getEntriesByType && performance.getEntriesByType("navigation")[0]) || {};
    var again = navigation.type === "reload" || navigation.type === "back_forward";
    var writer = again && store.getItem("k12vista-tab");
    if (!writer) {
      writer = Date.now().toString(36) + "-" + Math.random().toString(36).slice(2, 12);
      store.setItem("k12vista-tab", writer);
    }
    var writerInput = form.querySelector("input[name=writer]");
    if (writerInput) writerInput.value = writer;
    function rememberHistory() {
      try {
        store.setItem(historyKey, JSON.stringify(history.slice(-200).map(function (h) {
          return { position: h.step.dataset.position, label: h.label, reason: h.reason };
        })));
      } catch (e) { /* a full storage only costs the undo after a reload */ }
    }
    try {
      (again ? JSON.parse(store.getItem(historyKey) || "[]") : []).forEach(function (h) {
        var step = form.querySelector('.label-step[data-position="' + h.position + '"]');
        if (step) history.push({ step: step, label: h.label, reason: h.reason });
      });
    } catch (e) { /* an unreadable history is no history */ }
    var push = history.push;
    history.push = function () { var n = push.apply(history, arguments); rememberHistory(); return n; };
    var pop = history.pop;
    history.pop = function () { var last = pop.apply(history); rememberHistory(); return last; };

    // --- autosave ---------------------------------------------------------------
    var version = form.querySelector("input[name=version]");
    var status = document.getElementById("autosave-status");
    var token = document.querySelector('meta[name="csrf-token"]');
    var card = document.getElementById("draft-conflict");
    var timer = null;
    var inFlight = null;
    var dirty = false;
    var refused = null; // the 409 answer while the person has not chosen between the two versions
    var rejected = false; // the last save was refused as it stands
    var failures = 0; // saves that could not reach the server in a row: the next retry waits longer
    var leaving = false; // the person chose to load the other version: nothing of this page is saved any more
    var submitting = false; // once the form posts, no draft save may follow it (it would be refused)

    function draft() {
      var labels = {};
      steps.forEach(function (step) {
        var position = step.dataset.position;
        var checked = step.querySelector("input[type=radio]:checked");
        var reason = step.querySelector("textarea");
        labels[position] = { label: checked ? checked.value : "", reason: reason ? reason.value : "" };
      });
      return labels;
    }

    function say(text, isError) {
      if (!status) return;
      status.textContent = text;
      status.classList.toggle("errorlist", !!isError);
    }
    function worded(name, n) { return (form.dataset[name] || "").replace("%s", String(n)); }

    function showConflict(answer) {
      refused = answer;
      if (!card) return;
      var list = card.querySelector("[data-theirs]");
      list.textContent = "";
      Object.keys(answer.draft || {}).sort(function (a, b) { return a - b; }).forEach(function (position) {
        var entry = answer.draft[position];
        var item = document.createElement("li");
        item.textContent = worded("stepText", position) + " " + (entry.label || "—") + (entry.reason ? " · " + entry.reason : "");
        list.appendChild(item);
      });
      card.hidden = false;
      say(form.dataset.conflictText, true);
    }

    function refreshToken() { return window.k12vistaRefreshCsrf(form.dataset.csrfUrl); }

    function put(keepalive) {
      // The active seconds since the last save go with this one; refused or unsent, they are kept for the next.
      var clock = window.k12vistaActiveTime;
      var seconds = clock ? clock.take() : null;
      return fetch(form.dataset.draftUrl, {
        method: "PUT",
        credentials: "same-origin",
        keepalive: !!keepalive,
        headers: { "Content-Type": "application/json", "X-CSRFToken": token ? token.content : "" },
        body: JSON.stringify({ version: Number(version.value), draft: draft(), writer: writer, active_seconds: seconds }),
      }).then(function (response) {
        if (!response.ok && clock) clock.giveBack(seconds);
        return response;
      }, function (error) {
        if (clock) clock.giveBack(seconds);
        throw error;
      });
    }

    function retryLater() {
      failures += 1;
      var seconds = Math.min(60, Math.pow(2, failures - 1));
      say(worded("retryText", seconds), true);
      dirty = true;
      if (timer) clearTimeout(timer);
      timer = setTimeout(save, seconds * 1000);
    }

    function save(tokenRefreshed) {
      timer = null;
      if (submitting || leaving) return Promise.resolve();
      if (refused) { dirty = true; say(form.dataset.conflictText, true); return Promise.resolve(); }
      if (inFlight) { dirty = true; return inFlight; }
      dirty = false;
      var answered = false;
      var staleToken = false;
      inFlight = put(false).then(function (response) {
        answered = true;
        return response.json().catch(function () { return {}; }).then(function (data) {
          if (response.ok) {
            failures = 0;
            rejected = false;
            version.value = data.version;
            say(form.dataset.savedText + " · v" + data.version, false);
          } else if (response.status === 409) {
            showConflict(data);
          } else if (response.status === 403 && !tokenRefreshed && /CSRF/i.test(data.detail || "")) {
            staleToken = true; // signed in again in another tab: fetch the new token and save again
          } else if (response.status >= 500 || response.status === 429) {
            retryLater();
          } else {
            rejected = true; // refused as it stands (400): saying so is enough, a retry would be refused too
            say(form.dataset.failedText + " " + (data.detail || response.status), true);
          }
        });
      }).catch(function () {
        if (!answered) retryLater(); // the server could not be reached: try again, waiting longer each time
      }).then(function () {
        inFlight = null;
        if (staleToken) return refreshToken().then(function () { return save(true); }, retryLater);
        if (dirty && !timer && !refused && !failures) return save();
      });
      return inFlight;
    }

    function schedule(delay) {
      if (submitting || leaving) return;
      dirty = true;
      if (refused) { say(form.dataset.conflictText, true); return; }
      if (timer) clearTimeout(timer);
      if (failures) delay = Math.max(delay, 1000);
      say(form.dataset.savingText || "", false);
      timer = setTimeout(save, delay);
    }

    if (card) {
      card.querySelector("#keep-mine").addEventListener("click", function () {
        // Keep this page's labels: save them over the version saved elsewhere.
        version.value = refused ? refused.version : version.value;
        refused = null;
        card.hidden = true;
        save();
      });
      card.querySelector("#load-theirs").addEventListener("click", function () {
        leaving = true;
        store.removeItem(historyKey);
        window.location.reload();
      });
    }

    // A label saved when the page goes away: a key pressed just before a reload still reaches the server.
    window.addEventListener("pagehide", function () {
      if (timer && !submitting && !leaving && !refused) {
        clearTimeout(timer);
        timer = null;
        put(true);
      }
    });
    // Work that cannot be saved (a conflict waiting for a choice, a server out of reach) is not left silently.
    window.addEventListener("beforeunload", function (event) {
      if (submitting || leaving || !(refused || failures || rejected)) return;
      event.preventDefault();
      event.returnValue = form.dataset.leaveText || "";
    });

    form.addEventListener("change", function (event) {
      if (event.target.matches && event.target.matches("input[type=radio]")) {
        var owner = event.target.closest(".label-step");
        var reason = reasonOf(owner);
        if (event.target.dataset.error !== "1" && reason) reason.value = "";
        showStep(owner);
      }
      showCounter();
      schedule(LABEL_SAVE_DELAY_MS);
    });
    form.addEventListener("input", function () { schedule(TYPING_SAVE_DELAY_MS); });

    // Save and Submit post the form with the version the last autosave returned:
    // let a pending autosave finish first, or the post would look stale.
    form.addEventListener("submit", function (event) {
      if ((!timer || failures) && !inFlight) { submitting = true; store.removeItem(historyKey); return; }
      event.preventDefault();
      var submitter = event.submitter;
      if (timer) { clearTimeout(timer); timer = null; }
      Promise.resolve(inFlight || save()).then(function () {
        return inFlight;
      }).then(function () {
        if (submitter) form.requestSubmit(submitter); else form.requestSubmit();
      });
    });
  }

  document.addEventListener("DOMContentLoaded", init);
})();
