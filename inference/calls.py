"""The one model-call layer: every place that calls a model over HTTP (inference
runs, scoring runs, assist runs, step splitting, the vision OCR backend) goes
through here.

* **Clients** come from ``client.make_client`` (one construction).
* **A shared limit per endpoint.** An endpoint's ``max_concurrency`` holds
  across runs and processes: each HTTP attempt needs one of the endpoint's
  slots, which are ``CallLease`` rows in the database (so it works the same on
  SQLite with the filesystem broker and on PostgreSQL with Redis). A run leases
  slots with a conditional UPDATE, keeps them while it has work, renews them
  in the background and gives them back when it is done or idle; a run that
  dies stops renewing, and its slots come free when the lease expires
  (``CALL_LEASE_SECONDS``). Slots are leased in blocks, not per request, so the
  limit costs almost nothing on the hot path (bench/inference_overhead.py).
* **A fair share.** A run with work keeps a ``CallDemand`` row fresh (and a
  synchronous caller, the OCR backend, one for a single slot while it waits
  and calls, which the runs' share leaves it); each run
  holds at most ``ceil(max_concurrency / runs wanting slots)``. A run over its
  share gives slots back as its calls finish (not mid-call), so two busy runs
  on one server end up with half the slots each, whichever came first. Runs
  in one process wake each other when slots come free or the demand changes.
* **Retries** by tenacity's rules (``retry_rules``): timeouts, connection
  errors, 408/409/429/5xx are retried with exponential backoff and jitter,
  waiting at least what a 429 or 503's ``Retry-After`` asks; anything else
  fails at once. A slot is held for one attempt only, never during the wait.
* **The request** is ``client.chat_request``: the body we built, posted through
  the client's own ``post`` (what ``chat.completions.create`` sends, without
  its per-request transform of the body).
* **An endpoint that is down stops the run**: after a few attempts in a row
  that never reached the server (``Reachability``), the run fails with one
  message naming the URL and the cause; its unasked questions stay pending.
* **Metrics**: every HTTP attempt is counted (in flight, ok or failed, tokens) for
  Prometheus by ``k12vista.metrics.model_call``.
* **Fan-out with batched saves**: ``fan_out`` runs one coroutine per item with
  at most ``max_concurrency`` items being prepared or asked at once, and saves
  what they return in batches (one transaction twice a second), reporting
  progress (and so noticing a cancel) at the same moments.
"""

from __future__ import annotations

import asyncio
import collections
import contextlib
import email.utils
import itertools
import math
import random
import threading
import time
import uuid
import weakref
from collections.abc import Awaitable, Callable, Iterable
from datetime import UTC, datetime, timedelta
from typing import Any

import openai
import tenacity
from asgiref.sync import sync_to_async
from django.conf import settings
from django.db import connections, router, transaction
from django.db.models import Count, Model, Q
from django.utils import timezone

from inference import client
from inference.models import CallDemand, CallLease, ModelEndpoint
from k12vista import metrics

# Seconds between two tries to lease more slots while every held one is busy.
LEASE_POLL_SECONDS = 0.25
# Longest wait between two attempts, whatever Retry-After asks.
MAX_RETRY_WAIT = 300.0
# Seconds between two rounds of renewing leases and giving back idle slots.
KEEP_SECONDS = 1.0
# Seconds between two saves and progress reports of a fan-out.
SAVE_SECONDS = 0.5
# Seconds a run's demand counts without renewal (renewed every KEEP_SECONDS while it has work).
DEMAND_SECONDS = 5.0
# Seconds a slot may stay idle while another run wants slots before it goes back.
IDLE_GRACE_SECONDS = 0.05
# Seconds a server of an endpoint that failed (no connection, a 5xx) is set aside (MODEL_REPLICA_COOLDOWN).
REPLICA_COOLDOWN_SECONDS = 10.0
# 503 answers in a row (no success between) that set a replica aside; any other failure sets it aside at once.
BUSY_IN_A_ROW = 3
# Statuses whose Retry-After header says when to come back.
RETRY_AFTER_STATUS = {429, 503}
# How a synchronous caller's demand is told from a run's: it wants one slot, not a share.
SYNC_HOLDER = "sync-"
_FREE = datetime(2000, 1, 1, tzinfo=UTC)  # an expiry long past: the slot is free


# --- the shared slots -------------------------------------------------------------------


def lease_seconds() -> int:
    return settings.CALL_LEASE_SECONDS


