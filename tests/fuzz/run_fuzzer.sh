#!/usr/bin/env bash
# Runs one libFuzzer target for a few seconds on its seed corpus (the ctest of label fuzz).
# New inputs go to a temporary folder, never into the committed corpus; a crash is saved under
# ARTIFACTS (crash-<target>-<sha1>) and fails the test.
# Usage: run_fuzzer.sh BINARY SECONDS SEED_DIR ARTIFACTS
set -euo pipefail
bin=$1 seconds=$2 seeds=$3 artifacts=$4
work=$(mktemp -d)
trap 'rm -rf "$work"' EXIT
mkdir -p "$artifacts"
name=$(basename "$bin")
"$bin" -max_total_time="$seconds" -timeout=10 -rss_limit_mb=2048 -print_final_stats=1 \
  -artifact_prefix="$artifacts/$name-" "$work" "$seeds"
