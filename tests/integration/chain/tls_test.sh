#!/usr/bin/env bash
# NBD over TLS (NBD_OPT_STARTTLS, GnuTLS) through the whole chain: iserkit-target (memory LUN) ←
# iSCSI/TCP ← iserkit-nbd --tls=… → libnbd (nbdinfo, nbdcopy) with nbds:// URIs.
#  - X.509 (CA, server and client certificates made here with certtool): nbdinfo nbds://, a data
#    round trip with nbdcopy (same SHA-256), --tls-verify-peer refuses a client without a
#    certificate and serves one with a certificate of the CA;
#  - PSK (psktool key file): nbdinfo nbds://alice@…/?tls-psk-file=…, nbdcopy round trip;
#  - --tls=require refuses a plain-text client with NBD_REP_ERR_TLS_REQD; --tls=on serves both;
#  - a wrong PSK key, an unknown PSK user and a client that does not trust the server's CA fail
#    cleanly, and the server goes on serving the next client;
#  - the same keys in an `iserkit-nbd --config` TOML file; --run's $uri is nbds:// under require;
#  - a client that sends STARTTLS and then stalls is dropped after --tls-handshake-timeout, and a
#    bad --tls-psk file or certificate directory stops the bridge at start with a clear error.
source "$(dirname "${BASH_SOURCE[0]}")/lib.sh"
for tool in nbdinfo nbdcopy certtool psktool sha256sum python3; do
  command -v $tool >/dev/null || skip "$tool is not installed (certtool and psktool: gnutls-bin)"
done

echo "== credentials"
pki=$tmp/pki; mkdir -p "$pki/server" "$pki/client" "$pki/noclient" "$pki/rogue"
cd "$pki"
key() { certtool --generate-privkey --key-type=ecdsa --outfile "$1" 2>/dev/null; }
printf 'cn = iserkit test CA\nca\ncert_signing_key\nexpiration_days = 2\n' >ca.info
key ca-key.pem
certtool --generate-self-signed --load-privkey ca-key.pem --template ca.info --outfile ca-cert.pem 2>/dev/null
printf 'organization = iserkit test\ncn = localhost\ndns_name = localhost\nip_address = 127.0.0.1\ntls_www_server\nencryption_key\nsigning_key\nexpiration_days = 2\n' >server.info
key server/server-key.pem
certtool --generate-certificate --load-privkey server/server-key.pem --load-ca-certificate ca-cert.pem \
  --load-ca-privkey ca-key.pem --template server.info --outfile server/server-cert.pem 2>/dev/null
printf 'organization = iserkit test\ncn = client\ntls_www_client\nencryption_key\nsigning_key\nexpiration_days = 2\n' >client.info
key client/client-key.pem
certtool --generate-certificate --load-privkey client/client-key.pem --load-ca-certificate ca-cert.pem \
  --load-ca-privkey ca-key.pem --template client.info --outfile client/client-cert.pem 2>/dev/null
cp ca-cert.pem server/; cp ca-cert.pem client/; cp ca-cert.pem noclient/
# A CA the server's certificate does not chain to.
key rogue-key.pem
certtool --generate-self-signed --load-privkey rogue-key.pem --template ca.info --outfile rogue/ca-cert.pem 2>/dev/null
psktool -u alice -p keys.psk >/dev/null 2>&1
psktool -u alice -p wrong.psk >/dev/null 2>&1   # same user, another random key
psktool -u mallory -p mallory.psk >/dev/null 2>&1
cmp -s keys.psk wrong.psk && fail "psktool made the same key twice"
cd - >/dev/null

iqn=iqn.2026-11.org.iserkit:tls
start_target mem:16M

bridge_pid=
# start_bridge ARGS…: iserkit-nbd on 127.0.0.1, any free port (in $nbd_port).
start_bridge() {
  [[ -n $bridge_pid ]] && stop_bridge
  rm -f "$tmp/nbd.port"
  "$BIN/iserkit-nbd" "$url" --listen 127.0.0.1:0 --port-file "$tmp/nbd.port" "$@" >>"$tmp/nbd.log" 2>&1 &
  bridge_pid=$!; pids+=($bridge_pid)
  for _ in $(seq 100); do [[ -s $tmp/nbd.port ]] && break; sleep 0.1; done
  [[ -s $tmp/nbd.port ]] || fail "iserkit-nbd $* did not start"
  nbd_port=$(cat "$tmp/nbd.port")
}
stop_bridge() {
  [[ -n $bridge_pid ]] || return 0
  kill -TERM "$bridge_pid"; wait "$bridge_pid" 2>/dev/null || true; bridge_pid=
}
alive() { kill -0 "$bridge_pid" 2>/dev/null || fail "iserkit-nbd died"; }
size=$((16 << 20))
head -c $size /dev/urandom >"$tmp/in"
want=$(sha256sum <"$tmp/in" | cut -d' ' -f1)
# round_trip URI: nbdcopy the data in and out again; same SHA-256.
round_trip() {
  rm -f "$tmp/out"
  nbdcopy "$tmp/in" "$1" 2>>"$tmp/client.log" || fail "nbdcopy to $1"
  nbdcopy "$1" "$tmp/out" 2>>"$tmp/client.log" || fail "nbdcopy from $1"
  [[ $(sha256sum <"$tmp/out" | cut -d' ' -f1) == "$want" ]] || fail "data differs after the round trip through $1"
}

