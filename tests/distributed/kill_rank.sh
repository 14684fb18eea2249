#!/usr/bin/env bash
# A rank killed mid-run (SIGKILL) must end the whole job quickly, non-zero, with a message naming the lost
# rank (no hang of the survivor inside an all-reduce), and the last checkpoint must be intact and resume.
# usage: kill_rank.sh MPIEXEC 10_distributed
set -uo pipefail
mpiexec=$1 demo=$2
dir=$(mktemp -d) && trap 'rm -rf "$dir"' EXIT
fail() { echo "FAILED: $*"; echo "--- job output:"; cat "$dir/out"; exit 1; }
ckpt=$dir/ckpt.safetensors

"$mpiexec" -np 2 "$demo" --steps 1000000 --save "$ckpt" --save-every 10 --report-every 10 >"$dir/out" 2>&1 &
job=$!
for _ in $(seq 600); do  # up to 60 s for the first checkpoint
  [ -f "$ckpt" ] && grep -q "^step" "$dir/out" && break
  sleep 0.1
done
[ -f "$ckpt" ] || fail "no checkpoint after 60 s"
pid=$(sed -n 's/^rank 1 of 2 on .* (pid \([0-9]*\))$/\1/p' "$dir/out")
[ -n "$pid" ] || fail "rank 1 did not print its pid"
kill -KILL "$pid"
start=$(date +%s%N)
for _ in $(seq 300); do kill -0 "$job" 2>/dev/null || break; sleep 0.1; done  # up to 30 s
if kill -0 "$job" 2>/dev/null; then kill -KILL "$job"; fail "the job still runs 30 s after rank 1 was killed (a hang)"; fi
wait "$job"
rc=$?
ms=$((($(date +%s%N) - start) / 1000000))
[ "$rc" -ne 0 ] || fail "the job exited 0 after losing rank 1"
grep -q "rank 1" <(sed 1,2d "$dir/out") || fail "no message names the lost rank 1"
echo "job ended ${ms} ms after rank 1 (pid $pid) was killed, exit code $rc; mpirun said:"
grep -m1 -A1 "rank 1" <(sed 1,2d "$dir/out")

step=$(grep -ao '"step":"[0-9]*"' "$ckpt" | head -1 | tr -dc 0-9)
[ -n "$step" ] || fail "the checkpoint has no step (damaged?)"
"$mpiexec" -np 2 "$demo" --load "$ckpt" --steps $((step + 10)) --save "$ckpt" >"$dir/out" 2>&1 ||
  fail "resuming from the checkpoint of step $step failed"
grep -q "resumed from .* at step $step" "$dir/out" || fail "the resumed run did not start at step $step"
leftovers=$(find "$dir" -mindepth 1 ! -name ckpt.safetensors ! -name out)
[ -z "$leftovers" ] || fail "files left behind: $leftovers"
echo "resumed from step $step to $((step + 10)); no temporary files left"
