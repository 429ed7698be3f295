#!/bin/sh
# Rebuilds the console's vendored browser libraries from the pinned npm packages
# (package-lock.json): `cd ui && sh build.sh`. The results are committed, so building Horde
# needs only cargo. Each library's license is copied beside it.
set -eu
cd "$(dirname "$0")"
npm ci --no-audit --no-fund --ignore-scripts
out=../crates/console/assets/vendor
mkdir -p "$out"
cp node_modules/uplot/dist/uPlot.iife.min.js "$out/uplot.js"
cp node_modules/uplot/dist/uPlot.min.css "$out/uplot.css"
cp node_modules/uplot/LICENSE "$out/uplot.LICENSE"
echo "vendored into $out:"; ls -l "$out"
