// Active time per item, as Potato and PRM800K record it: seconds count only while the tab is
// visible and the person pressed a key, clicked or moved within the last minute, so a page left
// open over lunch adds nothing. Every save sends the seconds counted since the last save
// ("active_seconds"); the server adds them to the item (clamped there: the number is the page's word).
(function () {
  "use strict";
  var IDLE_MS = 60000;
  var TICK_MS = 1000;
  var lastInput = Date.now();
  var pending = 0;

  function touch() { lastInput = Date.now(); }
  ["keydown", "pointerdown", "pointermove", "wheel", "touchstart", "input"].forEach(function (name) {
    document.addEventListener(name, touch, { passive: true, capture: true });
  });
  document.addEventListener("visibilitychange", function () {
    if (document.visibilityState === "visible") touch();
  });
  setInterval(function () {
    if (document.visibilityState === "visible" && Date.now() - lastInput < IDLE_MS) pending += TICK_MS / 1000;
  }, TICK_MS);

  // take() hands the seconds to one save; giveBack() returns them when that save was not accepted.
  window.k12vistaActiveTime = {
    take: function () { var seconds = Math.round(pending); pending = 0; return seconds; },
    giveBack: function (seconds) { pending += seconds || 0; },
    peek: function () { return Math.round(pending); },
  };

  function field(form) {
    var input = form.querySelector("input[name=active_seconds]");
    if (!input) {
      input = document.createElement("input");
      input.type = "hidden";
      input.name = "active_seconds";
      form.appendChild(input);
    }
    return input;
  }

  // A plain form submit (submit, submit and next): the page is left, so the seconds go with it. Added to
  // what the field holds, as a page may hold back a submit (to save first) and send it again.
  document.addEventListener("submit", function (event) {
    var form = event.target;
    if (!form || !form.matches || !form.matches("form[data-active-time]")) return;
    var input = field(form);
    input.value = String((Number(input.value) || 0) + window.k12vistaActiveTime.take());
  }, true);

  // An htmx autosave from such a form carries the seconds too, and gives them back when refused.
  document.addEventListener("htmx:configRequest", function (event) {
    var form = event.detail.elt && event.detail.elt.closest && event.detail.elt.closest("form[data-active-time]");
    if (!form) return;
    var seconds = window.k12vistaActiveTime.take();
    event.detail.elt.dataset.activeSent = String(seconds);
    if (event.detail.formData) event.detail.formData.set("active_seconds", String(seconds));
    else event.detail.parameters.active_seconds = String(seconds);
  });
  document.addEventListener("htmx:afterRequest", function (event) {
    var elt = event.detail.elt;
    if (!elt || !elt.dataset || elt.dataset.activeSent === undefined) return;
    if (!event.detail.successful) window.k12vistaActiveTime.giveBack(Number(elt.dataset.activeSent));
    delete elt.dataset.activeSent;
  });
})();
