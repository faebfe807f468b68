#!/bin/bash
# v150 trial builds: v149's build.sh run with this trial's patch (over v149's, two more macros:
# PA_TRIAL_MATH_LAST, the arithmetic of each program's last tile alone; PA_TRIAL_MATH_BUT_LAST,
# that of every tile but the last), in the worktree /tmp/wt150 (branch next/v150-math-tail),
# into build/v150: base, nomath, mlast, mbutlast (head dim 128).
set -e
HERE=$(cd "$(dirname "$0")" && pwd)
export WT=/tmp/wt150 BRANCH=next/v150-math-tail PATCH=$HERE/trial.patch DEST=v150
B=$HERE/../v149-step10-floor/build.sh
"$B" base
"$B" nomath -DPA_TRIAL_NO_MATH
"$B" mlast -DPA_TRIAL_MATH_LAST
"$B" mbutlast -DPA_TRIAL_MATH_BUT_LAST
ls -la /work/main/build/v150
