"""Writing many rows at once: ``COPY`` on PostgreSQL, batched inserts elsewhere.

The bulk importers (questions, PEBench, PEM-800K) prepare their rows and hand
them here a batch at a time, inside their own transaction: as dicts keyed by
field attnames (``insert_rows``), or, on the hottest path, as tuples of a
``Table``'s columns (no dict per row). On PostgreSQL the rows go through
psycopg's ``COPY ... FROM STDIN`` (ids taken from the table's sequence first
when the caller needs them, so child rows can point at their parents);
elsewhere through ``bulk_create``, which returns the new ids on SQLite. Errors
come out as Django's database errors (``DataError``, ``IntegrityError``) on
both paths, so callers can fall back to one record at a time.
"""

from __future__ import annotations

import datetime
import json
import operator
from collections.abc import Iterable, Mapping, Sequence
from typing import Any

from django.db import connection, models


def _default(field: models.Field) -> Any:
    if getattr(field, "auto_now", False) or getattr(field, "auto_now_add", False):
        from django.utils import timezone

        return timezone.now()
    return field.get_default()


def _as_json(field: models.Field, value: Any) -> Any:
    """A JSON field's value as COPY's text format takes it."""
    if value is None:
        return None
    return json.dumps(value, ensure_ascii=False, cls=getattr(field, "encoder", None))


def _as_copy_text(value: Any) -> Any:
    """A value every row shares, in the form psycopg writes fastest: a datetime as its ISO text
    (formatting one is 1.5 µs, repeated on each of millions of rows; the server parses the text
    either way) and a choices member as a plain str (a subclass is looked up on each row)."""
    if isinstance(value, datetime.datetime):
        return value.isoformat()
    if isinstance(value, str) and type(value) is not str:
        return str(value)
    return value


class Table:
    """One model's rows as tuples of the ``given`` attnames, in that order.

    ``fixed`` holds values every row of the batch shares (a status, the
    import's name, the time), written without being repeated in each tuple;
    every other concrete field takes its default (a field added to the model
    later, with a default, does not break the bulk path), and the primary key,
    when not given, its sequence."""

    def __init__(self, model: type[models.Model], given: Sequence[str], fixed: Mapping[str, Any] | None = None):
        meta = model._meta
        by_name = {f.attname: f for f in meta.concrete_fields}
        fixed = dict(fixed or {})
        self.model, self.given, self.fixed = model, tuple(given), fixed
        given_fields = [by_name[name] for name in self.given]
        others = [f for f in meta.concrete_fields if f.attname not in self.given and f.attname not in fixed
                  and not f.primary_key]  # fmt: skip
        fixed_fields = [by_name[name] for name in fixed]
        # The same for every row: encoded once, here.
        shared = [(f, fixed[f.attname]) for f in fixed_fields] + [(f, _default(f)) for f in others]
        self.rest = tuple(_as_json(f, v) if isinstance(f, models.JSONField) else _as_copy_text(v) for f, v in shared)
        self.json = [(n, f) for n, f in enumerate(given_fields) if isinstance(f, models.JSONField)]
        self.columns = [f.column or f.attname for f in given_fields + fixed_fields + others]
        self.pk_at = self.given.index(meta.pk.attname) if meta.pk.attname in self.given else None

    def rows_of(self, values: Iterable[dict]) -> list[tuple]:
        """Dicts as rows; a given attname that a dict lacks takes the field's default."""
        get, one = operator.itemgetter(*self.given), len(self.given) == 1
        defaults: dict[str, Any] = {}
        rows = []
        for value in values:
            try:
                row = get(value)
            except KeyError:
                if not defaults:
                    fields = {f.attname: f for f in self.model._meta.concrete_fields}
                    defaults = {name: _default(fields[name]) for name in self.given}
                row = get({**defaults, **value})
            rows.append((row,) if one else row)
        return rows

    def insert(self, rows: list[tuple], *, ids: bool = False) -> list[int]:
        """Inserts the rows and returns their ids when ``ids``, in order.

        Call it inside a transaction: a failure leaves part of the batch written otherwise."""
        if not rows:
            return []
        if connection.vendor != "postgresql":
            model, given, fixed = self.model, self.given, self.fixed
            objects = model._default_manager.bulk_create(
                [model(**dict(zip(given, row, strict=True)), **fixed) for row in rows], batch_size=500
            )
            return [obj.pk for obj in objects] if ids else []
        if self.pk_at is not None:
            self.copy(rows)
            return [row[self.pk_at] for row in rows] if ids else []
        new_ids = take_ids(self.model, len(rows)) if ids else []
        self.copy(rows, ids=new_ids)
        return new_ids

    def copy(
        self, rows: Iterable[tuple], *, ids: Sequence[int] = (), complete: bool = False, text: bytes = b""
    ) -> None:
        """``COPY`` the rows into the model's table (PostgreSQL), each with its id from ``ids`` when given.

        ``complete``: each row is whole already: the given values, then ``rest``, JSON as text.
        ``text``: rows in COPY's text format, written before ``rows`` (the PEM-800K import's reader
        process writes them: pem.training.reader)."""
        q = connection.ops.quote_name
        meta = self.model._meta
        columns = ([meta.pk.column or meta.pk.attname] if ids else []) + self.columns
        sql = f"COPY {q(meta.db_table)} ({', '.join(q(c) for c in columns)}) FROM STDIN"
        if self.json and not complete:
            rows = map(self._encode, rows)
        rest = self.rest
        # The raw psycopg copy is not wrapped by Django: make its errors Django's.
        with connection.wrap_database_errors, connection.cursor() as cursor, cursor.copy(sql) as copy:
            if text:
                copy.write(text)
            write = copy.write_row
            if complete:
                for row in rows:
                    write(row)
            elif ids:
                for pk, row in zip(ids, rows, strict=True):
                    write((pk, *row, *rest))
            else:
                for row in rows:
                    write((*row, *rest))

    def _encode(self, row: tuple) -> tuple:
        encoded = list(row)
        for n, field in self.json:
            encoded[n] = _as_json(field, encoded[n])
        return tuple(encoded)


