#!/bin/sh
# Rebuilds the console's vendored browser libraries from the pinned npm packages
# (package-lock.json): `cd ui && sh build.sh`. The results are committed, so building Horde
# needs only cargo. Each library's license is copied beside it. Every library is MIT-licensed:
# uPlot (charts), Cytoscape.js (the topology editor's graph), and fCoSE with cose-base and
# layout-base (the layout of imported topologies); their UMD builds are used as they ship.
set -eu
cd "$(dirname "$0")"
npm ci --no-audit --no-fund --ignore-scripts
out=../crates/console/assets/vendor
mkdir -p "$out"
cp node_modules/uplot/dist/uPlot.iife.min.js "$out/uplot.js"
cp node_modules/uplot/dist/uPlot.min.css "$out/uplot.css"
cp node_modules/uplot/LICENSE "$out/uplot.LICENSE"
cp node_modules/cytoscape/dist/cytoscape.min.js "$out/cytoscape.js"
cp node_modules/cytoscape/LICENSE "$out/cytoscape.LICENSE"
for p in layout-base cose-base cytoscape-fcose; do
  cp "node_modules/$p/$p.js" "$out/$p.js"
  cp "node_modules/$p/LICENSE" "$out/$p.LICENSE"
done
echo "vendored into $out:"; ls -l "$out"
