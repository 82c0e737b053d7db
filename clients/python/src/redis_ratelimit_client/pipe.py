"""One connection shared by an asyncio limiter's concurrent checks on a
standalone Redis, as node-redis shares its connection: the calls made in
one turn of the event loop go out together in one write, as do those made
while replies are due; the replies are matched back in order. Redis
reads, runs and answers such a batch in one go, where a command sent alone
costs it some 20 µs more, mostly system calls (redis-benchmark, one FCALL
a call, Redis CPU per call: 37 µs one at a time, 26 two at a time, 16
eight at a time).

A check cancelled while its reply is due (its deadline, or its task
cancelled) keeps its place in the queue: the reply is still read when it
comes and, for a call that takes, what it took is given back on the same
connection (as the sync transport's late reader does). The pipe is then
retired: later checks open another, so that none waits behind a stalled
connection; the retired one is handed back once nothing is due on it, or
closed after LATE seconds."""

from __future__ import annotations

import asyncio
import logging
from collections import deque
from typing import Any, Callable, Optional

from redis.exceptions import ConnectionError, ResponseError

from .commands import Undo
from .mode import Calls, Talk, takes, talk
from .wire import GAVE_UP, LATE, NOT_UNDONE, connected, packed

log = logging.getLogger("redis_ratelimit_client")

#: What becomes of a reply that comes after its check was cancelled.
Late = Callable[[Any], None]


class Pipe:
    def __init__(self, connection: Any, give_back: Callable[[Any], None]) -> None:
        self.connection = connection
        self.loop = asyncio.get_running_loop()
        self.give_back = give_back
        # A command written or to be written: its reply's future, and what
        # to do with the reply should the future be cancelled by then.
        self.due: deque[tuple[asyncio.Future[Any], Optional[Late]]] = deque()
        self.unsent: list[Any] = []  # packed, for the write to come
        self.writing = False  # a write to come takes `unsent` along
        self.reading = False  # someone reads the replies due (a check, or `reader`)
        self.tasks: set[asyncio.Task[None]] = set()  # the writer's and reader's, when they run
        self.checking = False  # a check of the connection is under way (ready)
        self.waiting: list[asyncio.Future[None]] = []  # each a check waiting for it to end
        self.talks = 0  # conversations under way here (a check's, or an undo's)
        self.usable = True  # new checks may come (not retired, not broken)
        self.broken = False
        self.expiry: Optional[asyncio.TimerHandle] = None  # a retired pipe's LATE

    async def ready(self) -> None:
        """Before a conversation starts (it reads what the connection's
        server has, mode.py): with nothing in flight, the server may have
        closed the connection since (a restart), so it is checked, once for
        every check that comes meanwhile, and made again if so."""
        while self.checking:
            # A future of its own (one cancelled leaves the others be),
            # woken with the checker's turn, so its call joins the checker's write.
            waiter = self.loop.create_future()
            self.waiting.append(waiter)
            await waiter
        if self.due or self.broken:
            return
        self.checking = True
        try:
            await connected(self.connection)
        finally:
            self.checking = False
            waiting, self.waiting = self.waiting, []
            for waiter in waiting:
                if not waiter.done():
                    waiter.set_result(None)

    async def call(self, command: list[str], late: Optional[Late] = None) -> Any:
        """`command`'s reply (its error reply raised). Alone on the pipe it
        is written at the end of this turn of the event loop, with the calls
        the other tasks make in it, and its reply read here; else it goes in
        the next write, with the others made meanwhile, and is read with
        theirs. Cancelled before its reply is in, the reply goes to `late`
        when it comes."""
        if self.broken:
            raise ConnectionError("the limiter's connection was closed")
        future = self.loop.create_future()
        alone = not self.due
        self.due.append((future, late))
        self.unsent.extend(packed(self.connection, command))
        written = not alone
        try:
            if alone:
                self.writing = True  # the calls made before the write join it
                await asyncio.sleep(0)  # the other tasks ready in this turn of the loop make theirs
                written = True
                await self._write()
                if not self.reading:
                    self.reading = True
                    await self._read(future)
            elif not self.writing:
                self.writing = True
                self._start(self._send())
            return await future
        except asyncio.CancelledError:
            if not future.done():
                future.cancel()
            elif late is not None and not future.cancelled() and future.exception() is None:
                late(future.result())  # the reply came as the check was cancelled
            if not written:
                self._start(self._send())  # cancelled before its write: the writer sends what was made
            elif alone:
                self._reader()  # it was to read here: the reader reads on
            raise

    async def _write(self) -> None:
        batch, self.unsent, self.writing = self.unsent, [], False
        try:
            await self.connection.send_packed_command(batch, check_health=False)
        except asyncio.CancelledError:  # its bytes are out: only the drain was cut short
            raise
        except BaseException as error:
            await self._break(error)

    async def _send(self) -> None:
        """The writer: what was made while replies are due, in one write."""
        await self._write()
        self._reader()

    def _reader(self) -> None:
        if not self.reading and self.due:
            self.reading = True
            self._start(self._read(None))

    async def _read(self, until: Optional[asyncio.Future[Any]]) -> None:
        """Reads the replies due, in order, until `until` has its own (a
        check reading for itself), or none is due (the reader)."""
        due = self.due
        try:
            while due and not (until is not None and until.done()):
                try:
                    reply: Any = await self.connection.read_response(disconnect_on_error=False)
                except ResponseError as error:
                    future, _ = due.popleft()
                    if not future.cancelled():  # an error reply took nothing
                        future.set_exception(error)
                    continue
                future, late = due.popleft()
                if not future.cancelled():
                    future.set_result(reply)
                elif late is not None:
                    late(reply)
        except asyncio.CancelledError:
            self.reading = False
            raise
        except BaseException as error:
            self.reading = False
            await self._break(error)
            return
        self.reading = False
        self._reader()
        self.settle()

    def _start(self, work: Any) -> None:
        task = self.loop.create_task(work)
        self.tasks.add(task)
        task.add_done_callback(self.tasks.discard)

    def retire(self) -> None:
        """A check stopped waiting here: later ones go to another pipe."""
        if self.usable:
            self.usable = False
            self.expiry = self.loop.call_later(LATE, self._give_up)

    def settle(self) -> None:
        """A retired pipe with nothing due and no conversation left goes back."""
        if not self.usable and not self.broken and not self.due and not self.talks and not self.reading and not self.writing:
            self.broken = True  # no longer ours
            if self.expiry is not None:
                self.expiry.cancel()
            self.give_back(self.connection)

    def abandon(self) -> None:
        """Its loop has ended (the limiter runs under another, asyncio.run
        again): the connection goes back, to be made ready there."""
        self.usable, self.broken = False, True
        self.due.clear()
        self.give_back(self.connection)

    def _give_up(self) -> None:
        if self.due:
            log.warning(GAVE_UP)
        self._start(self._break(None))

    async def _break(self, error: Optional[BaseException]) -> None:
        """The connection failed (or was given up on): the replies still due
        fail, and the connection is closed."""
        if self.broken:
            return
        self.usable, self.broken = False, True
        if self.expiry is not None:
            self.expiry.cancel()
        for task in list(self.tasks):
            if task is not asyncio.current_task():
                task.cancel()
        lost = ConnectionError(f"the limiter's connection failed: {str(error) or type(error).__name__}" if error is not None else f"no reply within {LATE:.0f} s")
        not_undone = False
        while self.due:
            future, late = self.due.popleft()
            if not future.done():
                future.set_exception(lost)
            not_undone = not_undone or (late is not None and future.cancelled())
        if not_undone and error is not None:
            log.warning(NOT_UNDONE, str(error) or type(error).__name__)
        self.unsent = []
        await asyncio.shield(self.connection.disconnect())