def take_slots(*, endpoint_id: int, limit: int, holder: str, want: int) -> list[int]:
    """Leases up to ``want`` free slots (of ``limit``) of an endpoint for ``holder``.

    Each slot is claimed by an UPDATE that only matches while its lease has run
    out, so two holders never get the same slot, whatever the database."""
    if want <= 0:
        return []
    CallLease.objects.bulk_create(
        [CallLease(endpoint_id=endpoint_id, slot=n, expires=_FREE) for n in range(limit)], ignore_conflicts=True
    )
    now = timezone.now()
    free = CallLease.objects.filter(endpoint_id=endpoint_id, slot__lt=limit, expires__lt=now)
    taken = []
    for pk, slot in free.values_list("pk", "slot")[: want * 2]:
        claimed = CallLease.objects.filter(pk=pk, expires__lt=now).update(
            holder=holder, expires=now + timedelta(seconds=lease_seconds())
        )
        if claimed:
            taken.append(slot)
            if len(taken) == want:
                break
    return taken


def fair_share(*, endpoint_id: int, limit: int, holder: str) -> int:
    """Records that ``holder`` wants slots, and returns how many it may hold:
    the endpoint's limit, less one slot per synchronous caller wanting one,
    split evenly over the runs that want slots now (0 while callers take them all)."""
    now = note_demand(endpoint_id=endpoint_id, holder=holder, seconds=DEMAND_SECONDS)
    wanting = CallDemand.objects.filter(endpoint_id=endpoint_id, expires__gte=now).aggregate(
        all=Count("id"), single=Count("id", filter=Q(holder__startswith=SYNC_HOLDER))
    )
    runs = max(wanting["all"] - wanting["single"], 1)
    # While a synchronous caller waits, a run's share may be 0: with a limit of 1, a share of at least
    # one would keep the only slot from the caller until the run ended.
    return max(0 if wanting["single"] else 1, math.ceil((limit - wanting["single"]) / runs))


def note_demand(*, endpoint_id: int, holder: str, seconds: float) -> datetime:
    """Records (or renews) that ``holder`` wants slots for the next ``seconds``; returns now.

    A run renews its demand every KEEP_SECONDS while it has work: one UPDATE, not
    update_or_create's transaction, SELECT FOR UPDATE and UPDATE (a run's demand row
    exists after its first round; the cluster bench counted these per run and second)."""
    now = timezone.now()
    expires = now + timedelta(seconds=seconds)
    if not CallDemand.objects.filter(endpoint_id=endpoint_id, holder=holder).update(expires=expires):
        CallDemand.objects.update_or_create(endpoint_id=endpoint_id, holder=holder,
                                            defaults={"expires": expires})  # fmt: skip
    return now


def drop_demand(*, endpoint_id: int, holder: str) -> None:
    CallDemand.objects.filter(endpoint_id=endpoint_id, holder=holder).delete()


def renew_slots(*, endpoint_id: int, holder: str, slots: Iterable[int]) -> set[int]:
    """Extends the holder's leases; returns the slots it still holds (a lease
    that ran out while the process stalled may have gone to someone else)."""
    slots = list(slots)
    mine = CallLease.objects.filter(endpoint_id=endpoint_id, holder=holder, slot__in=slots, expires__gte=timezone.now())
    mine.update(expires=timezone.now() + timedelta(seconds=lease_seconds()))
    return set(
        CallLease.objects.filter(endpoint_id=endpoint_id, holder=holder, slot__in=slots).values_list("slot", flat=True)
    )


def free_slots(*, endpoint_id: int, holder: str, slots: Iterable[int]) -> None:
    CallLease.objects.filter(endpoint_id=endpoint_id, holder=holder, slot__in=list(slots)).update(
        holder="", expires=_FREE
    )


# The SharedSlots of this process, by endpoint: a run that frees slots or changes the
# demand wakes the others at once instead of leaving them to their next poll.
_NEIGHBOURS: dict[int, weakref.WeakSet[SharedSlots]] = collections.defaultdict(weakref.WeakSet)
_NEIGHBOURS_LOCK = threading.Lock()


