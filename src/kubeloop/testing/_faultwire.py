"""Reading and rewriting what passes through the fault proxy: where watch events end,
which events a :class:`~kubeloop.testing.faults.DropEvents` rule hides (and a narrowed
:class:`~kubeloop.testing.faults.CutWatch` counts), and how a read is
turned into a stale one. Pure functions of bytes and URLs, kept apart from the server."""

from __future__ import annotations

from dataclasses import dataclass

import msgspec
from yarl import URL

from kubeloop.testing._faultlog import LogEntry
from kubeloop.testing._faultrules import DropEvents, Respond, status_body
from kubeloop.testing._requestinfo import RequestInfo

_decoder = msgspec.json.Decoder()


def event_matches(event: bytes, types: tuple[str, ...], name: str | None) -> bool:
    """Whether one JSON watch event is of ``types`` (empty: any but BOOKMARK) and about
    the object ``name`` (None: any); an event that cannot be read matches nothing."""
    try:
        decoded = _decoder.decode(event)
    except msgspec.DecodeError:
        return False
    kind = decoded.get("type") if isinstance(decoded, dict) else None
    if kind == "BOOKMARK" or (types and kind not in types):
        return False
    meta = (decoded.get("object") or {}).get("metadata") or {}
    return name is None or meta.get("name") == name


@dataclass(eq=False)
class Hider:
    """Applies one :class:`DropEvents` to one watch stream (JSON only: the events are read)."""

    rule: DropEvents
    hidden: int = 0

    def hides(self, event: bytes, entry: LogEntry) -> bool:
        if self.rule.count is not None and self.hidden >= self.rule.count:
            return False
        if not event_matches(event, self.rule.types, self.rule.name):
            return False
        self.hidden += 1
        entry.extra["hidden"] = str(self.hidden)
        return True


class EventSplitter:
    """Finds where each watch event ends in a stream of chunks: newline-delimited JSON,
    or the 4-byte big-endian length-prefixed frames of a protobuf watch (what Go clients
    ask for on built-in kinds)."""

    def __init__(self, content_type: str) -> None:
        self._protobuf = "protobuf" in content_type
        self._header = b""
        self._left = 0

    def ends(self, chunk: bytes) -> list[int]:
        """Offsets just past each event that completes within ``chunk``."""
        if not self._protobuf:
            out, pos = [], chunk.find(b"\n")
            while pos >= 0:
                out.append(pos + 1)
                pos = chunk.find(b"\n", pos + 1)
            return out
        out, i = [], 0
        while i < len(chunk):
            if self._left == 0:
                take = min(4 - len(self._header), len(chunk) - i)
                self._header += chunk[i : i + take]
                i += take
                if len(self._header) < 4:
                    break
                self._left = int.from_bytes(self._header, "big")
                self._header = b""
                if self._left == 0:
                    out.append(i)
                    continue
            take = min(self._left, len(chunk) - i)
            self._left -= take
            i += take
            if self._left == 0:
                out.append(i)
        return out


def created_name(body: bytes) -> str | None:
    try:
        obj = _decoder.decode(body)
    except msgspec.DecodeError:
        return None  # protobuf or YAML: the answer will name it
    meta = obj.get("metadata") if isinstance(obj, dict) else None
    name = meta.get("name") if isinstance(meta, dict) else None
    return name if isinstance(name, str) and name else None


def stale_url(rel: URL, info: RequestInfo, revision: int) -> URL:
    """The request rewritten to read as of ``revision``."""
    query = dict(rel.query)
    if info.verb == "list" and "continue" in query:
        return rel  # a continue token carries the snapshot of the (stale) first page
    path = rel.raw_path
    if info.verb == "get":  # GET has no exact-revision form; LIST with a name selector has
        path = path.rsplit("/", 1)[0]
        query = {"fieldSelector": f"metadata.name={info.name}"}
    query.pop("sendInitialEvents", None)
    query["resourceVersion"] = str(revision)
    if info.verb == "watch":
        query.pop("resourceVersionMatch", None)
    else:
        query["resourceVersionMatch"] = "Exact"
    return URL.build(path=path, query=query, encoded=False)


def one_from_list(data: bytes, info: RequestInfo) -> tuple[bytes, int]:
    """A stale GET's answer (body, status) from the one-item LIST it was turned into."""
    try:
        page = _decoder.decode(data)
    except msgspec.DecodeError:
        return data, 200
    items = page.get("items") or []
    if not items:
        message = f'{info.resource} "{info.name}" not found'
        missing = Respond(404, reason="NotFound", message=message)
        return status_body(missing), 404
    obj = items[0]
    obj.setdefault("apiVersion", page.get("apiVersion"))
    obj.setdefault("kind", str(page.get("kind", "")).removesuffix("List"))
    return msgspec.json.encode(obj), 200
