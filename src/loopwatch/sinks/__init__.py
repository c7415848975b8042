"""Audit sinks: where loopwatch sends its audit records (nudges, blocks, stops, terminations).

Every sink has ``emit(record)`` and ``close()`` (:class:`Sink`). Records are plain JSON-ready dicts;
each sink works on its own redacted, bounded copy (:class:`~loopwatch.redact.Redactor`), so a sink
never sees, nor changes, another sink's record.

* :class:`JsonlAuditSink` appends one JSON line per record to a file, synchronously, and raises
  :class:`AuditWriteError` when a record cannot be written: audit records are never silently dropped.
* :class:`WebhookSink` posts records (raw JSON, Slack or Discord messages) from a background thread
  and never blocks nor raises in ``emit``: records that do not fit its bounded queue are dropped and
  counted, failed posts are counted and logged on the ``loopwatch`` logger. Each record has a delivery
  deadline (a server that trickles its answer cannot hold the thread), and a process that exits without
  closing its sinks still delivers what is queued (within ``exit_timeout``) and counts what it could not.
* :class:`CallbackSink` hands records to a function and counts (and logs) its exceptions.
* :class:`MemorySink` keeps records in a list.
"""

from ._common import AuditWriteError, Sink
from ._in_process import CallbackSink, MemorySink
from ._jsonl import JsonlAuditSink
from ._payloads import FORMATS, WebhookFormat
from ._records import ACTIONS, action_of, summarize
from ._webhook import WebhookSink

__all__ = [
    "ACTIONS",
    "FORMATS",
    "AuditWriteError",
    "CallbackSink",
    "JsonlAuditSink",
    "MemorySink",
    "Sink",
    "WebhookFormat",
    "WebhookSink",
    "action_of",
    "summarize",
]