class SharedSlots:
    """An endpoint's request slots as seen by one run in one event loop.

    ``async with slots:`` takes a slot this run holds, or waits while a single
    leaser task leases more from the database (up to the endpoint's
    max_concurrency over all runs), polling while other runs hold them all. A
    released slot goes straight to the next waiting task, with no query; the
    hot path is a counter. A housekeeping task renews the leases and gives back
    slots that stayed idle, so a second run on the same server gets them when
    this one has less work than slots (at its end, or while it is saving).

    Handing slots from run to run is prompt: a slot over the fair share, or one
    nobody of this run waits for while another run wants slots, goes back to the
    database as its call ends (not at the next housekeeping round), and a run
    with nothing left in flight withdraws its demand at once. Runs in the same
    process (a campaign's, or jobs in threads) wake each other when slots come
    free or the demand changes; runs in other processes learn it by polling."""

    def __init__(self, endpoint: ModelEndpoint) -> None:
        self.endpoint_id = endpoint.pk
        self.limit = endpoint.call_limit
        self.holder = uuid.uuid4().hex
        self.held: set[int] = set()
        self.busy = 0
        self.share = self.limit  # at most this many held: the limit over the runs wanting slots
        self.returning: set[int] = set()  # given back by finished calls, freed in the database soon
        self.waiters: collections.deque[asyncio.Future[None]] = collections.deque()
        self.demanding = False  # whether our CallDemand row is there
        self.loop: asyncio.AbstractEventLoop | None = None
        # Set by neighbours (slots freed or demand changed), for the leaser and the keeper.
        self._changed: dict[str, asyncio.Event] = {}
        self._leaser: asyncio.Task | None = None
        self._keeper: asyncio.Task | None = None
        self._giver: asyncio.Task | None = None

    async def __aenter__(self) -> SharedSlots:
        if self.busy < len(self.held) and not self.waiters:
            self.busy += 1
            return self
        if self.loop is None:
            self.loop, self._changed = asyncio.get_running_loop(), {"lease": asyncio.Event(), "keep": asyncio.Event()}
            with _NEIGHBOURS_LOCK:
                _NEIGHBOURS[self.endpoint_id].add(self)
        waiter = self.loop.create_future()
        self.waiters.append(waiter)
        if self._leaser is None or self._leaser.done():
            self._leaser = asyncio.create_task(self._lease_while_waited_for())
        try:
            await waiter
        except asyncio.CancelledError:
            if waiter.done() and not waiter.cancelled():
                self._release()  # the slot was handed over just as we were cancelled
            else:
                self.waiters.remove(waiter)
            raise
        return self

    async def __aexit__(self, *exc: object) -> None:
        self._release()

    def _release(self) -> None:
        self.busy -= 1
        # Over our fair share: it goes back, not to our next call.
        self._put_back(min(len(self.held) - self.share, len(self.held) - self.busy))
        idle_while_wanted = self.share < self.limit and not self.waiters
        if (self.returning or idle_while_wanted) and (self._giver is None or self._giver.done()):
            self._giver = asyncio.create_task(self._give_back())
        self._hand_over()

    def _put_back(self, count: int) -> None:
        """Moves ``count`` held slots (not in use) to those freed in the database next."""
        if count > 0:
            back = set(itertools.islice(self.held, count))
            self.held -= back
            self.returning |= back

    def _hand_over(self) -> None:
        """Gives free held slots to waiting tasks, first come first served."""
        while self.waiters and self.busy < len(self.held):
            waiter = self.waiters.popleft()
            if not waiter.done():
                self.busy += 1
                waiter.set_result(None)
        if self._keeper is None and self.held:
            self._keeper = asyncio.create_task(self._keep())

    def _tell_neighbours(self) -> None:
        """Wakes the other runs of this process on the endpoint (each in its own loop)."""
        with _NEIGHBOURS_LOCK:
            others = [other for other in _NEIGHBOURS[self.endpoint_id] if other is not self]
        for other in others:
            if other.loop is not None:
                with contextlib.suppress(RuntimeError):  # its loop has closed: that run is over
                    other.loop.call_soon_threadsafe(other._wake)

    def _wake(self) -> None:
        for event in self._changed.values():
            event.set()

    async def _pause(self, seconds: float, task: str) -> None:
        """Sleeps, or less if a neighbour says slots came free or the demand changed
        (one event for the leaser and one for the keeper: neither takes the other's wake-up)."""
        event = self._changed[task]
        with contextlib.suppress(TimeoutError):
            async with asyncio.timeout(seconds):
                await event.wait()
        event.clear()

    async def _refresh_share(self) -> None:
        self.share = await sync_to_async(fair_share, thread_sensitive=True)(
            endpoint_id=self.endpoint_id, limit=self.limit, holder=self.holder
        )
        if not self.demanding:
            self.demanding = True
            self._tell_neighbours()  # one more run wants slots: the others' shares shrink

    async def _drop_demand(self) -> None:
        if self.demanding:
            self.demanding = False
            await sync_to_async(drop_demand, thread_sensitive=True)(endpoint_id=self.endpoint_id, holder=self.holder)
            self._tell_neighbours()

    async def _free(self, slots: set[int]) -> None:
        await sync_to_async(free_slots, thread_sensitive=True)(
            endpoint_id=self.endpoint_id, holder=self.holder, slots=slots
        )
        self._tell_neighbours()

    async def _give_back(self) -> None:
        """Frees the returned slots in the database; then, while another run wants
        slots, the ones still idle after a moment (a task between two calls, building
        its next request, keeps its slot) and our demand once nothing is in flight."""
        while self.returning:
            await self._free_returning()
        if self.share < self.limit and not self.waiters:
            await asyncio.sleep(IDLE_GRACE_SECONDS)
            if not self.waiters:
                self._put_back(len(self.held) - self.busy)
        while self.returning:
            await self._free_returning()
        if self.share < self.limit and not self.waiters and not self.busy:
            await self._drop_demand()

    async def _free_returning(self) -> None:
        back = set(self.returning)
        await self._free(back)
        self.returning -= back  # only now: if cancelled meanwhile, close() frees them

    async def _lease_while_waited_for(self) -> None:
        while self.waiters and len(self.held) < self.limit:
            await self._refresh_share()
            want = min(len(self.waiters) - (len(self.held) - self.busy), self.share - len(self.held))
            got = []
            if want > 0:
                got = await sync_to_async(take_slots, thread_sensitive=True)(
                    endpoint_id=self.endpoint_id, limit=self.limit, holder=self.holder, want=want
                )
            self.held.update(got)
            self._hand_over()
            if self.waiters and not got:
                # Every slot is leased by other runs, or we hold our share already.
                await self._pause(LEASE_POLL_SECONDS if want > 0 else KEEP_SECONDS, "lease")

    async def _keep(self) -> None:
        renewed = time.monotonic()
        idle_since: float | None = None
        while True:
            await self._pause(KEEP_SECONDS, "keep")
            if self.waiters or self.busy:
                # Still wanting slots: keep our demand fresh and learn our share.
                await self._refresh_share()
            else:
                await self._drop_demand()
            if len(self.held) > self.share and self.busy < len(self.held):
                spare = set(list(self.held)[: min(len(self.held) - self.share, len(self.held) - self.busy)])
                self.held -= spare
                self.returning |= spare
            if self.returning:
                await self._free_returning()
            idle = len(self.held) - self.busy if not self.waiters else 0
            now = time.monotonic()
            if idle <= 0:
                idle_since = None
            elif idle_since is None:
                idle_since = now
            elif now - idle_since >= KEEP_SECONDS:
                # Idle for a whole round: another run on this server may need them.
                spare = set(list(self.held)[:idle])
                self.held -= spare
                await self._free(spare)
                idle_since = None
            if self.held and now - renewed >= lease_seconds() / 3:
                sent = set(self.held)
                still = await sync_to_async(renew_slots, thread_sensitive=True)(
                    endpoint_id=self.endpoint_id, holder=self.holder, slots=sent
                )
                self.held -= sent - still
                renewed = time.monotonic()

    async def close(self) -> None:
        for task in (self._leaser, self._keeper, self._giver):
            if task is not None:
                task.cancel()
        self._leaser = self._keeper = self._giver = None
        with _NEIGHBOURS_LOCK:
            _NEIGHBOURS[self.endpoint_id].discard(self)
        if self.held or self.returning:
            await sync_to_async(free_slots, thread_sensitive=True)(
                endpoint_id=self.endpoint_id, holder=self.holder, slots=self.held | self.returning
            )
            self.held, self.returning = set(), set()
        await sync_to_async(drop_demand, thread_sensitive=True)(endpoint_id=self.endpoint_id, holder=self.holder)
        self.demanding = False
        self._tell_neighbours()


