#!/usr/bin/env bash
# Races a run's stop against crash points and client kills on locks whose server frees a
# holder's lock the moment its session ends (pg-row, pg-advisory, zk-lock, setnx-del's
# key is no lease either), and counts the overlaps the histories show. None of these locks
# may overlap under these faults: every overlap found is a history that misreports a stop.
#
#   scripts/stress-stops.sh [RUNS_PER_CELL] [JOBS] [ALGORITHMS...]
#
# Each run stops early at its first anomaly (--stop-on-anomaly: the stop races the faults),
# or at its 4 s time limit. Prints a line per algorithm and preset, then the totals; exits 1
# if any run overlapped or could not be carried out. Needs lockaudit on PATH (or $LOCKAUDIT).
set -euo pipefail
runs=${1:-25}
jobs=${2:-4}
shift 2 2>/dev/null || shift $#
algorithms=("$@")
[ ${#algorithms[@]} -gt 0 ] || algorithms=(pg-row pg-advisory setnx-del zk-lock)
lockaudit=${LOCKAUDIT:-lockaudit}
out=$(mktemp -d "${TMPDIR:-/tmp}/stress-stops.XXXXXX")
echo "stress-stops: $runs runs per cell, $jobs at a time, in $out" >&2

cells=()
for algorithm in "${algorithms[@]}"; do
  for preset in crash-points kill-clients; do
    for seed in $(seq 1 "$runs"); do
      cells+=("$algorithm $preset $seed")
    done
  done
done

one() {
  local algorithm=$1 preset=$2 seed=$3
  local dir="$out/$algorithm-$preset-$seed"
  "$lockaudit" run --algorithm "$algorithm" --nemesis "$preset" --seed "$seed" \
    --time-limit 4s --stop-on-anomaly --out "$dir" >"$dir.out" 2>"$dir.err" </dev/null || true
}
export -f one
export out lockaudit
started=$(date +%s)
printf '%s\n' "${cells[@]}" | xargs -P "$jobs" -L 1 bash -c 'one $0 $1 $2'
elapsed=$(($(date +%s) - started))

python3 - "$out" "$elapsed" <<'PY'
import json, os, sys, collections
out, elapsed = sys.argv[1], sys.argv[2]
rows = collections.OrderedDict()
bad = 0
for name in sorted(os.listdir(out)):
    path = os.path.join(out, name)
    if not os.path.isdir(path):
        continue
    parts = name.split("-")
    seed = parts[-1]
    preset = "-".join(parts[-3:-1])
    algorithm = "-".join(parts[:-3])
    row = rows.setdefault((algorithm, preset), collections.Counter())
    row["runs"] += 1
    try:
        report = json.load(open(os.path.join(path, "report.json")))
    except Exception:
        row["no report"] += 1
        bad += 1
        continue
    text = open(path + ".out").read()
    row["stopped early" if "stopped early" in text else "ran to the limit"] += 1
    kinds = {a["kind"] for a in report.get("anomalies", [])}
    overlaps = sum(1 for a in report.get("anomalies", []) if a["kind"] == "overlap")
    row["overlaps"] += overlaps
    if overlaps:
        row["runs with an overlap"] += 1
        bad += 1
        print(f"OVERLAP: {path}", file=sys.stderr)
    row["kills recorded"] += sum(
        1 for line in open(os.path.join(path, "history.jsonl"))
        if '"f":"kill"' in line)
total = collections.Counter()
for (algorithm, preset), row in rows.items():
    total.update(row)
    print(f"{algorithm} × {preset}: {row['runs']} runs, {row['stopped early']} stopped early, "
          f"{row['kills recorded']} kills recorded, {row['overlaps']} overlaps, "
          f"{row['no report']} without a report")
print(f"total: {total['runs']} runs ({total['stopped early']} stopped early) in {elapsed} s, "
      f"{total['overlaps']} overlaps, {total['no report']} without a report")
sys.exit(1 if bad else 0)
PY
