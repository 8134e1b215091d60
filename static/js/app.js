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

  document.addEventListener("DOMContentLoaded", function () {
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
    document.querySelectorAll("[data-autosubmit]").forEach(function (el) {
      el.addEventListener("change", function () { el.form.submit(); });
    });
  });
})();