echo "== X.509, --tls=require"
start_bridge --tls=require --tls-certificates "$pki/server"
x509="nbds://127.0.0.1:$nbd_port/?tls-certificates=$pki/client"
[[ $(nbdinfo --size "$x509" 2>>"$tmp/client.log") == "$size" ]] || fail "nbdinfo over X.509 TLS"
round_trip "$x509"
rc=0; nbdinfo --size "nbd://127.0.0.1:$nbd_port/" >"$tmp/plain.out" 2>&1 || rc=$?
[[ $rc -ne 0 ]] || fail "--tls=require served a plain-text client"
grep -qi "tls" "$tmp/plain.out" || fail "the plain-text client's error does not say TLS is required: $(cat "$tmp/plain.out")"
echo "  plain client: $(tail -1 "$tmp/plain.out")"
rc=0; nbdinfo --size "nbds://127.0.0.1:$nbd_port/?tls-certificates=$pki/rogue" >"$tmp/rogue.out" 2>&1 || rc=$?
[[ $rc -ne 0 ]] || fail "a client trusting another CA accepted the server"
echo "  untrusted server certificate: $(tail -1 "$tmp/rogue.out")"
alive
[[ $(nbdinfo --size "$x509" 2>>"$tmp/client.log") == "$size" ]] || fail "no service after the failed clients"

echo "== a client that stalls in the TLS handshake is dropped"
stop_bridge
start_bridge --tls=require --tls-certificates "$pki/server" --tls-handshake-timeout 1
x509="nbds://127.0.0.1:$nbd_port/?tls-certificates=$pki/client"
python3 - "$nbd_port" <<'PY' || fail "stalled handshake"
import socket, struct, sys, time
s = socket.create_connection(("127.0.0.1", int(sys.argv[1])), timeout=10)
def read(n):
    b = b""
    while len(b) < n:
        c = s.recv(n - len(b))
        if not c: raise SystemExit("server closed during the option haggling")
        b += c
    return b
read(18)                                   # greeting
s.sendall(struct.pack(">I", 3))            # FIXED_NEWSTYLE | NO_ZEROES
s.sendall(b"IHAVEOPT" + struct.pack(">II", 5, 0))   # NBD_OPT_STARTTLS
magic, opt, rtype, length = struct.unpack(">QIII", read(20))
assert (opt, rtype) == (5, 1), (opt, rtype)         # NBD_REP_ACK
s.send(b"\x16\x03\x01")                    # the start of a ClientHello record, then nothing
start = time.monotonic()
try:
    rest = s.recv(100)
except socket.timeout:
    raise SystemExit("not dropped within 10 s")
took = time.monotonic() - start
assert rest == b"", rest
print(f"  dropped after {took:.1f} s")
PY
alive
[[ $(nbdinfo --size "$x509" 2>>"$tmp/client.log") == "$size" ]] || fail "no service after the stalled client"

echo "== X.509 --tls-verify-peer"
stop_bridge
start_bridge --tls=require --tls-certificates "$pki/server" --tls-verify-peer
x509="nbds://127.0.0.1:$nbd_port/?tls-certificates=$pki/client"
rc=0; nbdinfo --size "nbds://127.0.0.1:$nbd_port/?tls-certificates=$pki/noclient" >"$tmp/nocert.out" 2>&1 || rc=$?
[[ $rc -ne 0 ]] || fail "--tls-verify-peer served a client without a certificate"
alive
[[ $(nbdinfo --size "$x509" 2>>"$tmp/client.log") == "$size" ]] || fail "--tls-verify-peer refused a client certificate of the CA"
grep -q "handshake failed" "$tmp/nbd.log" || fail "the refused client certificate is not logged"

