# Shared helpers for the CHAP interop tests: write a TOML configuration with secrets in files
# (its tables through tests/support/target_toml.sh),
# start iserkit-target with --config on a free loopback port; the rest (BIN, WORK, the exit trap that
# stops the target, require, fail, stop_target) is the target interop tests' lib.sh.
source "$(dirname "${BASH_SOURCE[0]}")/../target/lib.sh"
source "$(dirname "${BASH_SOURCE[0]}")/../../support/target_toml.sh"
SECURE=iqn.2026-11.org.iserkit:secure
MUTUAL=iqn.2026-11.org.iserkit:mutual
LOCKED=iqn.2026-11.org.iserkit:locked
SHAONLY=iqn.2026-11.org.iserkit:sha-only
ALICE_SECRET=alice-secret-1234
TARGET_SECRET=target-secret-5678
DISCO_SECRET=discovery-secret-42
# "${clean_env[@]}" CMD...: CMD with none of the CHAP variables of libiscsi or iserkit set.
clean_env=(env -u LIBISCSI_CHAP_USERNAME -u LIBISCSI_CHAP_PASSWORD -u LIBISCSI_CHAP_TARGET_USERNAME
  -u LIBISCSI_CHAP_TARGET_PASSWORD -u ISERKIT_CHAP_SECRET -u ISERKIT_CHAP_TARGET_SECRET)

# write_config: four targets — one-way CHAP, mutual CHAP, an ACL that admits nobody we use, CHAP
# without MD5 — and
# CHAP on discovery sessions. Secrets live in files (mode 600) or the environment.
write_config() {
  umask 077
  printf '%s\n' "$ALICE_SECRET" >"$WORK/alice.secret"
  printf '%s\n' "$TARGET_SECRET" >"$WORK/target.secret"
  local alice='chap_users=[{ user = "alice", secret_file = "alice.secret" }]'
  {
    toml_keys 'listen=["127.0.0.1:0"]'
    # libiscsi (and QEMU through it) speaks MD5 CHAP only: MD5 must be configured explicitly.
    toml_table discovery 'chap_users=[{ user = "disco", secret_env = "ISERKIT_TEST_DISCO_SECRET" }]' \
      'chap_algorithms=["SHA-256", "MD5"]'
    toml_target "$SECURE" mem:64M "$alice" 'chap_algorithms=["SHA-256", "MD5"]'
    toml_target "$MUTUAL" mem:64M "$alice" 'mutual={ user = "mutualtarget", secret_file = "target.secret" }' \
      'chap_algorithms=["MD5"]'
    # The default CHAP algorithms: no MD5, so libiscsi cannot log in here.
    toml_target "$SHAONLY" mem:16M "$alice"
    toml_target "$LOCKED" mem:16M 'allowed_initiators=["iqn.2026-11.org.example:someone-else"]'
  } >"$WORK/target.toml"
}

# start_target ARGS...: iserkit-target --config plus ARGS; sets PORT.
start_target() {
  rm -f "$WORK/port"
  ISERKIT_TEST_DISCO_SECRET="$DISCO_SECRET" "$BIN/iserkit-target" --config "$WORK/target.toml" \
    --port-file "$WORK/port" "$@" >"$WORK/target.out" 2>"$WORK/target.err" &
  TARGET_PID=$!
  for _ in $(seq 100); do
    [[ -s "$WORK/port" ]] && break
    kill -0 "$TARGET_PID" 2>/dev/null || { cat "$WORK/target.err" >&2; fail "iserkit-target exited at startup"; }
    sleep 0.05
  done
  PORT=$(cat "$WORK/port")
}

# check_no_secrets FILE...: no secret appears in the given outputs or the target's log.
check_no_secrets() {
  for s in "$ALICE_SECRET" "$TARGET_SECRET" "$DISCO_SECRET" wrong-secret-0000; do
    if grep -l -- "$s" "$@" "$WORK/target.err" "$WORK/target.out" 2>/dev/null; then fail "a secret appears in the output above"; fi
  done
}

# url_secret_masked PID: the URL's secret (alice's) is not in /proc/PID/cmdline, which shows it
# masked (alice%****…@) instead; prints that command line.
url_secret_masked() {
  local line
  line=$(tr '\0' ' ' </proc/$1/cmdline)
  echo "  cmdline: $line"
  [[ $line != *"$ALICE_SECRET"* && $line == *"alice%*****************@"* ]] || fail "the URL's secret is visible in /proc/PID/cmdline"
}
