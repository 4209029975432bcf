"""Micro-batching: gather concurrent score calls into one model run, in a worker thread.

Calls arriving while the inference threads are busy accumulate and go together in
the next run, so batches grow with load (up to ``max_batch``) and latency stays low
when traffic is light (a lone call waits at most ``max_wait_us``). A failed or invalid
batch fails only its own callers; a call whose caller already gave up (deadline) is
dropped before it reaches the model.

A tiny batch (at most ``inline_rows`` calls) of a model whose runs are known to be short
computations runs on the event loop itself (the decider asks for it on the CPU provider,
whose runs compute on the calling thread rather than wait for a device): handing one
request to a worker thread and its answer back (a thread wake-up, the interpreter lock
passed to and fro, two futures chained) costs about as much CPU as the model run, and
its latency on top. "Known to be short" is
measured, never assumed: every run's CPU time per row is tracked, a batch runs inline only
when the last runs predict it to take at most ``inline_budget_us``, and the first runs
(nothing measured yet) and any run that took longer send the next batches to the thread,
where the caller's deadline still applies. Larger batches, the ones load forms, always
run in the threads, so the event loop is never held for a whole batch.
"""

from __future__ import annotations

import asyncio
import time
from concurrent.futures import Executor
from typing import Any

from gateway import metrics
from gateway.decider.scoring import BatchModel, InvalidOutput, ModelError, ModelOverloaded, Scored, check_probabilities
from gateway.features import ModelInput
from gateway.verdict import Probabilities

BATCH_SIZE = metrics.histogram("clefgate_model_batch_size", "Requests per model run.", ("model",),
                               buckets=(1, 2, 4, 8, 16, 32, 64, 128, 256, 512))
INFERENCE_SECONDS = metrics.histogram("clefgate_model_inference_seconds", "Time of one model run (a whole batch), in its worker thread or on the event loop.",
                                      ("model",))
QUEUE_DEPTH = metrics.gauge("clefgate_model_queue", "Requests waiting for or inside a model run.", ("model",))
# how far one faster run moves the time-per-row estimate towards it (a slower run replaces it)
_SETTLE = 0.2


