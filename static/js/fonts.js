// The page is shown once the bundled Chinese font's ranges for its text are in (issue 25, fault 7).
// Chromium, on a machine with no Chinese font of its own, may keep drawing a text laid out before its
// unicode-range face arrived in the fallback font (boxes) even after the face has loaded. So the body is not
// laid out (content-visibility: hidden, html.fonts-pending in app.css) until the regular and bold faces that
// cover the page's text are loaded; k12vista/fonts.py has preloaded those files with the page, so the wait
// is short, and app.css shows the page after 3 s whatever happens (as font-display: block would).
(function () {
  "use strict";
  var root = document.documentElement;
  var waiting = [];
  function reveal() {
    if (!root.classList.contains("fonts-pending")) return;
    root.classList.remove("fonts-pending");
    // An autofocus control could not take the focus while the body was not laid out (the browser drops it):
    // it takes it now, unless the person has put the focus somewhere meanwhile.
    var auto = document.querySelector("[autofocus]");
    if (auto && (!document.activeElement || document.activeElement === document.body)) auto.focus();
    waiting.splice(0).forEach(function (fn) { fn(); });
  }
  // Nothing in a body that is not laid out can take the focus (focus() on it does nothing), so a page that puts
  // the focus somewhere when it opens does it through this: at once when shown, else once it is shown.
  window.whenShown = function (fn) {
    if (root.classList.contains("fonts-pending")) waiting.push(fn); else fn();
  };
  if (!document.fonts || !document.fonts.load || !document.body) { reveal(); return; }
  var bold = Array.prototype.map.call(
    document.querySelectorAll("h1, h2, h3, h4, h5, h6, th, label, strong, b, dt, figcaption, .brand"),
    function (el) { return el.textContent; }).join("");
  var family = '"Noto Sans SC"';
  Promise.all([
    document.fonts.load("400 16px " + family, document.body.textContent || "0"),
    document.fonts.load("700 16px " + family, bold || "0"),
  ]).then(reveal, reveal);
  window.setTimeout(reveal, 3000);
  // app.css shows the body after 3 s by itself (an animation): the page is shown from that moment on, so the
  // focus it waits for is given then too, not when a timer on a busy main thread gets round to it.
  document.body.addEventListener("animationend", function (event) {
    if (event.animationName === "fonts-timeout") reveal();
  });
})();
