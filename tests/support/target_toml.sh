#!/usr/bin/env bash
# Sourced by the integration and interop scripts that give iserkit-target a TOML configuration
# (iserkit-target.toml(5)): the tables of that file from arguments, so that each script says what
# its target serves and this file alone how the format writes it; and the start of such a target.
#
#   toml_target IQN LUNS [KEY=VALUE...]   a [[targets]] entry; LUNS: the LUN specs, separated by
#                                         spaces (LUN 0 first)
#   toml_tenant NAME PORTALS [KEY=VALUE...]  a [[tenants]] entry; PORTALS: its `listen` addresses,
#                                         separated by spaces
#   toml_table NAME [KEY=VALUE...]        a [NAME] table ([limits], [login_throttle], [discovery])
#   toml_keys KEY=VALUE...                the lines KEY = VALUE (top-level keys come first in a file)
# A VALUE that starts with [ { or ", or is a whole number, true or false, is TOML as written
# (`limits={ max_sessions = 1 }`, `chap_users=[{ user = "alice", secret_file = "alice.secret" }]`);
# any other VALUE is a string and gets its quotes (`tenant=blue` is tenant = "blue").
#
#   start_config_target DIR [ARGS...]     iserkit-target ($BIN) --config DIR/target.toml
#                                         --port-file DIR/port ARGS, output in DIR/target.log, in
#                                         the background (its PID in TARGET_PID); 0 once the port
#                                         file is written, 1 if it is not within 10 s
#   tenant_portal LOG NAME                the address:port tenant NAME's portal listens on, as the
#                                         target's LOG says

toml_value() {
  if [[ $1 == [\[\{\"]* || $1 =~ ^([0-9]+|true|false)$ ]]; then
    printf '%s' "$1"
  else
    printf '"%s"' "$1"
  fi
}

toml_keys() {
  local kv
  for kv; do printf '%s = %s\n' "${kv%%=*}" "$(toml_value "${kv#*=}")"; done
}

# toml_strings WORDS: the TOML array of the space-separated WORDS, each a string.
toml_strings() {
  local word out=""
  for word in $1; do out+="${out:+, }\"$word\""; done
  printf '[%s]' "$out"
}

toml_table() {
  printf '\n[%s]\n' "$1"
  shift
  toml_keys "$@"
}

toml_target() {
  printf '\n[[targets]]\niqn = "%s"\nluns = %s\n' "$1" "$(toml_strings "$2")"
  shift 2
  toml_keys "$@"
}

toml_tenant() {
  printf '\n[[tenants]]\nname = "%s"\nlisten = %s\n' "$1" "$(toml_strings "$2")"
  shift 2
  toml_keys "$@"
}

start_config_target() {
  local dir=$1
  shift
  "$BIN/iserkit-target" --config "$dir/target.toml" --port-file "$dir/port" "$@" >"$dir/target.log" 2>&1 &
  TARGET_PID=$!
  for _ in $(seq 100); do [[ -s $dir/port ]] && return 0; sleep 0.1; done
  return 1
}

tenant_portal() {
  sed -n "s/.*tenant $2: listening on \([0-9.:]*\).*/\1/p" "$1" | head -1
}