class BatchingScorer:
    """Adapts a synchronous ``BatchModel`` to the async ``Scorer`` protocol, batching calls."""

    def __init__(self, model: BatchModel, executor: Executor, *, max_batch: int = 64, max_wait_us: int = 500,
                 max_queue: int = 4096, threads: int = 1, questions: dict[str, tuple[str, ...]] | None = None,
                 inline_rows: int = 0, inline_budget_us: int = 0) -> None:
        self.model = model
        self.executor = executor
        self.max_batch = max_batch
        self.max_wait_s = max_wait_us / 1e6
        self.max_queue = max_queue
        self.threads = threads
        self.questions = questions
        self.label = model.label
        self._pending: list[tuple[ModelInput, asyncio.Future[Scored]]] = []
        self._timer: asyncio.TimerHandle | None = None
        self._running = 0
        self._queued = 0
        # batches of at most inline_rows calls run on the event loop while the runs predict at most inline_budget_us
        self.inline_rows = inline_rows if inline_budget_us > 0 else 0
        self.inline_budget_s = inline_budget_us / 1e6
        # seconds per row the recent runs took (None: nothing measured yet, so nothing runs inline)
        self._row_s: float | None = None
        self._closed = False

    @property
    def queued(self) -> int:
        """Calls accepted and not yet answered."""
        return self._queued

    def close(self) -> None:
        """The model's threads are shut down (a replaced runtime): calls that still arrive fail, inline ones too."""
        self._closed = True

    def runs_inline(self, rows: int) -> bool:
        """Does a batch of ``rows`` calls run on the event loop (see the module docstring)?"""
        row_s = self._row_s
        return rows <= self.inline_rows and row_s is not None and row_s * rows <= self.inline_budget_s

    def runs_at_once(self) -> bool:
        """Would a lone call run on the event loop at once (nothing waiting or running, a batch of one inline)?"""
        return not self._closed and not self._pending and not self._running and self.runs_inline(1)

    def score_sync(self, item: ModelInput) -> Scored | None:
        """``score(item)`` answered on the event loop at once, when :meth:`runs_at_once` (else None: ask ``score``).

        The same run, checks, metrics and errors as a batch of one; no future, timer or task.
        """
        if not self.runs_at_once():
            return None
        self._running += 1
        try:
            outputs, seconds, cpu_s = self._run([item])
        except Exception as exc:
            raise (exc if isinstance(exc, ModelError) else ModelError(f"model run failed: {exc!r}")) from exc
        finally:
            self._running -= 1
        BATCH_SIZE.observe(1, self.label)
        INFERENCE_SECONDS.observe(seconds, self.label)
        self._measured(1, cpu_s)
        if not isinstance(outputs, list) or len(outputs) != 1:
            raise InvalidOutput(f"model returned {len(outputs) if isinstance(outputs, list) else type(outputs).__name__} "
                                f"results for a batch of 1")
        check_probabilities(outputs[0], self.questions)
        return Scored(outputs[0], model=self.label)

    def _measured(self, rows: int, seconds: float) -> None:
        """Track the time per row: a slower run counts at once, faster ones bring the estimate down gradually."""
        per_row = seconds / max(1, rows)
        row_s = self._row_s
        self._row_s = per_row if row_s is None or per_row > row_s else row_s + (per_row - row_s) * _SETTLE

    async def score(self, item: ModelInput) -> Scored:
        if self._queued >= self.max_queue:
            raise ModelOverloaded(f"{self._queued} requests already wait for the model")
        loop = asyncio.get_running_loop()
        fut: asyncio.Future[Scored] = loop.create_future()
        self._pending.append((item, fut))
        self._queued += 1
        QUEUE_DEPTH.set(self._queued, self.label)
        if self._running < self.threads:
            if len(self._pending) >= self.max_batch:
                self._flush()
            elif self._timer is None:
                self._timer = loop.call_later(self.max_wait_s, self._flush)
        return await fut

    def _flush(self) -> None:
        if self._timer is not None:
            self._timer.cancel()
            self._timer = None
        if self._running >= self.threads or not self._pending:
            return
        take, self._pending = self._pending[: self.max_batch], self._pending[self.max_batch:]
        live = []
        for item in take:
            if item[1].done():  # the caller's deadline passed before the batch started
                self._queued -= 1
            else:
                live.append(item)
        QUEUE_DEPTH.set(self._queued, self.label)
        if not live:
            self._flush_more()
            return
        self._running += 1
        loop = asyncio.get_running_loop()
        if self._closed:
            job = loop.create_future()
            job.set_exception(ModelError("the model's worker threads are shut down"))
        elif self.runs_inline(len(live)):
            job = loop.create_future()
            try:
                job.set_result(self._run([f for f, _ in live]))
            except Exception as exc:  # answered below as a failed batch, exactly as a thread's failure is
                job.set_exception(exc)
            self._resolve(live, job)
            return
        else:
            try:
                job = loop.run_in_executor(self.executor, self._run, [f for f, _ in live])
            except RuntimeError as exc:  # the executor was shut down (a replaced runtime): fail this batch, count it out
                job = loop.create_future()
                job.set_exception(ModelError(f"the model's worker threads are shut down ({exc})"))
        job.add_done_callback(lambda done: self._resolve(live, done))

    def _run(self, batch: list[ModelInput]) -> tuple[list[Probabilities], float, float]:
        """The model's answers, the run's wall time and the CPU time of the thread that ran it (a thread's run may wait
        for the interpreter lock while the event loop holds it: its CPU time is what the loop would be held for)."""
        start, cpu = time.perf_counter(), time.thread_time()
        out = self.model.run_inputs(batch)
        return out, time.perf_counter() - start, time.thread_time() - cpu

    def _resolve(self, batch: list[tuple[ModelInput, asyncio.Future[Scored]]], done: asyncio.Future[Any]) -> None:
        self._running -= 1
        self._queued -= len(batch)
        QUEUE_DEPTH.set(self._queued, self.label)
        exc = done.exception() if not done.cancelled() else asyncio.CancelledError()
        if exc is None:
            outputs, seconds, cpu_s = done.result()
            BATCH_SIZE.observe(len(batch), self.label)
            INFERENCE_SECONDS.observe(seconds, self.label)
            self._measured(len(batch), cpu_s)
            if not isinstance(outputs, list) or len(outputs) != len(batch):
                exc = InvalidOutput(f"model returned {len(outputs) if isinstance(outputs, list) else type(outputs).__name__} "
                                    f"results for a batch of {len(batch)}")
        for i, (_, fut) in enumerate(batch):
            if fut.done():
                continue
            if exc is not None:
                err = exc if isinstance(exc, ModelError) else ModelError(f"model run failed: {exc!r}")
                fut.set_exception(err)
                continue
            probs = outputs[i]
            try:
                check_probabilities(probs, self.questions)
            except InvalidOutput as bad:
                fut.set_exception(bad)
                continue
            fut.set_result(Scored(probs, model=self.label))
        self._flush_more()

    def _flush_more(self) -> None:
        """Start the next batch at once if calls piled up while the threads were busy."""
        if self._pending and self._running < self.threads:
            self._flush()
