# qemu-img (qemu's libiscsi block driver) against iserkit-target with CHAP: the secret reaches qemu
# as a secret object read from a file (never the command line); a round trip of random data
# through the CHAP target, and a wrong secret refused.
source "$(dirname "$0")/lib.sh"
require qemu-img cmp
qemu-img --help 2>/dev/null | grep -qw iscsi || { echo "SKIP: qemu-img has no iscsi block driver" >&2; exit 77; }
write_config
start_target
printf '%s' "$ALICE_SECRET" >"$WORK/qemu.secret"
printf '%s' "wrong-secret-0000" >"$WORK/qemu.wrong"
image() {  # SECRET-ID
  echo "driver=iscsi,transport=tcp,portal=127.0.0.1:$PORT,target=$SECURE,lun=0,user=alice,password-secret=$1"
}
head -c $((8 << 20)) /dev/urandom >"$WORK/random.img"
qemu-img convert -n --object secret,id=s0,file="$WORK/qemu.secret" -f raw --target-image-opts \
  "$WORK/random.img" "$(image s0)" 2>"$WORK/q1.err" || { cat "$WORK/q1.err"; fail "qemu-img write with CHAP"; }
qemu-img convert --object secret,id=s0,file="$WORK/qemu.secret" --image-opts "$(image s0)" -O raw \
  "$WORK/back.img" 2>"$WORK/q2.err" || { cat "$WORK/q2.err"; fail "qemu-img read with CHAP"; }
cmp -n $((8 << 20)) "$WORK/random.img" "$WORK/back.img" || fail "data read back through CHAP differs"
if qemu-img info --object secret,id=s1,file="$WORK/qemu.wrong" --image-opts "$(image s1)" >"$WORK/q3.out" 2>&1; then
  fail "qemu-img with a wrong secret logged in"
fi
cat "$WORK/q3.out"
qemu-img info --object secret,id=s0,file="$WORK/qemu.secret" --image-opts "$(image s0)" >"$WORK/q4.out" 2>&1 ||
  { cat "$WORK/q4.out"; fail "the target stopped serving after a failed login"; }
grep -q 'virtual size: 64 MiB' "$WORK/q4.out" || { cat "$WORK/q4.out"; fail "qemu-img info: unexpected size"; }
check_no_secrets "$WORK/q1.err" "$WORK/q2.err" "$WORK/q4.out"
echo PASS
