#!/bin/bash
# Starts a target (tgtd | iserkit-target), then runs a test program with ISERKIT_TEST_URL set.
# Usage: run_with_target.sh KIND PROGRAM [ARGS...]
set -u
HERE=$(cd "$(dirname "$0")" && pwd)
. "$HERE/target_env.sh"
start_target "${1:?target kind}"
export ISERKIT_TEST_TARGET_PID="$TARGET_PID"  # for tests that freeze the target (SIGSTOP/SIGCONT)
shift
"$@"
rc=$?
exit $rc