class one_slot:  # noqa: N801 (used as a context manager, like open())
    """One slot for a synchronous caller (the OCR backend), polled for and
    leased for at least the call's timeout so it needs no renewal.

    While it waits and while it holds the slot it keeps a demand row, so the
    runs on the endpoint count it in their fair share and give a slot back as
    their calls finish: a busy run holding every slot does not starve the
    PDF importer until it ends."""

    def __init__(self, endpoint: ModelEndpoint) -> None:
        self.endpoint = endpoint
        self.holder = SYNC_HOLDER + uuid.uuid4().hex
        self.slots: list[int] = []
        self.demanded = False

    def __enter__(self) -> one_slot:
        if transaction.get_connection().in_atomic_block:
            # A lease written inside a caller's transaction would stay invisible, and its row
            # locked, until that commits: every other run would wait on it. The PDF importer
            # calls OCR outside transactions; a caller inside one goes unlimited, not stuck.
            return self
        try:
            self._wait_for_a_slot()
        except BaseException:
            self.__exit__()
            raise
        return self

    def _wait_for_a_slot(self) -> None:
        endpoint_id, renewed = self.endpoint.pk, -math.inf
        while not self.slots:
            if time.monotonic() - renewed >= KEEP_SECONDS:
                # Renewed as often as a run renews its own: a caller that died stops counting soon.
                note_demand(endpoint_id=endpoint_id, holder=self.holder, seconds=DEMAND_SECONDS)
                self.demanded, renewed = True, time.monotonic()
            with transaction.atomic():
                self.slots = take_slots(endpoint_id=endpoint_id, limit=self.endpoint.call_limit,
                                        holder=self.holder, want=1)  # fmt: skip
            if self.slots:
                # Long enough for the whole call: nothing renews a synchronous lease (nor its demand).
                held_for = self.endpoint.timeout_seconds + lease_seconds()
                CallLease.objects.filter(endpoint_id=endpoint_id, holder=self.holder).update(
                    expires=timezone.now() + timedelta(seconds=held_for)
                )
                note_demand(endpoint_id=endpoint_id, holder=self.holder, seconds=held_for)
            else:
                time.sleep(LEASE_POLL_SECONDS)

    def __exit__(self, *exc: object) -> None:
        if self.slots:
            free_slots(endpoint_id=self.endpoint.pk, holder=self.holder, slots=self.slots)
        if self.demanded:
            drop_demand(endpoint_id=self.endpoint.pk, holder=self.holder)
        self.slots, self.demanded = [], False


