#!/bin/sh
# Runs a resumable training script (train.py, train_mtp.py, train_dspark.py) the way the
# models in models/ were made, until it finishes:
#   tools/train/supervise.sh LOG SCRIPT.py [flags...]      (appends SCRIPT's output to LOG)
# jemalloc must not give memory back (MALLOC_CONF): with its default decay a step page-faults
# so much that it runs 7x slower (glibc's malloc: 2x slower). Without decay its resident memory
# grows by up to ~1 GB a minute (the first main run reached 23 GB and was OOM-killed), so this
# restarts the script, which resumes from its last checkpoint, when it passes RSS_LIMIT_KB
# (default 15 GB); give the script a short --ckpt-minutes.
set -u
LOG=$1; SCRIPT=$2; shift 2
HERE=$(cd "$(dirname "$0")" && pwd)
export LD_LIBRARY_PATH=/usr/lib/x86_64-linux-gnu/openblas-pthread
export LD_PRELOAD=/usr/lib/x86_64-linux-gnu/libjemalloc.so.2
export MALLOC_CONF=dirty_decay_ms:-1,muzzy_decay_ms:-1,narenas:1
export OMP_WAIT_POLICY=PASSIVE PYTHONUNBUFFERED=1
LIMIT=${RSS_LIMIT_KB:-15000000}
while :; do
  nice -n 19 /usr/bin/python3 "$HERE/$SCRIPT" "$@" >> "$LOG" 2>&1 &
  pid=$!
  while kill -0 "$pid" 2>/dev/null; do
    sleep 10
    rss=$(awk '/VmRSS/{print $2}' "/proc/$pid/status" 2>/dev/null)
    if [ "${rss:-0}" -gt "$LIMIT" ]; then
      echo "supervise.sh: resident ${rss} kB > ${LIMIT} kB, restarting from the last checkpoint" >> "$LOG"
      kill "$pid"
    fi
  done
  wait "$pid" && break
  sleep 2
done
