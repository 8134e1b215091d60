// Reads one JSON array of strings per line on stdin; writes one JSON array per
// line with null (parses) or the KaTeX error message for each formula. Uses the
// vendored KaTeX, the same build the browser renders with.
"use strict";
const path = require("path");
const readline = require("readline");
const Module = require("module");

const vendor = path.join(__dirname, "..", "..", "static", "vendor", "katex");
const katexPath = path.join(vendor, "katex.min.js");
// mhchem's UMD wrapper does require("katex"): hand it the vendored build.
const resolve = Module._resolveFilename;
Module._resolveFilename = function (request, ...rest) {
  return request === "katex" ? katexPath : resolve.call(this, request, ...rest);
};
const katex = require(katexPath);
require(path.join(vendor, "contrib", "mhchem.min.js"));

const rl = readline.createInterface({ input: process.stdin });
rl.on("line", (line) => {
  let out;
  try {
    out = JSON.parse(line).map(([tex, display]) => {
      try {
        katex.renderToString(tex, { displayMode: !!display, throwOnError: true, strict: "ignore" });
        return null;
      } catch (e) {
        return String(e.message || e);
      }
    });
  } catch (e) {
    out = { error: String(e) };
  }
  process.stdout.write(JSON.stringify(out) + "\n");
});