# --- retries ----------------------------------------------------------------------------


def retry_after(exc: BaseException | None) -> float | None:
    """Seconds a 429 or 503 asks us to wait (``Retry-After`` in seconds or as a
    date, or ``retry-after-ms``), or None."""
    if not isinstance(exc, openai.APIStatusError) or exc.status_code not in RETRY_AFTER_STATUS:
        return None
    headers = exc.response.headers
    try:
        if headers.get("retry-after-ms"):
            return max(0.0, float(headers["retry-after-ms"]) / 1000)
        value = headers.get("retry-after")
        if not value:
            return None
        if value.strip().isdigit() or value.replace(".", "", 1).strip().isdigit():
            return max(0.0, float(value))
        when = email.utils.parsedate_to_datetime(value)
        return max(0.0, (when - timezone.now()).total_seconds())
    except (TypeError, ValueError, OverflowError):
        return None  # a header we cannot read is no reason to fail the call


class wait_backoff(tenacity.wait.wait_base):  # noqa: N801 (tenacity's naming)
    """Exponential backoff with jitter, but never less than Retry-After."""

    def __init__(self, backoff: float) -> None:
        self.backoff = backoff

    def seconds(self, attempt: int, exc: BaseException | None) -> float:
        """The wait after failed attempt number ``attempt`` (from 1) that raised ``exc``."""
        exponential = self.backoff * 2 ** (attempt - 1) * (0.5 + random.random())  # noqa: S311
        return min(max(exponential, retry_after(exc) or 0.0), MAX_RETRY_WAIT)

    def __call__(self, retry_state: tenacity.RetryCallState) -> float:
        failed = retry_state.outcome.exception() if retry_state.outcome else None
        return self.seconds(retry_state.attempt_number, failed)


def worth_retrying(exc: BaseException) -> bool:
    return isinstance(exc, Exception) and client.is_transient(exc)


def retry_rules(*, retries: int | None = None, backoff: float | None = None) -> dict[str, Any]:
    """The tenacity arguments every model call uses (``Caller.complete`` follows
    the same stop, wait and retry in its own loop)."""
    return {
        "stop": tenacity.stop_after_attempt(1 + (settings.MODEL_CALL_RETRIES if retries is None else retries)),
        "wait": wait_backoff(getattr(settings, "MODEL_CALL_BACKOFF", 1.0) if backoff is None else backoff),
        "retry": tenacity.retry_if_exception(worth_retrying),
        "reraise": True,
    }


def completion_of(reply: Any, *, started: float, attempts: int) -> client.Completion:
    choice = reply.choices[0] if reply.choices else None
    usage = reply.usage
    return client.Completion(
        text=(choice.message.content or "") if choice else "",
        latency_ms=round((time.perf_counter() - started) * 1000),
        prompt_tokens=usage.prompt_tokens if usage else None,
        completion_tokens=usage.completion_tokens if usage else None,
        finish_reason=(choice.finish_reason or "") if choice else "",
        attempts=attempts,
    )


