#!/usr/bin/env bash
# Copies the pinned npm packages (package-lock.json) into static/vendor. The
# result is committed, so running the studio never needs npm or a network.
set -euo pipefail
cd "$(dirname "$0")/.."
npm ci --no-audit --no-fund
out=static/vendor
rm -rf "$out"
mkdir -p "$out/htmx" "$out/katex/contrib" "$out/katex/fonts"
cp node_modules/htmx.org/dist/htmx.min.js "$out/htmx/"
cp node_modules/htmx.org/LICENSE "$out/htmx/LICENSE"
cp node_modules/katex/dist/katex.min.js node_modules/katex/dist/katex.min.css "$out/katex/"
cp node_modules/katex/dist/contrib/auto-render.min.js node_modules/katex/dist/contrib/mhchem.min.js "$out/katex/contrib/"
# All three formats: the CSS names them, and the static manifest checks every url().
cp node_modules/katex/dist/fonts/* "$out/katex/fonts/"
cp node_modules/katex/LICENSE "$out/katex/LICENSE"
node -e 'const l=require("./package-lock.json").packages;for(const k of ["node_modules/htmx.org","node_modules/katex"])console.log(k.split("/")[1], l[k].version)' > "$out/VERSIONS"
cat "$out/VERSIONS"
