# Shared by the device calls of lab experiments from v127 on (sourced by their run.sh): the
# machine's line and row(), which runs one step program with --runs $RUNS (default 30) and
# prints its median from the program's JSON, its oracle check, and the plan line the program
# printed, cut to what an experiment sets in PLAN_SED (a sed expression); a sweep (a knob given a
# list) prints a line a combination, with its splits and partition. The full output of
# every row is appended to $OUT/$FULL (default full.txt). Needs B (the programs' folder) and OUT.
# vrow() is row() with environment variables set for that row alone; adv() runs an adversarial set;
# ab_shapes() runs the split shapes a merge change is checked on, without and with its variables.
nvidia-smi --query-gpu=name,clocks.sm,clocks.mem,temperature.gpu --format=csv,noheader
echo "start at $(date +%T)"
row() {  # label program flags...
  local label=$1 prog=$2; shift 2
  local o rc
  o=$($B/$prog "$@" --runs "${RUNS:-30}" --json $OUT/tmp.json 2>&1); rc=$?
  { echo "== $label: $prog $*"; echo "$o"; } >> "$OUT/${FULL:-full.txt}"
  python3 - "$label" "$prog" "$rc" <<'PY'
import json, os, sys
label, prog, rc = sys.argv[1:]
try:
    d = json.load(open(os.environ['OUT'] + '/tmp.json'))
except Exception as e:
    print(f"{label:<26} {prog:<22} rc={rc} no json ({e})"); sys.exit()
for r in d['results']:
    t = r['gpu_median_seconds']
    knobs = ''.join(f"  {name} {r[key]}" for name, key in (('splits', 'num_splits'), ('partition', 'partition_tokens'))
                    if r.get(key))  # the knobs as they ran, where the step has them
    print(f"{label:<26} {prog:<22} gpu {t*1e6 if t else float('nan'):7.2f} us  ok {r['ok']}  rc={rc}{knobs}")
PY
  { echo "$o" | grep -m1 "launch on the GPU" || echo "$o" | grep -m1 "launch in the emulator"; } |
    sed -E "${PLAN_SED:-s/^ *launch ([^:]*): grid ([0-9]+ x [0-9]+ x [0-9]+).*/    \1: grid \2/}" | cut -c1-160
}
vrow() {  # "VAR=value ..." (or "") label program flags...: row() with those variables set
  local vars=$1; shift
  ( [ -n "$vars" ] && export $vars; row "$@" )
}
adv() {  # "VAR=value ..." (or "") label program flags...: the program's adversarial set on $B,
  # one line with its exit code and the set's last line
  local vars=$1 label=$2 prog=$3 o rc; shift 3
  o=$(env $vars timeout 120 $B/$prog --adversarial "$@" 2>&1); rc=$?
  echo "adversarial $label rc=$rc $(echo "$o" | tail -n 1)"
}
ab_shapes() {  # "VAR=value ..." label program: v103's shapes (4-8 splits, groups 1-32, a ragged
  # batch in f16), each as "main" (the variables unset) and as label (set), on the same program
  local vars=$1 label=$2 prog=$3 shape
  for shape in "--workload small-batch --splits 4" \
               "--batch 8 --context 4096 --q-heads 256 --kv-heads 8 --head-dim 128 --dtype bf16" \
               "--batch 5 --context 700,4096,1,2500,3333 --q-heads 32 --kv-heads 8 --head-dim 128 --dtype f16 --splits 8" \
               "--batch 3 --context 4096 --q-heads 8 --kv-heads 8 --head-dim 128 --dtype bf16 --splits 7" \
               "--batch 16 --context 2048 --q-heads 32 --kv-heads 8 --head-dim 128 --dtype bf16"; do
    vrow "" "main ${shape:0:40}" $prog $shape
    vrow "$vars" "$label ${shape:0:40}" $prog $shape
  done
}