# --- callers ----------------------------------------------------------------------------


class Reachability:
    """Attempts in a row, over all of a run's calls to one endpoint, that never reached
    the server (refused, DNS, TLS, connect timeout, dropped). After
    ``MODEL_UNREACHABLE_AFTER`` of them, one a retry (the server stayed down past a
    backoff; a blip that fails every request in flight at once is retried first),
    the endpoint is down: every call of the run raises EndpointUnreachable, which
    stops the run with one message while its unasked questions stay pending. Any
    answer from the server, even a 4xx or 5xx, starts the count again."""

    def __init__(self, endpoint: ModelEndpoint, *, attempts_per_call: int) -> None:
        self.url = endpoint.base_url
        self.limit = max(1, getattr(settings, "MODEL_UNREACHABLE_AFTER", 4))
        self.attempts_per_call = attempts_per_call
        self.in_a_row = 0
        self.down: str | None = None  # the cause, once the endpoint is held down

    def check(self) -> None:
        if self.down is not None:
            raise client.EndpointUnreachable(url=self.url, cause=self.down, count=self.in_a_row)

    def note(self, exc: BaseException | None, *, attempt: int) -> None:
        cause = client.connection_failure(exc) if exc is not None else None
        if cause is None:
            self.in_a_row = 0
            return
        self.in_a_row += 1
        if self.in_a_row >= self.limit and (attempt > 1 or self.attempts_per_call == 1):
            self.down = cause
            self.check()


class Server:
    """One of an endpoint's servers as one run sees it: its client, the requests it has in flight,
    how many it was sent, and until when it is set aside after a failure."""

    def __init__(self, endpoint: ModelEndpoint, url: str) -> None:
        self.url = url
        self.api = client.make_client(endpoint, url=url)
        self.outstanding = 0
        self.sent = 0
        self.aside_until = -math.inf
        self.set_aside_count = 0
        self.busy_in_a_row = 0  # 503 answers since its last success (Replicas.set_aside)


def server_failed(exc: BaseException) -> bool:
    """Whether a failure is the server's rather than the question's: no connection, or a 5xx."""
    if client.connection_failure(exc) is not None:
        return True
    return isinstance(exc, openai.APIStatusError) and exc.status_code >= 500


class Replicas:
    """An endpoint's servers (its base URL and replica URLs) for one run. Each call goes to the
    server with the fewest requests in flight from this run (the fewest sent on a tie, so an idle
    endpoint's calls go round); a server that failed (no connection, a 5xx) is set aside for
    ``MODEL_REPLICA_COOLDOWN`` seconds while the others take its calls, and tried again after.
    The counters are in-process: each run spreads its own calls, and the endpoint's shared slots
    (SharedSlots, the sum of its servers' limits) still bound them all together."""

    def __init__(self, endpoint: ModelEndpoint) -> None:
        self.servers = [Server(endpoint, url) for url in endpoint.server_urls()]
        self.cooldown = float(getattr(settings, "MODEL_REPLICA_COOLDOWN", REPLICA_COOLDOWN_SECONDS))

    def ready(self, *, avoid: Iterable[Server] = ()) -> list[Server]:
        now = time.monotonic()
        return [server for server in self.servers if server.aside_until <= now and server not in avoid]

    def pick(self, *, avoid: Iterable[Server] = ()) -> Server:
        avoid = list(avoid)
        ready = self.ready(avoid=avoid)
        if ready:
            return min(ready, key=lambda server: (server.outstanding, server.sent))
        # Every server is set aside or tried: the one back soonest (alone, the endpoint's only server).
        untried = [server for server in self.servers if server not in avoid] or self.servers
        return min(untried, key=lambda server: server.aside_until)

    def set_aside(self, server: Server, exc: BaseException) -> bool:
        """Sets the server aside when the failure is the server's; returns whether the failure was
        the server's (so the call may go on at once on another).

        A 503 is a server that answers but is busy for a moment (RFC 9110: a temporary overload):
        it is set aside only after ``BUSY_IN_A_ROW`` of them with no success between. Set aside at
        the first, one 503 in 200 calls kept a two-server endpoint on one server a third of the
        time (bench/cluster.py), its calls queueing there while the other stood idle."""
        if not server_failed(exc):
            return False
        if isinstance(exc, openai.APIStatusError) and exc.status_code == 503:
            server.busy_in_a_row += 1
            if server.busy_in_a_row < BUSY_IN_A_ROW:
                return True
        server.aside_until = time.monotonic() + self.cooldown
        server.set_aside_count += 1
        return True

    async def close(self) -> None:
        for server in self.servers:
            await server.api.close()


