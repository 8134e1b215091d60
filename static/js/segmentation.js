// The segmentation screen (templates/annotation/segmentation.html): zoom and pan on each page, boxes
// selected, drawn, dragged and resized over it, and the keyboard shortcuts. Every change is one POST
// (htmx.ajax) to the repair URL, which answers with the workspace re-rendered; nothing is kept here
// but the zoom and the selection, which are put back after each swap.
(function () {
  "use strict";
  var zoom = 1;
  var state = { first: null, second: null, figure: null, mode: null, page: null };

  function text(key) {
    var el = document.querySelector('#seg-text [data-key="' + key + '"]');
    return el ? el.textContent.trim() : key;
  }
  function workspace() { return document.getElementById("seg-workspace"); }
  function say(message) { var el = document.getElementById("seg-mode"); if (el) el.textContent = message || ""; }

  function post(values) {
    var ws = workspace();
    state.mode = null;
    say("");
    return htmx.ajax("POST", ws.dataset.repairUrl, { target: "#seg-workspace", swap: "outerHTML", values: values });
  }

  // Client coordinates to PDF points on an svg whose viewBox is the page in points.
  function toPoints(svg, event) {
    var point = svg.createSVGPoint();
    point.x = event.clientX;
    point.y = event.clientY;
    var p = point.matrixTransform(svg.getScreenCTM().inverse());
    return { x: Math.round(p.x * 100) / 100, y: Math.round(p.y * 100) / 100 };
  }

  function applyZoom() {
    document.querySelectorAll(".seg-svg").forEach(function (svg) {
      svg.style.width = (100 * zoom) + "%";
    });
  }

  function showSelection() {
    document.querySelectorAll("#seg-workspace [data-question]").forEach(function (el) {
      var id = el.dataset.question;
      el.classList.toggle("selected", id === state.first);
      el.classList.toggle("selected-second", id === state.second);
    });
    document.querySelectorAll("#seg-workspace .seg-region[data-figure]").forEach(function (el) {
      el.classList.toggle("selected-figure", el.dataset.figure === state.figure);
    });
    // The selected question's regions on top, so that its handles are not under a neighbour's box.
    document.querySelectorAll("#seg-workspace .seg-region.selected").forEach(function (el) {
      el.parentNode.appendChild(el);
    });
  }

  function regionOf(target) { return target.closest ? target.closest(".seg-region") : null; }

  function boxOf(region) { return region.dataset.box.split(",").map(Number); }

  // What a click on a question does in the current mode.
  function clickQuestion(id, region, event, svg) {
    if (state.mode === "figure") return post({ action: "figure", figure: state.figure, other: id });
    if (state.mode === "answer") return post({ action: "answer", question: state.first, other: id });
    if (state.mode === "split" && region && id === state.first && region.dataset.index !== "-1") {
      // Shift+click: before the region clicked (a question running on into another column or page).
      var y = event.shiftKey ? "" : toPoints(svg, event).y;
      return post({ action: "split", question: id, index: region.dataset.index, y: y });
    }
    if (event.shiftKey && state.first && state.first !== id) {
      state.second = id;
    } else {
      state.first = id;
      state.second = null;
      state.figure = region && region.dataset.figure ? region.dataset.figure : null;
    }
    showSelection();
  }

  // Outside the segmentation screen (the OCR review) the viewer only zooms and pans.
  function panOnly(event) {
    var svg = event.target.closest && event.target.closest(".seg-svg");
    if (!svg || workspace() || event.button !== 0) return;
    var viewport = svg.parentNode;
    var from = { left: viewport.scrollLeft, top: viewport.scrollTop, x: event.clientX, y: event.clientY };
    event.preventDefault();
    function onMove(e) {
      viewport.scrollLeft = from.left - (e.clientX - from.x);
      viewport.scrollTop = from.top - (e.clientY - from.y);
    }
    function onUp() {
      document.removeEventListener("pointermove", onMove);
      document.removeEventListener("pointerup", onUp);
    }
    document.addEventListener("pointermove", onMove);
    document.addEventListener("pointerup", onUp);
  }

  // Drawing a new box, dragging or resizing one, or panning, from a press on a page.
  function onPress(event) {
    var svg = event.target.closest && event.target.closest(".seg-svg");
    if (!svg || event.button !== 0) return;
    state.page = svg.dataset.page;
    var region = regionOf(event.target);
    var start = toPoints(svg, event);
    var viewport = svg.parentNode;
    var scroll = { left: viewport.scrollLeft, top: viewport.scrollTop, x: event.clientX, y: event.clientY };
    var ghost = null;
    var moving = null;
    if (state.mode === "draw") {
      ghost = document.createElementNS("http://www.w3.org/2000/svg", "rect");
      ghost.setAttribute("class", "seg-ghost");
      svg.appendChild(ghost);
    } else if (region && region.dataset.question === state.first && region.dataset.index !== "-1" && !state.mode) {
      moving = { region: region, box: boxOf(region), resize: event.target.classList.contains("seg-handle") };
    }
    var moved = false;
    event.preventDefault();

    function onMove(e) {
      var p = toPoints(svg, e);
      if (Math.abs(e.clientX - scroll.x) + Math.abs(e.clientY - scroll.y) > 3) moved = true;
      if (ghost) {
        ghost.setAttribute("x", Math.min(start.x, p.x));
        ghost.setAttribute("y", Math.min(start.y, p.y));
        ghost.setAttribute("width", Math.abs(p.x - start.x));
        ghost.setAttribute("height", Math.abs(p.y - start.y));
      } else if (moving) {
        var b = moving.box.slice();
        var dx = p.x - start.x, dy = p.y - start.y;
        if (moving.resize) { b[2] += dx; b[3] += dy; } else { b[0] += dx; b[1] += dy; b[2] += dx; b[3] += dy; }
        var rect = moving.region.querySelector("rect");
        rect.setAttribute("x", Math.min(b[0], b[2]));
        rect.setAttribute("y", Math.min(b[1], b[3]));
        rect.setAttribute("width", Math.abs(b[2] - b[0]));
        rect.setAttribute("height", Math.abs(b[3] - b[1]));
        moving.now = b;
      } else if (!region) {
        viewport.scrollLeft = scroll.left - (e.clientX - scroll.x);
        viewport.scrollTop = scroll.top - (e.clientY - scroll.y);
      }
    }
    function onUp(e) {
      document.removeEventListener("pointermove", onMove);
      document.removeEventListener("pointerup", onUp);
      var p = toPoints(svg, e);
      if (ghost) {
        ghost.remove();
        if (moved) post({ action: "add", page: svg.dataset.page, x0: start.x, y0: start.y, x1: p.x, y1: p.y });
      } else if (moving && moved && moving.now) {
        var b = moving.now;
        post({ action: "move", question: state.first, index: moving.region.dataset.index,
               x0: b[0], y0: b[1], x1: b[2], y1: b[3] });
      } else if (!moved && region) {
        clickQuestion(region.dataset.question, region, e, svg);
      }
    }
    document.addEventListener("pointermove", onMove);
    document.addEventListener("pointerup", onUp);
  }

  function need(selected, key) { if (!selected) { say(text(key)); return false; } return true; }

  var keys = {
    n: function () { state.mode = "draw"; say(text("draw")); },
    s: function () { if (need(state.first, "select")) { state.mode = "split"; say(text("split")); } },
    m: function () {
      if (need(state.first, "select") && need(state.second, "select2")) {
        post({ action: "merge", question: state.first, other: state.second });
      }
    },
    f: function () { if (need(state.figure, "figure")) { state.mode = "figure"; say(text("target")); } },
    a: function () { if (need(state.first, "select")) { state.mode = "answer"; say(text("target")); } },
    r: function () {
      if (!need(state.first, "select")) return;
      var label = window.prompt(text("renumber"));
      if (label) post({ action: "renumber", question: state.first, label: label });
    },
    t: function () {
      if (!need(state.first, "select")) return;
      var count = window.prompt(text("stem-count"), "1");
      if (count) post({ action: "stem", question: state.first, count: count });
    },
    x: function () { if (need(state.first, "select")) post({ action: "not_question", question: state.first }); },
    d: function () {
      var page = state.page || (document.querySelector("#seg-workspace .seg-page") || {}).dataset.page;
      var section = document.querySelector('#seg-workspace .seg-page[data-page="' + page + '"]');
      if (section) post({ action: "page_done", page: page, done: section.classList.contains("done") ? "0" : "1" });
    },
    z: function () { post({ action: "undo" }); },
    y: function () { post({ action: "redo" }); },
    "+": function () { zoom = Math.min(4, zoom * 1.25); applyZoom(); },
    "-": function () { zoom = Math.max(0.5, zoom / 1.25); applyZoom(); },
    "0": function () { zoom = 1; applyZoom(); },
    "?": function () { var help = document.getElementById("seg-help"); if (help && !help.open) help.showModal(); },
  };

  function onKey(event) {
    if (!workspace() || event.ctrlKey || event.metaKey || event.altKey) return;
    var tag = (event.target.tagName || "").toLowerCase();
    if (tag === "input" || tag === "textarea" || tag === "select") return;
    if (event.key === "Escape") { state.mode = null; say(""); return; }
    var key = event.key === "=" ? "+" : event.key;
    if (keys[key]) { event.preventDefault(); keys[key](); }
  }

  function bind() {
    var ws = workspace();
    if (!ws || ws.dataset.bound) return;
    ws.dataset.bound = "1";
    ws.addEventListener("pointerdown", onPress);
    ws.addEventListener("click", function (event) {
      var button = event.target.closest("[data-seg-key]");
      if (button) { keys[button.dataset.segKey](); return; }
      var item = event.target.closest(".seg-question");
      if (item) {
        var pill = event.target.closest(".seg-figure-pill");
        if (pill && !state.mode) { state.first = item.dataset.question; state.figure = pill.dataset.figure; showSelection(); return; }
        clickQuestion(item.dataset.question, null, event, null);
      }
    });
    // Ctrl+wheel zooms the pages, as in a PDF reader.
    ws.addEventListener("wheel", function (event) {
      if (!event.ctrlKey || !event.target.closest(".seg-svg")) return;
      event.preventDefault();
      keys[event.deltaY < 0 ? "+" : "-"]();
    }, { passive: false });
    applyZoom();
    showSelection();
  }

  document.addEventListener("DOMContentLoaded", function () {
    document.addEventListener("keydown", onKey);
    document.addEventListener("pointerdown", panOnly);
    document.addEventListener("click", function (event) {
      var button = event.target.closest && event.target.closest("[data-seg-zoom]");
      if (button) keys[button.dataset.segZoom]();
    });
    document.addEventListener("wheel", function (event) {
      if (workspace() || !event.ctrlKey || !event.target.closest || !event.target.closest(".seg-svg")) return;
      event.preventDefault();
      keys[event.deltaY < 0 ? "+" : "-"]();
    }, { passive: false });
    applyZoom();
    bind();
    document.body.addEventListener("htmx:load", bind);
  });
})();
