#!/usr/bin/python3
"""ack_checker: proves that no acknowledged-and-flushed write was lost across faults.

Writes generations of checksummed blocks to a block device reached through NBD (iserkit-nbd,
with Debian's python3-libnbd) or to a file (a plain file, or a LUN file of iserkit-fuse), records in a journal which writes and flushes
were acknowledged, keeps going through errors and lost NBD connections (reconnecting), then
verifies the device, and later any copy of its data (the target's backing file) against the
journal.

Block format (every block of BLOCK_SIZE bytes, LBAs in units of BLOCK_SIZE from the start of the
device): magic "ISKACK01", LBA, generation, sequence number (the write's, unique per run), block
size (little endian u64 u64 u64 u32), a body derived from that header, and a 16-byte BLAKE2b of
everything before it. A block of zeroes is a block never written.

The rule checked for each LBA, whose writes never overlap in time (a generation writes disjoint
extents, and the next one starts after every write of the last was answered):
  - a write is *durable* once acknowledged with FUA, or acknowledged before a flush that was
    then acknowledged;
  - the block must hold the latest durable write to it or a write issued after that one (which may
    or may not have landed, acknowledged or not); with no durable write, zeroes or any write to it;
  - anything else fails: a checksum that does not match (torn), a header naming another LBA or a
    write never sent to this LBA (foreign), an older write or zeroes (lost).
Failures name the LBA and the generations (and sequence numbers) involved; exit status 1.

Modes:
  run --socket PATH | --file PATH     write, then verify what the device reads back
  verify --socket PATH | --file PATH  verify only (e.g. the target's backing file, offline)
  corrupt-test --file PATH            copies PATH, corrupts one durable block in the copy four
                                      ways (zeroes, an older generation, another LBA's block, one
                                      flipped bit) and expects verify to fail each time naming
                                      that LBA; and rolls back an acknowledged but unflushed write,
                                      which must pass (the checker is not over-strict)
  selftest                            run + verify + corrupt-test on a temporary file (no peer)
All modes but selftest take --journal FILE (JSON lines, written by run).
"""
import argparse
import errno
import hashlib
import json
import mmap
import os
import random
import shutil
import struct
import sys
import tempfile
import time

MAGIC = b"ISKACK01"
HEADER = struct.Struct("<8sQQQI")
DIGEST_BYTES = 16


