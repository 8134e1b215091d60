"""The embedded default's filesystem broker (k12vista.broker): several workers share its folder,
and no message is read half-written, taken twice or allowed to stop a worker."""

import logging
import os
import threading
from functools import partial
from pathlib import Path

from kombu import Connection, Exchange, Queue

from tests.test_settings import run_django

TRANSPORT = "k12vista.broker:Transport"


def connect(folder: Path) -> Connection:
    """The broker in ``folder``. The transport keeps declared queues in a class attribute (one
    broker a process), so the tests of this module name their queues apart."""
    folder.mkdir(exist_ok=True)
    options = {"data_folder_in": str(folder), "data_folder_out": str(folder), "control_folder": str(folder)}
    return Connection("filesystem://", transport=TRANSPORT, transport_options=options)


def test_the_embedded_default_uses_it_and_redis_does_not():
    code = "from k12vista.celery import app; print(app.connection_for_write().transport.__module__)"
    embedded = run_django({"DEBUG": "1", "CELERY_BROKER_URL": ""}, "shell", "--no-imports", "-c", code)
    redis = run_django({"DEBUG": "1", "CELERY_BROKER_URL": "redis://127.0.0.1:6379/3"}, "shell", "--no-imports",
                       "-c", code)  # fmt: skip
    assert embedded.returncode == redis.returncode == 0, embedded.stderr + redis.stderr
    assert embedded.stdout.split() == ["k12vista.broker"]
    assert redis.stdout.split() == ["kombu.transport.redis"]


def test_an_unreadable_message_is_set_aside_and_the_next_one_delivered(tmp_path, caplog):
    with connect(tmp_path / "q") as connection:
        queue = connection.SimpleQueue("empty")
        (tmp_path / "q" / "0_empty.empty.msg").write_bytes(b"")  # sorts before any message sent: older
        queue.put({"n": 2})
        with caplog.at_level(logging.ERROR, logger="k12vista.broker"):
            assert queue.get(block=False).payload == {"n": 2}
    assert (tmp_path / "q" / "0_empty.empty.msg.unreadable").exists()
    assert "0_empty.empty.msg is not JSON" in caplog.text


def race(finishing, looping) -> list[BaseException]:
    """Runs every callable of ``finishing`` and ``looping`` in a thread of its own, all at once, until
    the finishing ones have ended; a looping one is given an Event that clears then. Returns what any
    raised (a worker's "Unrecoverable error")."""
    errors: list[BaseException] = []
    running = threading.Event()
    running.set()

    def guarded(target, *args):
        try:
            target(*args)
        except BaseException as exc:
            errors.append(exc)

    loops = [threading.Thread(target=guarded, args=(target, running)) for target in looping]
    ends = [threading.Thread(target=guarded, args=(target,)) for target in finishing]
    for thread in loops + ends:
        thread.start()
    for thread in ends:
        thread.join()
    running.clear()
    for thread in loops:
        thread.join(timeout=60)
    return errors


def test_two_consumers_take_every_message_of_two_producers_once(tmp_path):
    folder, sent, per_producer = tmp_path / "q", 2, 300
    taken: list[list[int]] = [[], []]

    def produce(first: int) -> None:
        with connect(folder) as connection:
            queue = connection.SimpleQueue("shared")
            for n in range(first, first + per_producer):
                queue.put({"n": n})

    def consume(mine: list[int], producing: threading.Event) -> None:
        with connect(folder) as connection:
            queue = connection.SimpleQueue("shared")
            while True:
                try:
                    message = queue.get(block=False)
                except queue.Empty:
                    if not producing.is_set():
                        return
                    continue
                mine.append(message.payload["n"])
                message.ack()

    # Bound before the threads start, as a worker binds its queue before pages send to it: the threads
    # share this process's record of bindings, and one would skip binding while another is writing it.
    with connect(folder) as connection:
        connection.SimpleQueue("shared")
    errors = race([partial(produce, i * per_producer) for i in range(sent)], [partial(consume, mine) for mine in taken])
    assert errors == []
    assert sorted(taken[0] + taken[1]) == list(range(sent * per_producer))
    assert not [name for name in os.listdir(folder) if name.endswith((".msg", ".claimed", ".writing"))]


def test_workers_binding_queues_at_once_lose_none_and_a_sender_never_reads_half_a_table(tmp_path):
    """kombu's own transport created the table empty and then wrote it: a sender read it empty, and two
    workers creating it together kept one queue."""
    folder, queues = tmp_path / "q", 8
    exchange = Exchange("tables", type="direct")

    def bind(n: int) -> None:
        with connect(folder) as connection:
            Queue(f"tables{n}", exchange, routing_key=f"r{n}")(connection.default_channel).declare()

    def send(binding: threading.Event) -> None:
        with connect(folder) as connection:
            channel = connection.default_channel
            while binding.is_set():
                channel.get_table("tables")  # what every message sent reads

    errors = race([partial(bind, n) for n in range(queues)], [send, send])
    assert errors == []
    with connect(folder) as connection:
        table = connection.default_channel.get_table("tables")
        assert sorted(q.queue for q in table) == sorted(f"tables{n}" for n in range(queues))
        Queue("tables0", exchange, routing_key="r0")(connection.default_channel).delete()
        assert sorted(q.queue for q in connection.default_channel.get_table("tables")) == sorted(
            f"tables{n}" for n in range(1, queues)
        )
