"""Writing many rows at once: ``COPY`` on PostgreSQL, batched inserts elsewhere.

The bulk importers (questions, PEBench) prepare their rows as dicts keyed by
field attnames and hand them here a batch at a time, inside their own
transaction. On PostgreSQL the rows go through psycopg's ``COPY ... FROM
STDIN`` (ids taken from the table's sequence first when the caller needs them,
so child rows can point at their parents); elsewhere through ``bulk_create``,
which returns the new ids on SQLite. Errors come out as Django's database
errors (``DataError``, ``IntegrityError``) on both paths, so callers can fall
back to one record at a time.
"""

from __future__ import annotations

import json
from typing import Any

from django.db import connection, models


def model_rows(model: type[models.Model], values: list[dict]) -> tuple[list[str], list[tuple]]:
    """Columns and rows for every concrete field, defaults for the ones not given: a field
    added to the model later (with a default) does not break the bulk path."""
    given = values[0]
    fields = [f for f in model._meta.concrete_fields if not (f.primary_key and f.attname not in given)]
    defaults = {f.attname: _default(f) for f in fields if f.attname not in given}
    columns = [f.column or f.attname for f in fields]
    json_fields = {f.attname for f in fields if isinstance(f, models.JSONField)}
    rows = []
    for value in values:
        row = []
        for f in fields:
            item = value[f.attname] if f.attname in value else defaults[f.attname]
            if f.attname in json_fields and item is not None:
                item = json.dumps(item, ensure_ascii=False, cls=getattr(f, "encoder", None))
            row.append(item)
        rows.append(tuple(row))
    return columns, rows


def _default(field: models.Field) -> Any:
    if getattr(field, "auto_now", False) or getattr(field, "auto_now_add", False):
        from django.utils import timezone

        return timezone.now()
    return field.get_default()


def take_ids(model: type[models.Model], n: int) -> list[int]:
    """``n`` ids from the table's sequence (PostgreSQL), in order."""
    if n == 0:
        return []
    with connection.cursor() as cursor:
        cursor.execute(
            "SELECT nextval(pg_get_serial_sequence(%s, 'id')) FROM generate_series(1, %s)", [model._meta.db_table, n]
        )
        return [row[0] for row in cursor.fetchall()]


def copy_rows(model: type[models.Model], values: list[dict]) -> None:
    """``COPY`` the rows into the model's table (PostgreSQL)."""
    if not values:
        return
    columns, rows = model_rows(model, values)
    table = connection.ops.quote_name(model._meta.db_table)
    names = ", ".join(connection.ops.quote_name(c) for c in columns)
    # The raw psycopg copy is not wrapped by Django: make its errors Django's.
    with (
        connection.wrap_database_errors,
        connection.cursor() as cursor,
        cursor.copy(f"COPY {table} ({names}) FROM STDIN") as copy,
    ):
        for row in rows:
            copy.write_row(row)


def insert_rows(model: type[models.Model], values: list[dict], *, ids: bool = False) -> list[int]:
    """Inserts the rows (dicts of attname -> value) and returns their ids when ``ids``.

    Call it inside a transaction: a failure leaves part of the batch written
    otherwise."""
    if not values:
        return []
    if connection.vendor == "postgresql":
        new_ids: list[int] = []
        if ids:
            new_ids = take_ids(model, len(values))
            values = [{"id": pk, **value} for pk, value in zip(new_ids, values, strict=True)]
        copy_rows(model, values)
        return new_ids
    objects = model._default_manager.bulk_create([model(**value) for value in values], batch_size=500)
    return [obj.pk for obj in objects] if ids else []


def analyze(*tables_of: type[models.Model]) -> None:
    """Fresh planner statistics, and on PostgreSQL outside a transaction a VACUUM too: right
    after a bulk load the visibility map is empty, so an index-only count reads every heap
    page until autovacuum comes by (the queue's status counts), and the planner guesses."""
    if connection.vendor != "postgresql":
        return
    command = "ANALYZE" if connection.in_atomic_block else "VACUUM (ANALYZE)"
    with connection.cursor() as cursor:
        for model in tables_of:
            cursor.execute(f"{command} {connection.ops.quote_name(model._meta.db_table)}")