def make_block(lba, generation, seq, block_size):
    """The block LBA holds after write SEQ of GENERATION: BLOCK_SIZE bytes."""
    header = HEADER.pack(MAGIC, lba, generation, seq, block_size)
    seed = hashlib.blake2b(header, digest_size=32).digest()
    body_len = block_size - HEADER.size - DIGEST_BYTES
    data = header + (seed * (body_len // 32 + 1))[:body_len]
    return data + hashlib.blake2b(data, digest_size=DIGEST_BYTES).digest()


def decode_block(data):
    """('zero',) | ('torn', why) | ('ok', lba, generation, seq) for one block's bytes."""
    if data.count(0) == len(data):
        return ("zero",)
    if data[:8] != MAGIC:
        return ("torn", "no header")
    _, lba, generation, seq, block_size = HEADER.unpack_from(data)
    if block_size != len(data):
        return ("torn", "header says block size %d" % block_size)
    if make_block(lba, generation, seq, block_size) != data:
        return ("torn", "checksum or body mismatch (header: lba %d gen %d seq %d)" % (lba, generation, seq))
    return ("ok", lba, generation, seq)


# ---- the journal ----

class Journal:
    """Events in the order they were observed, in memory and appended to a JSON-lines file."""

    def __init__(self, path):
        self.events = []
        self.file = open(path, "w") if path else None

    def add(self, **event):
        self.events.append(event)
        if self.file:
            self.file.write(json.dumps(event) + "\n")
            self.file.flush()

    @staticmethod
    def load(path):
        j = Journal(None)
        with open(path) as f:
            lines = [line for line in f.read().split("\n") if line.strip()]
        for n, line in enumerate(lines, 1):
            try:
                j.events.append(json.loads(line))
            except ValueError:
                # The last line may be cut if the writer died mid-line; anywhere else: a bad journal.
                if n != len(lines):
                    raise SystemExit("ack_checker: %s line %d is not JSON" % (path, n))
        if not j.events or j.events[0].get("ev") != "start":
            raise SystemExit("ack_checker: %s is not an ack_checker journal" % path)
        return j


class History:
    """What the journal says about each LBA: its writes in issue order and which one is durable."""

    def __init__(self, journal):
        start = journal.events[0]
        self.block_size = start["bs"]
        self.blocks = start["blocks"]
        self.writes = {}      # seq -> dict(lba, n, gen, fua, acked, acked_at)
        self.per_lba = {}     # lba -> [seq, ...] in issue order
        flush_issued = {}
        acked_flush_positions = []
        for pos, e in enumerate(journal.events):
            ev = e["ev"]
            if ev == "w":
                self.writes[e["seq"]] = dict(lba=e["lba"], n=e["n"], gen=e["gen"], fua=e["fua"], acked=False,
                                             acked_at=None)
                for lba in range(e["lba"], e["lba"] + e["n"]):
                    self.per_lba.setdefault(lba, []).append(e["seq"])
            elif ev == "wa":
                w = self.writes[e["seq"]]
                w["acked"], w["acked_at"] = True, pos
            elif ev == "fi":
                flush_issued[e["id"]] = pos
            elif ev == "fa":
                acked_flush_positions.append(flush_issued[e["id"]])
        # A flush covers the writes acknowledged before it was issued (SBC-4 SYNCHRONIZE CACHE,
        # NBD_CMD_FLUSH): durable = acked with FUA, or acked before an acknowledged flush's issue.
        last_flush_issue = max(acked_flush_positions, default=-1)
        self.durable = {seq for seq, w in self.writes.items()
                        if w["acked"] and (w["fua"] or w["acked_at"] < last_flush_issue)}
        self.flushes_acked = len(acked_flush_positions)

    def describe(self, seq):
        w = self.writes[seq]
        state = "durable" if seq in self.durable else ("acked" if w["acked"] else "not acked")
        return "gen %d seq %d (%s%s)" % (w["gen"], seq, state, ", FUA" if w["fua"] else "")

    def check_block(self, lba, data):
        """None if LBA's bytes are allowed, else a message naming the LBA and the generations."""
        seqs = self.per_lba.get(lba, [])
        durable = [i for i, s in enumerate(seqs) if s in self.durable]
        k = durable[-1] if durable else None
        history = ", ".join(self.describe(s) for s in seqs) or "none"
        got = decode_block(data)
        if got[0] == "torn":
            return "LBA %d: torn or foreign data (%s); writes to it: %s" % (lba, got[1], history)
        if got[0] == "zero":
            if k is None:
                return None
            return "LBA %d: LOST: reads as zeroes (never written) but %s was acknowledged and flushed; writes to it: %s" % (
                lba, self.describe(seqs[k]), history)
        _, hlba, gen, seq = got
        if hlba != lba:
            return "LBA %d: foreign data: holds LBA %d's block (gen %d seq %d); writes to it: %s" % (
                lba, hlba, gen, seq, history)
        if seq not in seqs or self.writes[seq]["gen"] != gen:
            return "LBA %d: foreign data: gen %d seq %d was never written here; writes to it: %s" % (
                lba, gen, seq, history)
        i = seqs.index(seq)
        if k is not None and i < k:
            return "LBA %d: LOST: holds %s but %s was acknowledged and flushed; writes to it: %s" % (
                lba, self.describe(seq), self.describe(seqs[k]), history)
        return None


def verify(history, read_blocks, label, quiet=False):
    """Reads every block through read_blocks(first, count) -> bytes and checks it; returns failures."""
    failures = []
    counts = dict(durable=0, newer=0, zero=0)
    chunk = max(1, (1 << 20) // history.block_size)
    bs = history.block_size
    for first in range(0, history.blocks, chunk):
        n = min(chunk, history.blocks - first)
        data = read_blocks(first, n)
        for i in range(n):
            lba = first + i
            block = data[i * bs:(i + 1) * bs]
            msg = history.check_block(lba, block)
            if msg:
                failures.append(msg)
                continue
            got = decode_block(block)
            if got[0] == "zero":
                counts["zero"] += 1
            elif got[3] in history.durable:
                counts["durable"] += 1
            else:
                counts["newer"] += 1
    acked = sum(1 for w in history.writes.values() if w["acked"])
    print("ack_checker: %s: %d blocks, %d writes (%d acknowledged, %d durable), %d flushes acknowledged; "
          "blocks holding their last durable write %d, a later write %d, zeroes %d; failures %d"
          % (label, history.blocks, len(history.writes), acked, len(history.durable), history.flushes_acked,
             counts["durable"], counts["newer"], counts["zero"], len(failures)))
    if quiet:
        return failures
    for msg in failures[:20]:
        print("ack_checker: FAIL: " + msg, file=sys.stderr)
    if len(failures) > 20:
        print("ack_checker: FAIL: ... and %d more" % (len(failures) - 20), file=sys.stderr)
    return failures


# ---- devices ----

class DeviceLost(Exception):
    pass


class FileDevice:
    """A file (a plain file, or a LUN file of iserkit-fuse): every request completes at once.
    A write is pwrite(2); with FUA through a second descriptor opened O_DSYNC (which the FUSE view
    sends as WRITE with FUA); a flush is fdatasync(2) (SYNCHRONIZE CACHE through the view). Reads
    use O_DIRECT where the file system has it, so a page cache never answers for the device."""

    def __init__(self, path, size=None, faults=None):
        """faults: a random.Random to fail some requests (selftest): a write that fails may have
        landed or not, a flush that fails syncs nothing; None = no faults."""
        self.faults = faults
        self.fd = os.open(path, os.O_RDWR | (os.O_CREAT if size else 0), 0o644)
        if size and os.fstat(self.fd).st_size < size:
            os.ftruncate(self.fd, size)
        self.size = os.fstat(self.fd).st_size
        self.fua_fd = os.open(path, os.O_RDWR | os.O_DSYNC)
        try:
            self.direct_fd = os.open(path, os.O_RDONLY | os.O_DIRECT)
        except OSError:
            self.direct_fd = None   # e.g. tmpfs
        self.done = []
        self.next = 0

    def _complete(self, fn):
        self.next += 1
        try:
            fn()
            self.done.append((self.next, None))
        except OSError as e:
            self.done.append((self.next, e.strerror))
        return self.next

    def _fault(self, lands):
        """Maybe a simulated failure: raises after running `lands` (or without running it)."""
        if self.faults is None:
            return
        r = self.faults.random()
        if r < 0.05:
            raise OSError(5, "simulated error, not written")
        if r < 0.10:
            lands()
            raise OSError(5, "simulated error after writing")

    def write(self, offset, data, fua):
        def go():
            fd = self.fua_fd if fua else self.fd
            self._fault(lambda: os.pwrite(fd, data, offset))
            if os.pwrite(fd, data, offset) != len(data):
                raise OSError(5, "short write")
        return self._complete(go)

    def flush(self):
        def go():
            self._fault(lambda: None)
            os.fdatasync(self.fd)
        return self._complete(go)

    def poll(self, wait_ms=0):
        done, self.done = self.done, []
        return done

    def read(self, offset, length):
        if self.direct_fd is not None:
            buf = mmap.mmap(-1, length)   # page-aligned, as O_DIRECT wants
            try:
                n = os.preadv(self.direct_fd, [buf], offset)
                return bytes(buf[:n])
            except OSError as e:
                if e.errno != errno.EINVAL:
                    raise
                os.close(self.direct_fd)
                self.direct_fd = None
        return os.pread(self.fd, length, offset)

    def close(self):
        for fd in (self.fd, self.fua_fd, self.direct_fd):
            if fd is not None:
                os.close(fd)


class NbdDevice:
    """An NBD export on a Unix socket; reconnects (for up to reconnect_timeout s) when the connection dies.
    Requests in flight on a dead connection complete with an error (their outcome is unknown)."""

    def __init__(self, socket, reconnect_timeout, journal):
        import nbd
        self.nbd = nbd
        self.socket = socket
        self.reconnect_timeout = reconnect_timeout
        self.journal = journal
        self.pending = {}    # our id -> libnbd cookie
        self.done = []
        self.next = 0
        self.h = None
        self._connect(first=True)
        self.size = self.h.get_size()
        if not self.h.can_fua() or not self.h.can_flush():
            raise SystemExit("ack_checker: the export offers no FUA or no flush")

    def _connect(self, first=False):
        deadline = time.monotonic() + self.reconnect_timeout
        while True:
            try:
                h = self.nbd.NBD()
                h.connect_unix(self.socket)
                self.h = h
                if not first:
                    self.journal.add(ev="reconnected")
                    print("ack_checker: reconnected to %s" % self.socket, flush=True)
                return
            except self.nbd.Error as e:
                if time.monotonic() > deadline:
                    raise DeviceLost("cannot connect to %s: %s" % (self.socket, e))
                time.sleep(0.2)

    def _lost(self, why):
        # Everything in flight on the dead connection: outcome unknown, reported as failed.
        print("ack_checker: NBD connection lost (%s); reconnecting" % why, flush=True)
        self.journal.add(ev="lost", why=str(why))
        for ours in self.pending:
            self.done.append((ours, "connection lost"))
        self.pending = {}
        self.h = None   # libnbd closes a handle when it is freed
        self._connect()

    def _submit(self, fn):
        self.next += 1
        try:
            self.pending[self.next] = fn()
        except self.nbd.Error as e:
            self.done.append((self.next, str(e)))
            if self.h.aio_is_dead() or self.h.aio_is_closed():
                self._lost(e)
        return self.next

    def write(self, offset, data, fua):
        buf = self.nbd.Buffer.from_bytearray(bytearray(data))
        return self._submit(lambda: self.h.aio_pwrite(buf, offset, flags=self.nbd.CMD_FLAG_FUA if fua else 0))

    def flush(self):
        return self._submit(lambda: self.h.aio_flush())

    def poll(self, wait_ms=0):
        """Completions since the last call; waits up to wait_ms for one when none is ready."""
        if self.pending:
            try:
                self.h.poll(wait_ms)
            except self.nbd.Error as e:
                self._lost(e)
            for ours, cookie in list(self.pending.items()):
                try:
                    if self.h.aio_command_completed(cookie):
                        self.done.append((ours, None))
                        del self.pending[ours]
                except self.nbd.Error as e:
                    self.done.append((ours, e.string or str(e)))
                    del self.pending[ours]
            if self.h.aio_is_dead() or self.h.aio_is_closed():
                self._lost("connection dead")
        done, self.done = self.done, []
        return done

    def read(self, offset, length):
        deadline = time.monotonic() + self.reconnect_timeout
        while True:
            try:
                return self.h.pread(length, offset)
            except self.nbd.Error as e:
                if time.monotonic() > deadline:
                    raise DeviceLost("read at %d failed for %d s: %s" % (offset, self.reconnect_timeout, e))
                if self.h.aio_is_dead() or self.h.aio_is_closed():
                    self._lost(e)
                else:
                    time.sleep(0.2)

    def close(self):
        try:
            self.h.shutdown()
        except self.nbd.Error:
            pass
        self.h = None


# ---- the writer ----

def partition(blocks, rng, max_extent):
    """Random extents (first LBA, block count) covering 0..blocks-1 once."""
    extents, lba = [], 0
    while lba < blocks:
        n = min(rng.randint(1, max_extent), blocks - lba)
        extents.append((lba, n))
        lba += n
    return extents


def run_writer(dev, journal, args):
    """Writes generations until args.rounds or args.duration; returns the number of errors seen."""
    bs, blocks = args.block_size, args.blocks
    journal.add(ev="start", bs=bs, blocks=blocks, seed=args.seed)
    rng = random.Random(args.seed)
    inflight = {}      # our id -> ("w", seq, issued_at) | ("f", flush id, issued_at)
    seq = flush_id = errors = 0
    end = time.monotonic() + args.duration
    last_report = time.monotonic()

    def reap(limit, wait_ms=0):
        nonlocal errors
        for ours, err in dev.poll(wait_ms):
            kind, ident, _ = inflight.pop(ours)
            if err is None:
                journal.add(ev="wa" if kind == "w" else "fa", **({"seq": ident} if kind == "w" else {"id": ident}))
            else:
                errors += 1
                journal.add(ev="we" if kind == "w" else "fe", err=err, **({"seq": ident} if kind == "w" else {"id": ident}))
        now = time.monotonic()
        for kind, ident, issued in inflight.values():
            if now - issued > args.op_timeout:
                raise SystemExit("ack_checker: FAIL: %s %d unanswered for %d s (a request hangs)" % (
                    "write" if kind == "w" else "flush", ident, args.op_timeout))
        while len(inflight) > limit:
            reap_once()

    def reap_once():
        reap(len(inflight), wait_ms=50)

    def issue_flush():
        nonlocal flush_id
        flush_id += 1
        journal.add(ev="fi", id=flush_id)
        inflight[dev.flush()] = ("f", flush_id, time.monotonic())

    def pause(seconds):
        until = time.monotonic() + seconds
        while time.monotonic() < until:
            reap(len(inflight))
            time.sleep(min(0.005, max(0, until - time.monotonic())))

    next_at = time.monotonic()
    gen = 0
    while gen < args.rounds and time.monotonic() < end:
        gen += 1
        extents = partition(blocks, rng, args.max_extent)
        rng.shuffle(extents)
        extents = extents[:max(1, int(len(extents) * args.fraction))]
        for i, (lba, n) in enumerate(extents):
            while len(inflight) >= args.depth:
                reap_once()
            if args.rate > 0:
                # Pace the writes (the machine is shared); a late start is not made up in a burst.
                if next_at > time.monotonic():
                    pause(next_at - time.monotonic())
                next_at = max(next_at, time.monotonic()) + 1 / args.rate
            seq += 1
            fua = rng.random() < args.fua
            data = b"".join(make_block(lba + j, gen, seq, bs) for j in range(n))
            journal.add(ev="w", seq=seq, lba=lba, n=n, gen=gen, fua=fua)
            inflight[dev.write(args.offset + lba * bs, data, fua)] = ("w", seq, time.monotonic())
            if (i + 1) % args.flush_every == 0:
                issue_flush()
            reap(len(inflight))
        # Barrier: the next generation may write the same blocks; no two writes to one block overlap.
        while inflight:
            reap_once()
        if gen % 2 == 1:
            issue_flush()
            while inflight:
                reap_once()
        if time.monotonic() - last_report > 2:
            last_report = time.monotonic()
            print("ack_checker: generation %d, %d writes, %d flushes, %d errors" % (gen, seq, flush_id, errors),
                  flush=True)
    print("ack_checker: wrote %d generations: %d writes, %d flushes, %d errors" % (gen, seq, flush_id, errors))
    return errors


# ---- modes ----

def open_device(args, journal, create_size=None):
    if args.socket:
        return NbdDevice(args.socket, args.reconnect_timeout, journal)
    return FileDevice(args.file, create_size)


def verify_device(dev, history, offset, label, quiet=False):
    bs = history.block_size
    if dev.size < offset + history.blocks * bs:
        print("ack_checker: FAIL: %s holds %d bytes, the journal covers %d" % (label, dev.size, offset + history.blocks * bs),
              file=sys.stderr)
        return ["short device"]
    return verify(history, lambda first, n: dev.read(offset + first * bs, n * bs), label, quiet)


def corrupt_test(path, history, offset, rng):
    """Corrupted copies of PATH, each must fail verify naming the LBA (and one allowed rollback must
    pass). Returns True if all did."""
    bs = history.block_size
    candidates = [lba for lba, seqs in history.per_lba.items() if any(s in history.durable for s in seqs)]
    if not candidates:
        print("ack_checker: corrupt-test: no durable block to corrupt", file=sys.stderr)
        return False
    # Prefer a block with an older write before its durable one, for the "older generation" case.
    older = [lba for lba in candidates
             if [i for i, s in enumerate(history.per_lba[lba]) if s in history.durable][-1] > 0]
    lba = rng.choice(older or candidates)
    seqs = history.per_lba[lba]
    k = [i for i, s in enumerate(seqs) if s in history.durable][-1]
    cases = [("zeroes (a lost write)", bytes(bs))]
    if k > 0:
        s = seqs[k - 1]
        cases.append(("gen %d seq %d, older than the durable write" % (history.writes[s]["gen"], s),
                      make_block(lba, history.writes[s]["gen"], s, bs)))
    others = [o for o in history.per_lba if o != lba]
    if others:
        o = rng.choice(others)
        s = history.per_lba[o][-1]
        cases.append(("LBA %d's block (gen %d seq %d): foreign" % (o, history.writes[s]["gen"], s),
                      make_block(o, history.writes[s]["gen"], s, bs)))
    ok = True
    with tempfile.TemporaryDirectory(prefix="ack-checker-") as d:
        copy = os.path.join(d, "copy.img")
        shutil.copyfile(path, copy)
        with open(copy, "rb") as f:
            f.seek(offset + lba * bs)
            original = f.read(bs)
        flipped = bytearray(original)
        flipped[rng.randrange(HEADER.size, bs)] ^= 0x01
        cases.append(("one flipped bit in the body (torn)", bytes(flipped)))
        dev = FileDevice(copy)
        if verify_device(dev, history, offset, "corrupt-test: unmodified copy"):
            print("ack_checker: corrupt-test: the unmodified copy already fails", file=sys.stderr)
            return False
        for what, block in cases:
            os.pwrite(dev.fd, block, offset + lba * bs)
            failures = verify_device(dev, history, offset, "corrupt-test: LBA %d set to %s" % (lba, what), quiet=True)
            mine = [m for m in failures if m.startswith("LBA %d:" % lba)]
            if not mine:
                print("ack_checker: corrupt-test: NOT DETECTED: LBA %d set to %s" % (lba, what), file=sys.stderr)
                ok = False
            else:
                print("ack_checker: corrupt-test: detected as expected: " + mine[0])
            os.pwrite(dev.fd, original, offset + lba * bs)
        # Not over-strict: a block whose last write was acknowledged but never flushed may hold the
        # write before it (a volatile cache lost it: allowed).
        volatile = [o for o, seqs in history.per_lba.items()
                    if len(seqs) > 1 and history.writes[seqs[-1]]["acked"] and seqs[-1] not in history.durable]
        if volatile:
            o = rng.choice(volatile)
            s = history.per_lba[o][-2]
            before = os.pread(dev.fd, bs, offset + o * bs)
            os.pwrite(dev.fd, make_block(o, history.writes[s]["gen"], s, bs), offset + o * bs)
            failures = verify_device(dev, history, offset, "corrupt-test: LBA %d set to the write before its "
                                     "unflushed last one (allowed)" % o)
            if failures:
                print("ack_checker: corrupt-test: a lost unflushed write was reported", file=sys.stderr)
                ok = False
            os.pwrite(dev.fd, before, offset + o * bs)
        dev.close()
    return ok


def main():
    p = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    p.add_argument("mode", choices=["run", "verify", "corrupt-test", "selftest"])
    p.add_argument("--socket", help="NBD Unix socket (iserkit-nbd --socket)")
    p.add_argument("--file", help="a plain file or block device instead of NBD")
    p.add_argument("--journal", help="JSON-lines journal (written by run, read by the others)")
    p.add_argument("--block-size", type=int, default=4096, help="bytes per checker block (default 4096)")
    p.add_argument("--blocks", type=int, default=4096, help="checker blocks written (default 4096)")
    p.add_argument("--offset", type=int, default=0, help="byte offset of LBA 0 on the device")
    p.add_argument("--rounds", type=int, default=1000000, help="most generations (default: until --duration)")
    p.add_argument("--duration", type=float, default=20, help="seconds of writing (default 20)")
    p.add_argument("--depth", type=int, default=8, help="requests in flight (default 8)")
    p.add_argument("--max-extent", type=int, default=16, help="most blocks per write (default 16)")
    p.add_argument("--fraction", type=float, default=0.5, help="share of extents written per generation")
    p.add_argument("--fua", type=float, default=0.2, help="share of writes with FUA (default 0.2)")
    p.add_argument("--flush-every", type=int, default=40, help="a flush after every N writes (default 40)")
    p.add_argument("--rate", type=float, default=0, help="most writes per second (default 0: no limit)")
    p.add_argument("--seed", type=int, default=None, help="random seed (default: from the clock, printed)")
    p.add_argument("--op-timeout", type=float, default=90, help="fail if a request is unanswered this long (s)")
    p.add_argument("--reconnect-timeout", type=float, default=60, help="how long to retry a lost NBD connection (s)")
    args = p.parse_args()
    if args.seed is None:
        args.seed = int(time.time() * 1000) % 1000000007
    if args.block_size < 512 or args.block_size % 512:
        p.error("--block-size must be a multiple of 512")

    if args.mode == "selftest":
        # No peer: a plain file written through the same writer, verified, then corrupted.
        with tempfile.TemporaryDirectory(prefix="ack-checker-self-") as d:
            args.file, args.socket = os.path.join(d, "dev.img"), None
            journal = Journal(os.path.join(d, "journal"))
            args.blocks, args.rounds, args.duration = min(args.blocks, 256), min(args.rounds, 6), 60
            args.flush_every = min(args.flush_every, 5)
            dev = FileDevice(args.file, args.blocks * args.block_size, faults=random.Random(args.seed))
            errors = run_writer(dev, journal, args)
            if errors == 0:
                print("ack_checker: selftest: no simulated failure happened", file=sys.stderr)
                sys.exit(1)
            history = History(Journal.load(os.path.join(d, "journal")))
            failed = verify_device(dev, history, 0, "selftest: the file as written")
            dev.close()
            if failed:
                sys.exit(1)
            ok = corrupt_test(args.file, history, 0, random.Random(args.seed))
        print("ack_checker: selftest %s (seed %d)" % ("passed" if ok else "FAILED", args.seed))
        sys.exit(0 if ok else 1)

    if bool(args.socket) == bool(args.file):
        p.error("give exactly one of --socket and --file")
    if not args.journal:
        p.error("--journal is required")
    if args.mode == "run":
        print("ack_checker: seed %d" % args.seed, flush=True)
        journal = Journal(args.journal)
        dev = open_device(args, journal, create_size=args.offset + args.blocks * args.block_size)
        errors = run_writer(dev, journal, args)
        history = History(journal)
        failed = verify_device(dev, history, args.offset, "run: read back")
        dev.close()
        if errors:
            print("ack_checker: %d requests failed (allowed: their writes count as not acknowledged)" % errors)
        sys.exit(1 if failed else 0)
    history = History(Journal.load(args.journal))
    if args.mode == "verify":
        dev = open_device(args, Journal(None))
        failed = verify_device(dev, history, args.offset, "verify %s" % (args.socket or args.file))
        dev.close()
        sys.exit(1 if failed else 0)
    if not args.file:
        p.error("corrupt-test wants --file")
    sys.exit(0 if corrupt_test(args.file, history, args.offset, random.Random(args.seed)) else 1)


if __name__ == "__main__":
    try:
        main()
    except DeviceLost as e:
        print("ack_checker: FAIL: %s" % e, file=sys.stderr)
        sys.exit(1)
