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
    // After a refused submit, start at the first step that needs something.
    var problem = form.querySelector("[data-problem]");
    var first = problem ? steps.indexOf(problem.closest(".label-step")) : 0;
    if (steps.length) focusStep(first, !!problem);

    // --- autosave ---------------------------------------------------------------
    var version = form.querySelector("input[name=version]");
    var status = document.getElementById("autosave-status");
    var token = document.querySelector('meta[name="csrf-token"]');
    var timer = null;
    var inFlight = null;
    var dirty = false;
    var refused = false;
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

    function save() {
      timer = null;
      if (submitting) return Promise.resolve();
      if (inFlight || refused) { dirty = !refused; return inFlight || Promise.resolve(); }
      dirty = false;
      inFlight = fetch(form.dataset.draftUrl, {
        method: "PUT",
        credentials: "same-origin",
        headers: { "Content-Type": "application/json", "X-CSRFToken": token ? token.content : "" },
        body: JSON.stringify({ version: Number(version.value), draft: draft() }),
      }).then(function (response) {
        return response.json().then(function (data) {
          if (response.ok) {
            version.value = data.version;
            say(form.dataset.savedText + " · v" + data.version, false);
          } else {
            // 409: saved from elsewhere. Stop autosaving; the person reloads or saves deliberately.
            if (response.status === 409) refused = true;
            say(form.dataset.failedText + " " + (data.detail || response.status), true);
          }
        });
      }).catch(function (error) {
        say(form.dataset.failedText + " " + error, true);
      }).then(function () {
        inFlight = null;
        if (dirty) return save();
      });
      return inFlight;
    }

    function schedule(delay) {
      if (submitting) return;
      dirty = true;
      if (timer) clearTimeout(timer);
      say(form.dataset.savingText || "", false);
      timer = setTimeout(save, delay);
    }

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
      if (!timer && !inFlight) { submitting = true; return; }
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
