"""The PEM-800K import's reader process: ``python -m pem.training.reader``, started by
pem.training.pem800k_import on PostgreSQL.

An import is as much the client's Python (parsing, keys, rows) as the server's inserts, and
in one interpreter they take turns: the thread that talks to the server waits for the GIL
while another parses, and the server waits for it. Here the parsing runs in a process of its
own, without Django (about 50 MiB): it reads the file (a plain file is opened here, a zip's
member comes on stdin), reads each line in the common shape (pem.training.lines), makes its
key, takes the chain's and its steps' ids from the sequences (on a connection of its own: ids
are not transactional), looks up which keys are stored already, and writes the steps and
labels as COPY text, one frame a batch on stdout. The importer links the chains to the bank
and writes each batch in its transaction.

A line in any other shape, or one this process cannot read, is sent back as it is: the
importer reads it the general way and says what is wrong with it, so every line's outcome
is what the importer alone would give.
"""

from __future__ import annotations

import hashlib
import pickle
import struct
import sys
from typing import IO, Any

import orjson
import psycopg

from k12vista.line_stream import numbered_lines
from pem.training.lines import KEY_HASH_LENGTH, PLAIN_KEYS, chain_key, copy_text, plain

_LENGTH = struct.Struct("<Q")


def write_frame(stream: IO[bytes], value: Any) -> None:
    data = pickle.dumps(value, protocol=pickle.HIGHEST_PROTOCOL)
    stream.write(_LENGTH.pack(len(data)))
    stream.write(data)
    stream.flush()


def read_frame(stream: IO[bytes]) -> Any:
    """The next frame; None at the end of the stream. Only ever read from a pipe of our own."""
    head = stream.read(_LENGTH.size)
    if len(head) < _LENGTH.size:
        return None
    (size,) = _LENGTH.unpack(head)
    data = stream.read(size)
    if len(data) < size:
        raise EOFError("the reader process stopped in the middle of a batch")
    return pickle.loads(data)  # noqa: S301 (our own child's frames, over our own pipe)


class Batch:
    def __init__(self) -> None:
        self.too_long: list[int] = []
        self.raw: list[tuple[int, bytes]] = []  # for the importer's general reading
        self.chains: list[tuple[int, str, Any]] = []  # (number, key, Plain)
        # Each chain's line: the importer reads it in full if it must write it one at a time.
        self.lines: dict[int, bytes] = {}


def read_line(line: bytes, label_codes: frozenset[str]) -> tuple[str, Any] | None:
    """(key, Plain) for a line in the common shape; None sends it back to the importer.

    Only text, lists and objects are read here, so orjson's canonical JSON is the importer's
    byte for byte; a NUL (which no text column holds) goes back too."""
    if b"\\u0000" in line:
        return None
    try:
        record = orjson.loads(line)
    except orjson.JSONDecodeError:
        return None
    if type(record) is not dict or "step_labels" not in record or not record.keys() <= PLAIN_KEYS:
        return None
    found = plain(record, label_codes)
    if found is None:
        return None
    digest = hashlib.sha256(orjson.dumps(record, option=orjson.OPT_SORT_KEYS)).hexdigest()[:KEY_HASH_LENGTH]
    return chain_key(found.hash_id, digest), found


class Writer:
    """Takes ids and writes a batch's steps and labels as COPY text, for chains not stored yet."""

    def __init__(self, connection: psycopg.Connection, setup: dict) -> None:
        self.connection = connection
        self.setup = setup
        self.step_tail, self.label_tail = setup["step_tail"], setup["label_tail"]

    def ids(self, sequence: str, n: int) -> list[int]:
        if not n:
            return []
        with self.connection.cursor() as cursor:
            cursor.execute("SELECT array_agg(nextval(%s::regclass)) FROM generate_series(1, %s)", [sequence, n])
            return cursor.fetchone()[0]  # type: ignore[index]

    def stored(self, keys: list[str]) -> set[str]:
        """Keys already committed: a second import of a file takes no ids and formats nothing.
        Only a hint: the importer checks every key again on its own connection."""
        with self.connection.cursor() as cursor:
            # Joined to the keys, not ``key = ANY(...)``: probes of the unique index whatever the
            # statistics say in the middle of a load (ANY was planned as a scan of the whole table).
            table = self.setup["chain_table"]
            cursor.execute(f"SELECT c.key FROM unnest(%s::text[]) AS k(key) JOIN {table} c ON c.key = k.key", [keys])  # noqa: S608
            return {key for (key,) in cursor.fetchall()}

    def frame(self, batch: Batch, done: int) -> dict:
        stored = self.stored([key for _, key, _ in batch.chains]) if batch.chains else set()
        fresh = [chain for chain in batch.chains if chain[1] not in stored]
        cot_ids = self.ids(self.setup["chain_sequence"], len(fresh))
        next_step_id = iter(self.ids(self.setup["step_sequence"], sum(len(p.steps) for _, _, p in fresh))).__next__
        step_tail, label_tail = self.step_tail, self.label_tail
        chains = []
        for (number, key, found), cot_id in zip(fresh, cot_ids, strict=True):
            steps, labels = [], []
            for position, (text, label, explanation) in enumerate(found.steps, 1):
                step_id = next_step_id()
                steps.append(f"{step_id}\t{cot_id}\t{position}\t{copy_text(text)}{step_tail}\n")
                labels.append(f"{step_id}\t{label}\t{copy_text(explanation)}{label_tail}\n")
            steps_text, labels_text = "".join(steps).encode(), "".join(labels).encode()
            chains.append((number, key, cot_id, found[:-1], steps_text, labels_text, batch.lines[number]))
        return {
            "done": done,
            "too_long": batch.too_long,
            "raw": batch.raw,
            "stored": [
                (number, key, found.hash_id, batch.lines[number])
                for number, key, found in batch.chains
                if key in stored
            ],  # fmt: skip
            "chains": chains,
        }


def main() -> int:
    stdin, stdout = sys.stdin.buffer, sys.stdout.buffer
    setup = read_frame(stdin)
    label_codes, batch_size = frozenset(setup["label_codes"]), setup["batch_size"]
    # A plain file is read here; a zip's member comes on stdin after the setup.
    source = open(setup["path"], "rb") if setup["path"] else stdin  # noqa: SIM115 (closed below)
    with source, psycopg.connect(setup["conninfo"], autocommit=True) as connection:
        writer = Writer(connection, setup)
        batch, done = Batch(), 0
        for number, line in numbered_lines(source, setup["max_line_bytes"]):
            done = number
            if line is None:
                batch.too_long.append(number)
            elif line.strip():
                found = read_line(line, label_codes)
                if found is None:
                    batch.raw.append((number, line))
                else:
                    batch.chains.append((number, *found))
                    batch.lines[number] = line
            if len(batch.chains) + len(batch.raw) >= batch_size:
                write_frame(stdout, writer.frame(batch, done))
                batch = Batch()
        last = writer.frame(batch, done)
        last["peak_rss_kib"] = peak_rss_kib()
        write_frame(stdout, last)
    return 0


def peak_rss_kib() -> int | None:
    """This process's peak RSS since its exec (Linux), for the importer's benchmark to report:
    a parent's ``RUSAGE_CHILDREN`` also counts the pages the child shared before its exec."""
    try:
        with open("/proc/self/status") as status:
            return next(int(line.split()[1]) for line in status if line.startswith("VmHWM:"))
    except (OSError, StopIteration, ValueError):
        return None


if __name__ == "__main__":
    sys.exit(main())