def _table_for(model: type[models.Model], values: list[dict]) -> Table:
    """Every concrete field, the primary key only when the first row gives it."""
    given = values[0]
    return Table(model, [f.attname for f in model._meta.concrete_fields
                         if not (f.primary_key and f.attname not in given)])  # fmt: skip


# (connection alias, table) -> its id sequence: looked up once, not per batch.
_SEQUENCES: dict[tuple[str, str], str] = {}


def sequence_of(model: type[models.Model]) -> str:
    """The name of the table's id sequence (PostgreSQL), looked up once."""
    meta = model._meta
    key = (connection.alias, meta.db_table)
    if key not in _SEQUENCES:
        with connection.cursor() as cursor:
            cursor.execute("SELECT pg_get_serial_sequence(%s, %s)", [meta.db_table, meta.pk.column])
            _SEQUENCES[key] = cursor.fetchone()[0]
    return _SEQUENCES[key]


def take_ids(model: type[models.Model], n: int) -> list[int]:
    """``n`` ids from the table's sequence (PostgreSQL), in order, in one array (one row back instead of n)."""
    if n == 0:
        return []
    sequence = sequence_of(model)
    with connection.cursor() as cursor:
        cursor.execute("SELECT array_agg(nextval(%s::regclass)) FROM generate_series(1, %s)", [sequence, n])
        return cursor.fetchone()[0] or []


def defaults_of(model: type[models.Model]) -> dict[str, Any]:
    """Every concrete column's default but the primary key's (attname -> value), for a batch: a
    caller that builds only some of a row's columns merges them over these, so each row is whole
    (``rows_of`` fills a row that lacks a column too, at ten times the cost of a whole one). A
    mutable default (a list) is one object shared by the batch's rows: they are written, not changed."""
    return {f.attname: _default(f) for f in model._meta.concrete_fields if not f.primary_key}


def insert_rows(model: type[models.Model], values: list[dict], *, ids: bool = False) -> list[int]:
    """Inserts the rows (dicts of attname -> value) and returns their ids when ``ids``.

    Call it inside a transaction: a failure leaves part of the batch written
    otherwise."""
    if not values:
        return []
    if connection.vendor != "postgresql":
        objects = model._default_manager.bulk_create([model(**value) for value in values], batch_size=500)
        return [obj.pk for obj in objects] if ids else []
    table = _table_for(model, values)
    return table.insert(table.rows_of(values), ids=ids)


def analyze(
    *tables_of: type[models.Model], columns: Mapping[type[models.Model], Sequence[str]] | None = None,
    vacuum: bool = True,
) -> None:  # fmt: skip
    """Fresh planner statistics, and on PostgreSQL outside a transaction a VACUUM too: right
    after a bulk load the visibility map is empty, so an index-only count reads every heap
    page until autovacuum comes by (the queue's status counts), and the planner guesses.

    ``columns`` limits a table's statistics to the fields named (attnames): the ones its
    queries filter, join and group on (long texts' statistics are never used and cost as
    much as the rest); ``vacuum=False`` only analyzes."""
    if connection.vendor != "postgresql":
        return
    q = connection.ops.quote_name
    command = "VACUUM (ANALYZE)" if vacuum and not connection.in_atomic_block else "ANALYZE"
    with connection.cursor() as cursor:
        for model in tables_of:
            names = (columns or {}).get(model)
            column_of = {f.attname: f.column or f.attname for f in model._meta.concrete_fields}
            only = f" ({', '.join(q(column_of[n]) for n in names)})" if names else ""
            cursor.execute(f"{command} {q(model._meta.db_table)}{only}")
