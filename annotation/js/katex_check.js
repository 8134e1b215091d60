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

// KaTeX measures positions in UTF-16 code units and cuts its excerpt there, which can
// split a surrogate pair (a math-italic 𝑥 is two units): the message would hold a
// lone surrogate that no database stores. Say where in code points, with an excerpt
// cut between code points, and never return a string that is not well formed.
function describe(e, tex) {
  if (typeof e.position !== "number" || typeof e.rawMessage !== "string") {
    return String((e && e.message) || e).toWellFormed();
  }
  const chars = Array.from(tex);
  const at = Array.from(tex.slice(0, e.position)).length;
  const excerpt = (at > 15 ? "…" : "") + chars.slice(Math.max(0, at - 15), at + 15).join("") +
    (at + 15 < chars.length ? "…" : "");
  return `KaTeX parse error: ${e.rawMessage} at character ${at + 1}: ${excerpt}`.toWellFormed();
}

const rl = readline.createInterface({ input: process.stdin });
rl.on("line", (line) => {
  let out;
  try {
    out = JSON.parse(line).map(([tex, display]) => {
      try {
        katex.renderToString(tex, { displayMode: !!display, throwOnError: true, strict: "ignore" });
        return null;
      } catch (e) {
        return describe(e, tex);
      }
    });
  } catch (e) {
    out = { error: String(e) };
  }
  process.stdout.write(JSON.stringify(out) + "\n");
});
