"""The embedded default's filesystem broker (k12vista.broker): several workers share its folder,
and no message is read half-written, taken twice or allowed to stop a worker."""

import logging
import os
import threading
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


def test_two_consumers_take_every_message_of_two_producers_once(tmp_path):
    folder, sent, per_producer = tmp_path / "q", 2, 300
    taken: list[list[int]] = [[], []]
    errors: list[BaseException] = []
    producing = threading.Event()
    producing.set()

    def produce(first: int) -> None:
        with connect(folder) as connection:
            queue = connection.SimpleQueue("shared")
            for n in range(first, first + per_producer):
                queue.put({"n": n})

    def consume(mine: list[int]) -> None:
        try:
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
        except BaseException as exc:  # a worker's "Unrecoverable error"
            errors.append(exc)

    # Bound before the threads start, as a worker binds its queue before pages send to it: the threads
    # share this process's record of bindings, and one would skip binding while another is writing it.
    with connect(folder) as connection:
        connection.SimpleQueue("shared")
    producers = [threading.Thread(target=produce, args=(i * per_producer,)) for i in range(sent)]
    consumers = [threading.Thread(target=consume, args=(taken[i],)) for i in range(2)]
    for thread in consumers + producers:
        thread.start()
    for thread in producers:
        thread.join()
    producing.clear()
    for thread in consumers:
        thread.join(timeout=60)
    assert errors == []
    assert sorted(taken[0] + taken[1]) == list(range(sent * per_producer))
    assert not [name for name in os.listdir(folder) if name.endswith((".msg", ".claimed", ".writing"))]


def test_workers_binding_queues_at_once_lose_none_and_a_sender_never_reads_half_a_table(tmp_path):
    """kombu's own transport created the table empty and then wrote it: a sender read it empty, and two
    workers creating it together kept one queue."""
    folder, queues = tmp_path / "q", 8
    errors: list[BaseException] = []
    binding = threading.Event()
    binding.set()
    exchange = Exchange("tables", type="direct")

    def bind(n: int) -> None:
        try:
            with connect(folder) as connection:
                Queue(f"tables{n}", exchange, routing_key=f"r{n}")(connection.default_channel).declare()
        except BaseException as exc:
            errors.append(exc)

    def send() -> None:
        try:
            with connect(folder) as connection:
                channel = connection.default_channel
                while binding.is_set():
                    channel.get_table("tables")  # what every message sent reads
        except BaseException as exc:
            errors.append(exc)

    readers = [threading.Thread(target=send) for _ in range(2)]
    binders = [threading.Thread(target=bind, args=(n,)) for n in range(queues)]
    for thread in readers + binders:
        thread.start()
    for thread in binders:
        thread.join()
    binding.clear()
    for thread in readers:
        thread.join(timeout=60)
    assert errors == []
    with connect(folder) as connection:
        table = connection.default_channel.get_table("tables")
        assert sorted(q.queue for q in table) == sorted(f"tables{n}" for n in range(queues))
        Queue("tables0", exchange, routing_key="r0")(connection.default_channel).delete()
        assert sorted(q.queue for q in connection.default_channel.get_table("tables")) == sorted(
            f"tables{n}" for n in range(1, queues)
        )
