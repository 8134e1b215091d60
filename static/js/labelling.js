// The step-labelling screen: keys 1-9 label the current step, J/K and the
// arrows move between steps, "?" (or "d") opens the label definitions, and the
// labels autosave to the API with the draft's version (a save from another tab
// is refused, never overwritten). Without JavaScript the form still saves and
// submits by itself.
(function () {
  "use strict";

  var AUTOSAVE_DELAY_MS = 800;

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
    }

    function toggleDefinitions() {
      if (definitions) definitions.open = !definitions.open;
    }

    function choose(step, key) {
      var radio = step.querySelector('input[type=radio][data-key="' + key + '"]');
      if (!radio || radio.disabled) return;
      radio.checked = true;
      radio.dispatchEvent(new Event("change", { bubbles: true }));
      var reason = step.querySelector("textarea");
      if (radio.dataset.error === "1") {
        // An error label needs a reason: go straight to it.
        if (reason && !reason.value.trim()) reason.focus();
      } else if (current < steps.length - 1) {
        focusStep(current + 1);
      }
    }

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
        if (event.key === "Escape") {
          // Leave the reason and return to the step, so that keys label again.
          var step = target.closest(".label-step");
          event.preventDefault();
          if (step) focusStep(steps.indexOf(step), false);
          else target.blur();
        }
        return;
      }
      if (event.key === "?" || event.key === "d" || event.key === "D") {
        event.preventDefault();
        toggleDefinitions();
        return;
      }
      if (readonly || !steps.length) return;
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

    function schedule() {
      dirty = true;
      if (timer) clearTimeout(timer);
      timer = setTimeout(save, AUTOSAVE_DELAY_MS);
    }

    form.addEventListener("change", schedule);
    form.addEventListener("input", schedule);

    // Save and Submit post the form with the version the last autosave returned:
    // let a pending autosave finish first, or the post would look stale.
    form.addEventListener("submit", function (event) {
      if (!timer && !inFlight) return;
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
