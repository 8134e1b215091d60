// Keys for the inspector's decisions (the keys are listed in the page's "?" dialog).
// Audit rating: A passes every dimension not yet rated, P/1 passes the current one and moves on, F/2 fails
// it and opens its note, J/K move, Esc in a note goes on, Enter saves and opens the next item; the first
// dimension has the focus when the page opens, so an all-pass item takes A, Enter.
// Adjudication: 1-9 set the current step's gold label (an error label takes the reason of an annotator who
// gave it, when the box is empty) and go to the next disagreement, J/K move, R opens the reason, Enter sets
// the gold labels; the first disagreement has the focus when the page opens.
(function () {
  "use strict";

  function typing(el) { return window.k12vistaTypingIn ? window.k12vistaTypingIn(el) : false; }
  function dialogOpen() { return !!document.querySelector("dialog[open]"); }
  function slice(list) { return Array.prototype.slice.call(list); }
  function submitWith(form, button) {
    if (form.requestSubmit) form.requestSubmit(button || undefined); else (button || form).click();
  }

  function bindRating() {
    var form = document.getElementById("rating-form");
    if (!form) return;
    var dims = slice(form.querySelectorAll("fieldset.dimension"));
    var save = document.getElementById("save-rating");
    if (!dims.length) return;
    var current = 0;
    var radio = function (dim, value) { return dim.querySelector('input[type=radio][value="' + value + '"]'); };
    var rated = function (dim) { return !!dim.querySelector("input[type=radio]:checked"); };
    var note = function (dim) { return dim.querySelector("textarea"); };
    function focusDim(index) {
      if (index >= dims.length) { current = dims.length; dims.forEach(function (d) { d.classList.remove("focused"); }); if (save) save.focus(); return; }
      current = Math.max(0, index);
      dims.forEach(function (d, i) { d.classList.toggle("focused", i === current); });
      var dim = dims[current];
      (dim.querySelector("input[type=radio]:checked") || dim.querySelector("input[type=radio]")).focus();
    }
    function nextAfter(index) {
      // The next dimension still to rate, or the save button when all are rated.
      for (var i = index + 1; i < dims.length; i++) if (!rated(dims[i])) return i;
      return dims.length;
    }
    function choose(value) {
      var dim = dims[Math.min(current, dims.length - 1)];
      var input = radio(dim, value);
      if (!input) return;
      input.checked = true;
      input.dispatchEvent(new Event("change", { bubbles: true }));
      if (value === "fail") { var box = note(dim); if (box) box.focus(); } else focusDim(nextAfter(current));
    }
    form.addEventListener("focusin", function (event) {
      var dim = event.target.closest("fieldset.dimension");
      if (dim) { current = dims.indexOf(dim); dims.forEach(function (d) { d.classList.toggle("focused", d === dim); }); }
    });
    document.addEventListener("keydown", function (event) {
      if (event.ctrlKey || event.metaKey || event.altKey || dialogOpen()) return;
      var target = event.target;
      if (typing(target)) {
        if (event.key === "Escape" && target.closest("fieldset.dimension")) {
          event.preventDefault();
          focusDim(nextAfter(dims.indexOf(target.closest("fieldset.dimension"))));
        }
        return;
      }
      var key = event.key.toLowerCase();
      if (key === "a") {
        event.preventDefault();
        dims.forEach(function (dim) { if (!rated(dim)) radio(dim, "pass").checked = true; });
        form.dispatchEvent(new Event("change", { bubbles: true }));
        focusDim(dims.length);
      } else if (key === "p" || key === "1") {
        event.preventDefault();
        choose("pass");
      } else if (key === "f" || key === "2") {
        event.preventDefault();
        choose("fail");
      } else if (key === "j") {
        event.preventDefault();
        focusDim(Math.min(current + 1, dims.length - 1));
      } else if (key === "k") {
        event.preventDefault();
        focusDim(current - 1);
      } else if (key === "enter" && (!target.matches || !target.matches("button, a"))) {
        event.preventDefault();
        submitWith(form, save);
      }
    });
    var first = dims.filter(function (d) { return !rated(d); })[0];
    whenShown(function () { focusDim(first ? dims.indexOf(first) : 0); });
  }

  function bindAdjudication() {
    var form = document.getElementById("adjudication-form");
    if (!form) return;
    var rows = slice(form.querySelectorAll("tr[data-position]")).filter(function (row) { return row.querySelector("select"); });
    var submit = document.getElementById("adjudication-submit");
    if (!rows.length) return;
    var current = 0;
    var select = function (row) { return row.querySelector("select"); };
    var reason = function (row) { return row.querySelector("textarea"); };
    function focusRow(index) {
      if (index >= rows.length) { rows.forEach(function (r) { r.classList.remove("focused"); }); current = rows.length; if (submit) submit.focus(); return; }
      current = Math.max(0, index);
      rows.forEach(function (r, i) { r.classList.toggle("focused", i === current); });
      select(rows[current]).focus({ preventScroll: true });
      rows[current].scrollIntoView({ block: "nearest" });
    }
    function nextOpen(index) {
      // The next disagreement without a gold label chosen, or the submit button.
      for (var i = index + 1; i < rows.length; i++) {
        if (rows[i].hasAttribute("data-disagree") && !select(rows[i]).value) return i;
      }
      return rows.length;
    }
    function choose(row, key) {
      var option = select(row).querySelectorAll("option[value]:not([value=''])")[Number(key) - 1];
      if (!option) return;
      select(row).value = option.value;
      var isError = (" " + (select(row).dataset.errorLabels || "") + " ").indexOf(" " + option.value + " ") >= 0;
      var box = reason(row);
      if (box && (!box.value.trim() || box.dataset.prefilled === "1")) {
        var given = "";
        if (isError) {
          slice(row.querySelectorAll('td[data-label="' + option.value + '"][data-reason]')).some(function (cell) {
            given = cell.dataset.reason.trim();
            return !!given;
          });
        }
        box.value = given;
        box.dataset.prefilled = given ? "1" : "";
      }
      select(row).dispatchEvent(new Event("change", { bubbles: true }));
      if (isError && box && !box.value.trim()) box.focus();
      else focusRow(nextOpen(rows.indexOf(row)));
    }
    form.addEventListener("focusin", function (event) {
      var row = event.target.closest("tr[data-position]");
      if (row && rows.indexOf(row) >= 0) { current = rows.indexOf(row); rows.forEach(function (r) { r.classList.toggle("focused", r === row); }); }
    });
    form.addEventListener("input", function (event) { if (event.target.matches("textarea")) event.target.dataset.prefilled = ""; });
    document.addEventListener("keydown", function (event) {
      if (event.ctrlKey || event.metaKey || event.altKey || dialogOpen()) return;
      var target = event.target;
      if (typing(target)) {
        if (event.key === "Escape" && target.closest("tr[data-position]")) {
          event.preventDefault();
          focusRow(nextOpen(rows.indexOf(target.closest("tr[data-position]"))));
        }
        return;
      }
      var key = event.key.toLowerCase();
      var row = rows[Math.min(current, rows.length - 1)];
      if (/^[1-9]$/.test(key)) {
        event.preventDefault();
        choose(row, key);
      } else if (key === "j") {
        event.preventDefault();
        focusRow(Math.min(current + 1, rows.length - 1));
      } else if (key === "k") {
        event.preventDefault();
        focusRow(current - 1);
      } else if (key === "r" && reason(row)) {
        event.preventDefault();
        reason(row).focus();
      } else if (key === "enter" && (!target.matches || !target.matches("button, a"))) {
        event.preventDefault();
        submitWith(form, submit);
      }
    });
    var first = rows.filter(function (r) { return r.hasAttribute("data-disagree") && !select(r).value; })[0];
    whenShown(function () { focusRow(first ? rows.indexOf(first) : 0); });
  }

  // (fonts.js defines window.whenShown; a page without it is shown at once)
  function whenShown(fn) { (window.whenShown || function (f) { f(); })(fn); }

  document.addEventListener("DOMContentLoaded", function () {
    bindRating();
    bindAdjudication();
  });
})();