async def converse(pipe: Pipe, calls: Calls, args: list[str], undo: Optional[Undo]) -> Any:
    """The module call `args` on the pipe, as `calls` says (mode.talk): its
    reply. Cancelled while a command that takes is due: its reply, when it
    comes, is undone (`undo`) on the same pipe, which is retired."""
    pipe.talks += 1
    try:
        await pipe.ready()
        commands: Talk = talk(calls, pipe.connection, args)
        command = next(commands)
        while True:
            late = _undoing(pipe, calls, undo) if undo is not None and takes(command) else None
            try:
                reply = await pipe.call(command, late)
            except ResponseError as error:
                command = commands.throw(error)
            else:
                command = commands.send(reply)
    except StopIteration as done:
        return done.value
    except asyncio.CancelledError:
        pipe.retire()
        raise
    finally:
        pipe.talks -= 1
        pipe.settle()


# Undo conversations, referenced until they end (the loop keeps weak ones).
_undoing_tasks: set[asyncio.Task[None]] = set()


def _undoing(pipe: Pipe, calls: Calls, undo: Undo) -> Late:
    def late(reply: Any) -> None:
        pipe.talks += 1  # held from now: the pipe is not handed back before the undo is sent
        task = pipe.loop.create_task(_undo(pipe, calls, undo, reply))
        _undoing_tasks.add(task)
        task.add_done_callback(_undoing_tasks.discard)

    return late


async def _undo(pipe: Pipe, calls: Calls, undo: Undo, reply: Any) -> None:
    try:
        for args in undo(reply):
            await converse(pipe, calls, args, None)
    except Exception as error:
        log.warning(NOT_UNDONE, str(error) or type(error).__name__)
    finally:
        pipe.talks -= 1
        pipe.settle()
