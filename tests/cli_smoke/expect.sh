#!/bin/sh
# expect.sh RC REGEX COMMAND...: runs COMMAND, fails unless it exits with RC and its output
# (stdout and stderr) matches the extended regular expression REGEX.
want_rc=$1
regex=$2
shift 2
out=$("$@" 2>&1)
rc=$?
printf '%s\n' "$out"
if [ "$rc" -ne "$want_rc" ]; then
  echo "expect.sh: exit code $rc, expected $want_rc" >&2
  exit 1
fi
if ! printf '%s\n' "$out" | grep -Eq -- "$regex"; then
  echo "expect.sh: output does not match: $regex" >&2
  exit 1
fi
