// Charts drawn by the vendored ECharts from data the server put on the page.
// A chart is <div class="chart" data-chart="ID"> plus {{ spec|json_script:"ID" }}: the data travels as JSON
// text (never as script), and every chart has its table beside it, so nothing is only in the picture.
// Spec: {kind: "bar" | "line", categories: [...], series: [{name, data: [...]}], stack: bool,
//        percent: bool (values are shares 0-1, shown as %), horizontal: bool, y_max: number | null}
(function () {
  "use strict";

  var PALETTE = ["#1f5fbf", "#e8590c", "#2b8a3e", "#9c36b5", "#c92a2a", "#0b7285", "#5f3dc4", "#a61e4d",
    "#5c940d", "#495057"];

  function format(spec, value) {
    if (value === null || value === undefined) return "—";
    return spec.percent ? (100 * value).toFixed(1) + "%" : String(Math.round(value * 1000) / 1000);
  }

  // ECharts draws its own text and names its own font ("sans-serif" by default), which on a machine with no
  // Chinese font of its own is boxes: it draws with the page's font stack, the bundled Noto Sans SC included.
  function fontFamily(el) {
    return window.getComputedStyle(el).fontFamily;
  }

  // The text the chart will draw, so the ranges of the font it needs are loaded before it draws.
  function chartText(spec) {
    return [].concat(spec.categories || [], (spec.series || []).map(function (s) { return s.name; })).join("");
  }

  function option(spec, font) {
    var valueAxis = {
      type: "value",
      max: spec.y_max === undefined ? null : spec.y_max,
      axisLabel: { formatter: function (v) { return format(spec, v); } },
    };
    var categoryAxis = { type: "category", data: spec.categories, axisLabel: { interval: 0, rotate: spec.horizontal ? 0 : 30 } };
    return {
      color: PALETTE,
      animation: false,
      textStyle: { fontFamily: font },
      grid: { left: 8, right: 16, top: 36, bottom: 8, containLabel: true },
      legend: { type: "scroll", top: 0 },
      tooltip: { trigger: "axis", valueFormatter: function (v) { return format(spec, v); } },
      xAxis: spec.horizontal ? valueAxis : categoryAxis,
      yAxis: spec.horizontal ? categoryAxis : valueAxis,
      series: spec.series.map(function (s) {
        return { name: s.name, type: spec.kind || "bar", data: s.data, stack: spec.stack ? "all" : undefined,
          connectNulls: false, emphasis: { focus: "series" } };
      }),
    };
  }

  function draw(root) {
    if (!window.echarts) return;
    root.querySelectorAll("[data-chart]").forEach(function (el) {
      if (el.dataset.drawn) return;
      var source = document.getElementById(el.dataset.chart);
      if (!source) return;
      var spec = JSON.parse(source.textContent);
      var font = fontFamily(el);
      el.dataset.drawn = "1";
      // Drawn once the font faces for its text are in (a chart measures its labels when it draws them).
      var ready = document.fonts && document.fonts.load
        ? document.fonts.load("12px " + font, chartText(spec) || "0").catch(function () {})
        : Promise.resolve();
      // ...and once the page is shown: a chart takes its size from its box, which has none until then.
      var shown = window.whenShown || function (fn) { fn(); };
      ready.then(function () {
        shown(function () {
          // SVG: crisp at any zoom, and the drawn marks are elements a test can count.
          var chart = window.echarts.init(el, null, { renderer: "svg" });
          chart.setOption(option(spec, font));
          window.addEventListener("resize", function () { chart.resize(); });
        });
      });
    });
  }

  document.addEventListener("DOMContentLoaded", function () {
    draw(document);
    document.body.addEventListener("htmx:load", function (event) { draw(event.detail.elt); });
  });
})();
