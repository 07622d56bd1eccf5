# Sourced by the chain tests (chain_test.sh, multiconn_test.sh); needs their fail() and $tmp.
# round_trip URI LUN_FILE [nbdcopy options...]: copies $tmp/random.img into the export and back out
# to $tmp/back.img with nbdcopy, flushes, and fails unless the source, the read-back copy and the
# target's backing file LUN_FILE have one SHA-256 (the data really crossed the chain both ways).
round_trip() {
  local uri=$1 lun=$2 src back disk
  shift 2
  nbdcopy "$@" "$tmp/random.img" "$uri"
  nbdcopy "$@" "$uri" "$tmp/back.img"
  src=$(sha256sum <"$tmp/random.img" | cut -d' ' -f1)
  back=$(sha256sum <"$tmp/back.img" | cut -d' ' -f1)
  [[ $src == "$back" ]] || fail "read back differs: $src vs $back"
  nbdsh -u "$uri" -c 'h.flush()'
  disk=$(sha256sum <"$lun" | cut -d' ' -f1)
  [[ $src == "$disk" ]] || fail "the target's backing file differs from what was written"
  echo "  sha256 $src (source = read back = target's file)"
}
