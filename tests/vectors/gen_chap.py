#!/usr/bin/env python3
"""Generates tests/vectors/chap.txt: CHAP responses (RFC 1994 §4.1: H(id || secret || challenge))
computed independently of iserkit with Python's hashlib, for CHAP_A 5 (MD5), 6 (SHA-1),
7 (SHA-256) and 8 (SHA3-256) (RFC 7143 §12.1.3). Run: python3 gen_chap.py > chap.txt"""
import hashlib

ALGS = {5: "md5", 6: "sha1", 7: "sha256", 8: "sha3_256"}
CASES = [
    # (identifier, secret, challenge bytes)
    (0, b"", bytes(16)),
    (1, b"secret", bytes(range(16))),
    (0x2a, b"twelve-bytes", bytes(range(255, 223, -1))),
    (255, b"a much longer secret of forty-four bytes!!!!", bytes([0xA5]) * 20),
    (7, b"p\x00ss", b"\x01"),
]

print("# CHAP response vectors. Provenance: tests/vectors/gen_chap.py (Python hashlib, independent of")
print("# the OpenSSL EVP code under test). RFC 1994 §4.1: response = H(identifier || secret || challenge).")
print("# Columns: CHAP_A identifier(decimal) secret(hex, '-' = empty) challenge(hex) response(hex)")
for alg, name in ALGS.items():
    for ident, secret, challenge in CASES:
        h = hashlib.new(name)
        h.update(bytes([ident]) + secret + challenge)
        print(alg, ident, secret.hex() or "-", challenge.hex(), h.hexdigest())
