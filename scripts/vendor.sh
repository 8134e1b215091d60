#!/usr/bin/env bash
# Copies the pinned npm packages (package-lock.json) into static/vendor. The
# result is committed, so running the studio never needs npm or a network.
set -euo pipefail
cd "$(dirname "$0")/.."
npm ci --no-audit --no-fund
out=static/vendor
rm -rf "$out"
mkdir -p "$out/htmx" "$out/katex/contrib" "$out/katex/fonts" "$out/echarts" "$out/noto-sans-sc/files" "$out/axe-core"
cp node_modules/htmx.org/dist/htmx.min.js "$out/htmx/"
cp node_modules/htmx.org/LICENSE "$out/htmx/LICENSE"
cp node_modules/katex/dist/katex.min.js node_modules/katex/dist/katex.min.css "$out/katex/"
cp node_modules/katex/dist/contrib/auto-render.min.js node_modules/katex/dist/contrib/mhchem.min.js "$out/katex/contrib/"
# All three formats: the CSS names them, and the static manifest checks every url().
cp node_modules/katex/dist/fonts/* "$out/katex/fonts/"
cp node_modules/katex/LICENSE "$out/katex/LICENSE"
# ECharts' common build (bar, line, pie and their components) runs under our CSP: no eval.
cp node_modules/echarts/dist/echarts.common.min.js "$out/echarts/"
cp node_modules/echarts/LICENSE node_modules/echarts/NOTICE "$out/echarts/"
# Noto Sans SC, regular and bold, as woff2 split by unicode-range: a browser fetches only the ranges
# a page uses. Only woff2 is kept (every browser we support reads it), so the woff fallbacks are cut
# out of the CSS, whose every url() the static manifest checks. The faces block instead of swapping: a
# Chinese text waits (at most about 3 s) for its range rather than showing boxes first on a machine with
# no Chinese font of its own; k12vista/fonts.py preloads each page's ranges so the wait is short.
font=node_modules/@fontsource/noto-sans-sc
for weight in 400 700; do
    sed -E -e "s#, url\(\./files/[^)]*\.woff\) format\('woff'\)##" -e "s#font-display: swap#font-display: block#" \
        "$font/$weight.css" > "$out/noto-sans-sc/$weight.css"
    cp "$font"/files/noto-sans-sc-*-"$weight"-normal.woff2 "$out/noto-sans-sc/files/"
done
cp "$font/LICENSE" "$out/noto-sans-sc/LICENSE"
# axe-core runs the accessibility check in the browser tests only (injected by Playwright from this file);
# no page of the studio loads it.
cp node_modules/axe-core/axe.min.js node_modules/axe-core/LICENSE "$out/axe-core/"
node -e 'const l=require("./package-lock.json").packages;for(const k of ["node_modules/htmx.org","node_modules/katex","node_modules/echarts","node_modules/@fontsource/noto-sans-sc","node_modules/axe-core"])console.log(k.replace("node_modules/",""), l[k].version)' > "$out/VERSIONS"
cat "$out/VERSIONS"