class Caller:
    """Calls to one endpoint from one run: its servers, its shared slots and the retry rules."""

    def __init__(self, endpoint: ModelEndpoint, *, retries: int | None = None, backoff: float | None = None) -> None:
        self.endpoint = endpoint
        self.replicas = Replicas(endpoint)
        self.api = self.replicas.servers[0].api  # the base URL's client
        self.slots = SharedSlots(endpoint)
        rules = retry_rules(retries=retries, backoff=backoff)
        self.most_attempts: int = rules["stop"].max_attempt_number
        self.wait: wait_backoff = rules["wait"]
        self.reach = Reachability(endpoint, attempts_per_call=self.most_attempts)

    async def complete(self, messages: list[dict[str, Any]], params: dict[str, Any]) -> client.Completion:
        """One chat completion, retried by the rules above; ModelCallError when it fails for good,
        EndpointUnreachable once the endpoint is down (see Reachability).

        The retry rules are tenacity's (``retry_rules``), followed in a plain loop: a
        tenacity.AsyncRetrying per call cost 0.11 ms of CPU, a thirtieth of an instant
        call (bench/inference_overhead.py)."""
        request = client.chat_request(model=self.endpoint.model_name, messages=messages, params=params)
        attempts = 0
        while True:
            attempts += 1
            try:
                return await self._attempt(request, attempts)
            except (openai.APIError, openai.APIConnectionError) as exc:
                if attempts >= self.most_attempts or not worth_retrying(exc):
                    raise client.ModelCallError(client.describe(exc), transient=client.is_transient(exc),
                                                attempts=attempts) from exc  # fmt: skip
                # The slot went back when the attempt ended: none is held during the wait.
                await asyncio.sleep(self.wait.seconds(attempts, exc))

    async def _attempt(self, request: dict[str, Any], attempt: int) -> client.Completion:
        """One attempt, on the server ``Replicas`` picks. When that server fails and another is
        ready, the server is set aside and the attempt goes on at once on the other (no backoff,
        no attempt counted, each server once): a replica down costs its calls nothing while
        another answers. Only a failure with no other server left counts towards Reachability."""
        tried: list[Server] = []
        while True:
            self.reach.check()
            async with self.slots:
                # Picked once the slot is ours: calls waiting for slots have not gone anywhere yet.
                server = self.replicas.pick(avoid=tried)
                server.outstanding += 1
                server.sent += 1
                started = time.perf_counter()
                try:
                    with metrics.model_call(endpoint=self.endpoint.name, replica=server.url) as call:
                        reply = await server.api.post(**request)
                        call.used(reply.usage)
                except openai.APIError as exc:
                    tried.append(server)
                    if self.replicas.set_aside(server, exc) and self.replicas.ready(avoid=tried):
                        continue
                    self.reach.note(exc, attempt=attempt)
                    raise
                finally:
                    server.outstanding -= 1
                server.busy_in_a_row = 0
                self.reach.note(None, attempt=attempt)
            return completion_of(reply, started=started, attempts=attempt)

    async def close(self) -> None:
        await self.slots.close()
        await self.replicas.close()


def complete_sync(
    endpoint: ModelEndpoint, messages: list[dict[str, Any]], params: dict[str, Any], *, backoff: float | None = None
) -> client.Completion:
    """The synchronous twin of ``Caller.complete`` for synchronous callers (the
    PDF importer's OCR backend): the same request (``client.chat_request``), slots, retry
    rules and errors (tenacity's own loop here: a call is seconds long, its 0.1 ms does not count)."""
    api = client.make_client(endpoint, sync=True)
    request = client.chat_request(model=endpoint.model_name, messages=messages, params=params)
    attempts = 0
    try:
        for attempt in tenacity.Retrying(**retry_rules(backoff=backoff)):
            with attempt:
                attempts = attempt.retry_state.attempt_number
                with one_slot(endpoint), metrics.model_call(endpoint=endpoint.name, replica=endpoint.base_url) as call:
                    started = time.perf_counter()
                    reply = api.post(**request)
                    call.used(reply.usage)
    except (openai.APIError, openai.APIConnectionError) as exc:
        raise client.ModelCallError(client.describe(exc), transient=client.is_transient(exc),
                                    attempts=attempts) from exc  # fmt: skip
    finally:
        api.close()
    return completion_of(reply, started=started, attempts=attempts)


