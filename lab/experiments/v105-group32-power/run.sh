#!/bin/bash
# v105: is step 10's group-32 row slow in the recorded runs because the GPU is throttled by the
# row before it? In the recorded run at 0bbdc08 the SM clock read after each row's timed runs was
# 1725 MHz after step 09's group-32 row (4.1 ms a launch), 1839 after step 10's (529.1 us, 84.6%),
# 1920 and 1950 after steps 11 and 12's, and 1965-1980 after nearly every other row; v93's machine
# ran the row at 485 us with the clock at 1980 throughout. Samples power, SM clock, temperatures
# and the throttle reasons every 100 ms while step 10's group-32 shape runs cold, right after step
# 09's (short and long soaks), and after 1 and 5 s idle. Programs from 0bbdc08's pack (steps 09
# and 10), in build/v105-pack.tar.xz. About 90 seconds.
set -u
P=/tmp/q105; mkdir -p $P && xz -dc build/v105-pack.tar.xz | tar -C $P -xf - || exit 3
B=$P/gpu-pack/bin
G32="--batch 64 --context 8192 --q-heads 256 --kv-heads 8 --head-dim 128 --dtype bf16"
nvidia-smi --query-gpu=name,power.limit,enforced.power.limit,power.max_limit,clocks.max.sm,temperature.gpu,temperature.memory --format=csv
nvidia-smi -q -d TEMPERATURE | grep -iE 'slowdown|shutdown|max operating|target' | sed 's/^ */  /'
S=/tmp/smi105.txt
nvidia-smi --query-gpu=timestamp,power.draw,clocks.sm,temperature.gpu,temperature.memory,clocks_throttle_reasons.active --format=csv,noheader,nounits -lms 100 > $S &
SP=$!
sleep 1
M=/tmp/marks105.txt; : > $M
ph() {  # phase name, binary, runs
  local t0=$(date +%s.%N)
  local o=$($B/$2 $G32 --runs $3 2>&1)
  local t1=$(date +%s.%N)
  echo "$1 $t0 $t1" >> $M
  printf "%-28s %-24s runs %-5s %s\n" "$1" "$2" "$3" "$(echo "$o" | grep -E ' (us|ms) +[0-9]' | tail -1 | awk '{print $(NF-3), $(NF-2), $(NF-1), $NF}')"
}
ph cold step10_tensor_cores 200
ph soak-short step09_memory_pipeline 200
ph after-short step10_tensor_cores 200
sleep 5
ph after-5s-idle step10_tensor_cores 200
ph soak-long step09_memory_pipeline 2000
ph after-long step10_tensor_cores 200
sleep 1
ph after-1s-idle step10_tensor_cores 200
ph step10-long step10_tensor_cores 4000
ph step10-long-again step10_tensor_cores 200
sleep 1
kill $SP
# Each phase's samples: power (W), SM clock (MHz), GPU and memory temperature, the union of the
# throttle reasons (bit 0x4 software power cap, 0x20 software thermal, 0x40 hardware thermal,
# 0x80 hardware power brake; 0x1 idle).
python3 - "$S" "$M" <<'EOF'
import sys, datetime
rows = []
for line in open(sys.argv[1]):
    f = [x.strip() for x in line.split(',')]
    try:
        t = datetime.datetime.strptime(f[0], '%Y/%m/%d %H:%M:%S.%f').timestamp()
        rows.append((t, float(f[1]), float(f[2]), f[3], f[4], int(f[5], 16)))
    except Exception:
        pass
print('%-20s %5s %7s %7s %6s %6s %5s %s' % ('phase', 'n', 'W mean', 'W max', 'MHz lo', 'MHz av', 'temp', 'reasons'))
for line in open(sys.argv[2]):
    name, t0, t1 = line.split()
    s = [r for r in rows if float(t0) <= r[0] <= float(t1)]
    if not s:
        print(name, 'no samples'); continue
    reasons = 0
    for r in s: reasons |= r[5]
    print('%-20s %5d %7.0f %7.0f %6.0f %6.0f %5s 0x%x' % (name, len(s), sum(r[1] for r in s) / len(s), max(r[1] for r in s),
          min(r[2] for r in s), sum(r[2] for r in s) / len(s), max(r[3] for r in s) + '/' + max(r[4] for r in s), reasons))
EOF