echo "== PSK, --tls=on serves TLS and plain-text clients"
stop_bridge
start_bridge --tls=on --tls-psk "$pki/keys.psk"
psk="nbds://alice@127.0.0.1:$nbd_port/?tls-psk-file=$pki/keys.psk"
[[ $(nbdinfo --size "$psk" 2>>"$tmp/client.log") == "$size" ]] || fail "nbdinfo over PSK TLS"
round_trip "$psk"
[[ $(nbdinfo --size "nbd://127.0.0.1:$nbd_port/" 2>>"$tmp/client.log") == "$size" ]] || fail "--tls=on refused a plain client"
round_trip "nbd://127.0.0.1:$nbd_port/"
for bad in "alice@127.0.0.1:$nbd_port/?tls-psk-file=$pki/wrong.psk" "mallory@127.0.0.1:$nbd_port/?tls-psk-file=$pki/mallory.psk"; do
  rc=0; nbdinfo --size "nbds://$bad" >"$tmp/badpsk.out" 2>&1 || rc=$?
  [[ $rc -ne 0 ]] || fail "a bad PSK was accepted: $bad"
  echo "  ${bad%%@*}: $(tail -1 "$tmp/badpsk.out")"
  alive
  [[ $(nbdinfo --size "$psk" 2>>"$tmp/client.log") == "$size" ]] || fail "no service after a bad PSK client"
done
grep -q "unknown PSK identity" "$tmp/nbd.log" || fail "the unknown PSK user is not logged"

echo "== the same keys in a --config file"
stop_bridge
printf 'tls = "require"\ntls-psk = "%s"\ntls_handshake_timeout = 5\n' "$pki/keys.psk" >"$tmp/volume.toml"
start_bridge --config "$tmp/volume.toml"
psk="nbds://alice@127.0.0.1:$nbd_port/?tls-psk-file=$pki/keys.psk"
[[ $(nbdinfo --size "$psk" 2>>"$tmp/client.log") == "$size" ]] || fail "nbdinfo over PSK TLS set up by --config"
rc=0; nbdinfo --size "nbd://127.0.0.1:$nbd_port/" >/dev/null 2>&1 || rc=$?
[[ $rc -ne 0 ]] || fail "tls = \"require\" in the --config file served a plain-text client"

echo "== --run under --tls=require: \$uri is nbds:// with the credentials"
stop_bridge
out=$("$BIN/iserkit-nbd" "$url" --tls=require --tls-psk "$pki/keys.psk" \
  --run 'echo "$uri"; nbdinfo --size "$uri"' 2>>"$tmp/nbd.log") || fail "--run with PSK TLS: $?"
read -r uri run_size <<<"$(grep -v '^serving' <<<"$out" | tr '\n' ' ')"
[[ $uri == "nbds+unix://alice@/?socket="*"&tls-psk-file=$pki/keys.psk" && $run_size == "$size" ]] || fail "--run \$uri: $out"
echo "  $uri"
out=$("$BIN/iserkit-nbd" "$url" --listen 127.0.0.1:0 --tls=require --tls-certificates "$pki/server" \
  --run 'nbdinfo --size "$uri"' 2>>"$tmp/nbd.log") || fail "--run with X.509 TLS: $?"
[[ $(grep -v '^serving' <<<"$out") == "$size" ]] || fail "--run with X.509: $out"

echo "== --tls=off refuses STARTTLS"
stop_bridge
start_bridge
rc=0; nbdinfo --size "$psk" >"$tmp/off.out" 2>&1 || rc=$?
[[ $rc -ne 0 ]] || fail "a TLS-only client was served by --tls=off"
[[ $(nbdinfo --size "nbd://127.0.0.1:$nbd_port/" 2>>"$tmp/client.log") == "$size" ]] || fail "--tls=off plain client"
stop_bridge

echo "== bad credentials stop the bridge at start"
printf 'alice:abc\n' >"$tmp/odd.psk"
expect_refused() {  # MESSAGE ARGS…
  local message=$1; shift
  local rc=0 out
  out=$("$BIN/iserkit-nbd" "$url" --listen 127.0.0.1:0 "$@" 2>&1) || rc=$?
  [[ $rc -eq 2 ]] || fail "iserkit-nbd $* exited $rc (want 2): $out"
  grep -q -- "$message" <<<"$out" || fail "iserkit-nbd $*: want '$message' in: $out"
  echo "  $out"
}
expect_refused "line 1: the key has an odd number" --tls=require --tls-psk "$tmp/odd.psk"
expect_refused "$tmp/none.psk" --tls=require --tls-psk "$tmp/none.psk"
expect_refused "server-cert.pem" --tls=require --tls-certificates "$pki/client"
expect_refused "exactly one of" --tls=on
expect_refused "need --tls=on" --tls-psk "$pki/keys.psk"
expect_refused "--tls maybe: want one of off, on, require" --tls=maybe
echo PASS
