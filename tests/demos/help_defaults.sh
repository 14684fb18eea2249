#!/usr/bin/env bash
# Every demo's --help shows the default of each number option (a learner reads what a plain run does), and
# every demo that trains on the CPU takes --threads. Usage: help_defaults.sh BIN_DIR DEMO...
set -euo pipefail
bin=$1
shift
bad=0
for demo in "$@"; do
  help=$("$bin/$demo" --help)
  # An option line: "  --steps INT:POSITIVE=600   what it is" (the description after two spaces, or on the next
  # line); a number option whose part before the description has no '=' shows no default.
  if missing=$(perl -ne 'print if /^ +--[a-z-]+ (INT|UINT|FLOAT)/ && (split /  +/, substr($_, 2))[0] !~ /=/' <<<"$help") &&
    [ -n "$missing" ]; then
    echo "FAILED: $demo --help shows no default for:"
    echo "$missing"
    bad=1
  fi
  grep -qE '^ +--threads ' <<<"$help" || { echo "FAILED: $demo has no --threads"; bad=1; }
done
[ "$bad" = 0 ] && echo "every number option of $# demos shows its default, and each takes --threads"
exit "$bad"
