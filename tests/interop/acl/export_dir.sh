# --export-dir against the real target: a symlinked folder, a symlink to a file outside, a FIFO and
# a folder name with a space are not exported (iscsi-ls sees one target with one LUN), each skip
# is a warning, and the target serves the good folder.
source "$(dirname "$0")/../target/lib.sh"
require iscsi-ls iscsi-inq
EXP="$WORK/export"
mkdir -p "$EXP/good" "$EXP/with space" "$WORK/outside-folder"
truncate -s 16M "$EXP/good/disk.img" "$EXP/with space/disk.img" "$WORK/outside-folder/x.img" "$WORK/outside.img"
ln -s "$WORK/outside.img" "$EXP/good/zz-link.img"
mkfifo "$EXP/good/zz-fifo"
ln -s "$WORK/outside-folder" "$EXP/linked"
start_target --export-dir "$EXP"
timeout 30 iscsi-ls -s "iscsi://127.0.0.1:$PORT" >"$WORK/ls" 2>&1 || { cat "$WORK/ls"; fail "iscsi-ls"; }
cat "$WORK/ls"
grep -q "$IQN:good" "$WORK/ls" || fail "the good folder is not a target"
[[ $(grep -c 'Target:' "$WORK/ls") == 1 ]] || fail "more than one target exported"
[[ $(grep -c 'Lun:' "$WORK/ls") == 1 ]] || fail "more than one LUN exported"
timeout 30 iscsi-inq "iscsi://127.0.0.1:$PORT/$IQN:good/0" >/dev/null || fail "the good target does not serve"
stop_target_log
grep -q 'good/zz-link.img is a symlink: not followed' "$LOG" || fail "no warning for the symlinked file"
grep -q 'good/zz-fifo is not a regular file or block device (a FIFO)' "$LOG" || fail "no warning for the FIFO"
grep -q 'linked is a symlink: not followed' "$LOG" || fail "no warning for the symlinked folder"
grep -q 'folder with space has characters an iSCSI name cannot hold' "$LOG" || fail "no warning for the space"
echo PASS