# --- fan-out ----------------------------------------------------------------------------


def update_rows(model: type[Model], rows: Iterable[tuple[int, dict[str, Any]]]) -> None:
    """Sets columns on rows by primary key: ``(pk, {field: value})`` pairs, one
    ``executemany`` per set of fields. The same as ``filter(pk=pk).update(**fields)``
    for each (no signals, no auto_now), without building a queryset per row: that
    cost a third of a millisecond of CPU per answer, a tenth of an instant call
    (bench/inference_overhead.py). Values go through each field's
    ``get_db_prep_save``, so they are stored as the ORM stores them."""
    connection = connections[router.db_for_write(model)]
    quote = connection.ops.quote_name
    # Any: the stubs type get_field() as a relation too, and a column as possibly None; these are concrete columns.
    meta: Any = model._meta
    by_fields: dict[tuple[str, ...], list[tuple[int, dict[str, Any]]]] = collections.defaultdict(list)
    for pk, fields in rows:
        by_fields[tuple(fields)].append((pk, fields))
    with connection.cursor() as cursor:
        for names, group in by_fields.items():
            columns = [meta.get_field(name) for name in names]
            assignments = ", ".join(f"{quote(field.column)} = %s" for field in columns)
            # Only quoted column names of the model go into the text; every value is a parameter.
            sql = f"UPDATE {quote(meta.db_table)} SET {assignments} WHERE {quote(meta.pk.column)} = %s"  # noqa: S608
            cursor.executemany(sql, [
                [field.get_db_prep_save(fields[field.name], connection) for field in columns] + [pk]
                for pk, fields in group
            ])  # fmt: skip


class SharedSave[R]:
    """One save for the fan-outs of several runs answered side by side (a campaign's):
    each fan-out hands over its answers twice a second, and this writes what it
    holds in one transaction at most every SAVE_SECONDS, instead of one small
    transaction per run (the cluster bench saw batches of about 3 answers with
    several runs per worker). ``flush()`` writes the rest: call it when the
    fan-outs end, however they end. A killed worker loses at most the answers
    of one unsaved batch (SAVE_SECONDS of answers over all the runs); their rows
    stay pending and are asked again."""

    def __init__(self, save: Callable[[list[R]], None]) -> None:
        self.save = save
        self.unsaved: list[R] = []
        self.saved_at = time.monotonic()

    def __call__(self, batch: list[R]) -> None:
        self.unsaved.extend(batch)
        if time.monotonic() - self.saved_at >= SAVE_SECONDS:
            self.flush()

    def flush(self) -> None:
        self.saved_at = time.monotonic()
        batch, self.unsaved = self.unsaved, []
        if batch:
            self.save(batch)


async def fan_out[T, R](
    items: Iterable[T],
    handle: Callable[[T], Awaitable[R | None]],
    *,
    concurrency: int,
    save: Callable[[list[R]], None],
    progress: Callable[[int, int | None], None],
    done: int,
    total: int,
) -> None:
    """Runs ``handle`` for every item, at most ``concurrency`` at once, and saves
    what they return (None: nothing to save) with ``save(batch)`` in batches.

    Saving each answer and the job row one by one cost a quarter of the
    throughput; twice a second is enough for the progress bar and for noticing
    a cancel (``progress`` raises JobCancelled). A crash loses at most the
    unsaved results, whose rows stay pending and are asked again. The first
    real error (a cancel, a lost job, a database failure) ends the fan-out."""
    limit = asyncio.Semaphore(concurrency)
    unsaved: list[R] = []
    state: dict[str, Any] = {"done": done, "reported": 0.0}
    save_now = sync_to_async(save, thread_sensitive=True)
    report_now = sync_to_async(progress, thread_sensitive=True)

    async def settle(final: bool = False) -> None:
        now = time.monotonic()
        if not final and now - state["reported"] < SAVE_SECONDS:
            return
        state["reported"] = now
        batch, unsaved[:] = list(unsaved), []
        if batch:
            await save_now(batch)
        await report_now(state["done"], total)

    async def one(item: T) -> None:
        async with limit:
            result = await handle(item)
            if result is not None:
                unsaved.append(result)
            state["done"] += 1
            await settle()

    try:
        async with asyncio.TaskGroup() as group:
            for item in items:
                group.create_task(one(item))
    except* Exception as group_error:
        first = group_error.exceptions[0]
        if isinstance(first, client.EndpointUnreachable) and unsaved:
            await save_now(list(unsaved))  # the answers in hand are kept; the rest stay pending
        raise first from None
    await settle(final=True)
