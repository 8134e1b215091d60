"""The embedded default's broker: kombu's filesystem transport, with a message written and
taken whole.

kombu's own transport (5.7) opens a message file under its final name and then writes it,
and a consumer moves any file with that name: a worker that lists the folder between the two
reads an empty message, and the JSON error stops the worker ("Unrecoverable error", kombu
issue #1551). It also moves the file to the system's temporary folder, which on another
filesystem is a copy that two workers can both make. Here a producer writes under a name no
consumer lists and renames it into place, and a consumer claims a message by renaming it in
its own folder, which one worker wins. A file that still cannot be read (left by another
tool) is set aside and logged, and the worker goes on: the sweeper re-sends the job of any
message lost (``jobs.sweep``).

The exchange tables (which queues an exchange routes to, one file each, read on every
message sent) had the same fault: the first worker to bind a queue created the file empty and
then locked and wrote it, so a page sending a message then read an empty table, and two
workers starting together could each create it and lose the other's queue. Here a change is
made under a lock of its own and the new table renamed into place, so a reader needs no lock.

Settings select it with ``CELERY_BROKER_TRANSPORT`` when ``CELERY_BROKER_URL`` is
``filesystem://``; Redis and RabbitMQ need none of this.
"""

import logging
import os
import uuid
from queue import Empty
from time import monotonic

from kombu.exceptions import ChannelError
from kombu.transport import filesystem, virtual
from kombu.utils.encoding import bytes_to_str, str_to_bytes
from kombu.utils.json import dumps, loads

log = logging.getLogger(__name__)

# Suffixes a consumer never matches: it takes only names ending in ".<queue>.msg".
WRITING = ".writing"
UNREADABLE = ".unreadable"


class Channel(filesystem.Channel):
    def _put(self, queue, payload, **kwargs):
        # Milliseconds first, so that the folder sorts in sending order, as kombu's does.
        name = f"{int(round(monotonic() * 1000))}_{uuid.uuid4()}.{queue}.msg"
        path = os.path.join(self.data_folder_out, name)
        try:
            with open(path + WRITING, "wb") as f:
                f.write(str_to_bytes(dumps(payload)))
            os.replace(path + WRITING, path)
        except OSError as exc:
            raise ChannelError(f"Cannot add file {name!r} to the broker's folder") from exc

    def _get(self, queue):
        wanted = f"{queue}.msg"
        for name in sorted(os.listdir(self.data_folder_in)):
            if name.partition(".")[2] != wanted:
                continue
            path = os.path.join(self.data_folder_in, name)
            claimed = f"{path}.{uuid.uuid4().hex}.claimed"
            try:
                os.rename(path, claimed)
            except OSError:
                continue  # another worker took it first
            try:
                with open(claimed, "rb") as f:
                    payload = f.read()
                message = loads(bytes_to_str(payload))
            except OSError as exc:
                raise ChannelError(f"Cannot read file {name!r} from the broker's folder") from exc
            except ValueError:
                os.replace(claimed, path + UNREADABLE)
                log.error("broker message %s is not JSON (%d bytes); set aside as %s", name, len(payload), UNREADABLE)
                continue
            self._forget(claimed, name)
            return message
        raise Empty()

    def _queue_bind(self, exchange, routing_key, pattern, queue):
        bound = filesystem.exchange_queue_t(routing_key or "", pattern or "", queue or "")
        self._change_table(exchange, lambda queues: queues if bound in queues else [bound, *queues])

    def _delete(self, queue, exchange, routing_key, pattern, *args, **kwargs):
        # The virtual channel forgets the queue; kombu's filesystem one would then edit the file in place.
        virtual.Channel._delete(self, queue, exchange, routing_key, pattern, *args, **kwargs)
        gone = filesystem.exchange_queue_t(routing_key or "", pattern or "", queue or "")
        self._change_table(exchange, lambda queues: [q for q in queues if q != gone])

    def _change_table(self, exchange, change) -> None:
        table = self._exchange_file(exchange)
        self.control_folder.mkdir(exist_ok=True)
        try:
            with open(f"{table}.lock", "a") as guard:
                filesystem.lock(guard, filesystem.LOCK_EX)  # released when closed
                queues = self.get_table(exchange)
                changed = change(queues)
                if changed != queues:
                    writing = f"{table}.{uuid.uuid4().hex}{WRITING}"
                    with open(writing, "wb") as f:
                        f.write(str_to_bytes(dumps(changed)))
                    os.replace(writing, table)
        except OSError as exc:
            raise ChannelError(f"Cannot update the broker's table {table}") from exc

    def _forget(self, claimed: str, name: str) -> None:
        if self.store_processed:
            os.makedirs(self.processed_folder, exist_ok=True)
            os.replace(claimed, os.path.join(self.processed_folder, name))
        else:
            os.remove(claimed)


class Transport(filesystem.Transport):
    Channel = Channel
