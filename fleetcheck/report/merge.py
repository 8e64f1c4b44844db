"""`fleetcheck merge`: node documents gathered elsewhere (srun, a DaemonSet, timers) as one audit.

Owns where documents are read from (files, folders, tarballs, stdin), how a merged node is
named (`--id`), and what is never merged silently: a node given twice (the newest document is
kept, the others are reported), a document older than the merge allows (the node stays in the
report as unverified, its old facts left out of every comparison), and a document that cannot
be read (reported; the merge goes on with the rest and exits 3 at least). Every node is judged
under the merge's playbook and the merged report gets its fleet consistency checks, exactly as
`fleetcheck audit` with that playbook would.
"""

from __future__ import annotations

import dataclasses
import gzip
import io
import json
import os
import re
import string
import sys
import tarfile
import zlib
from collections.abc import Iterable, Iterator, Sequence
from dataclasses import dataclass
from datetime import datetime, timezone
from pathlib import Path

from fleetcheck.errors import FleetcheckError
from fleetcheck.judgement.consistency import fleet_checks
from fleetcheck.judgement.exit_codes import EXIT_PASS, EXIT_UNVERIFIED, exit_code_for
from fleetcheck.judgement.policy import Policy
from fleetcheck.report.content import Check, NodeResult, Report, TritonVerdict
from fleetcheck.report.nodedoc import (
    ORIGIN_FIELDS,
    NodeDocument,
    NodeDocumentError,
    documents_from_json,
)
from fleetcheck.timestamps import REPORT_FORMAT

#: File names read from a folder or a tarball; anything else there is not ours.
DOCUMENT_SUFFIXES = (".json", ".json.gz", ".jsonl", ".ndjson")
#: `--id auto`: the Slurm node name, else the Kubernetes node's, else the document's own id.
AUTO_ID = "auto"
#: Fields `--id` may name besides the origin's: the document's id and its file's stem.
ID_FIELDS = ("id", "file", *ORIGIN_FIELDS)
#: The largest document file read (a node document is ~10 KB; an audit of 10,000 ~400 MB).
MAX_FILE_BYTES = 1 << 30

STALE_CHECK = "node_document_stale"
DUPLICATE_CHECK = "fleet_duplicate_documents"
UNREAD_CHECK = "fleet_documents_unread"


class MergeError(FleetcheckError):
    """What the user asked for cannot be merged at all (a bad --id, no input); exit 2."""


@dataclass(frozen=True)
class MergeProblem:
    """One thing the merge did not take as it came: `kind` is unread, duplicate or stale."""

    kind: str
    source: str
    message: str
    #: The merged node it is about ("" for an input no node could be read from).
    node: str = ""


@dataclass(frozen=True)
class MergeOutcome:
    """The merged report, what was not merged as given, and the exit code for it."""

    report: Report
    problems: tuple[MergeProblem, ...]
    notes: tuple[str, ...]

    @property
    def exit_code(self) -> int:
        code = exit_code_for(self.report)
        if code == EXIT_PASS and any(p.kind == "unread" for p in self.problems):
            return EXIT_UNVERIFIED
        return code


# --- reading -----------------------------------------------------------------------------------


def _decode_stream(raw: bytes, source: str) -> Iterator[tuple[str, object]]:
    """Every JSON value in `raw`: one document, JSON lines, or documents one after another
    (what `cat *.json` or an srun's joined stdout give)."""
    if raw[:2] == b"\x1f\x8b":
        try:
            raw = gzip.decompress(raw)
        except (OSError, EOFError, zlib.error) as exc:
            raise NodeDocumentError(f"{source}: cannot decompress: {exc}") from None
    try:
        text = raw.decode("utf-8")
    except UnicodeDecodeError as exc:
        raise NodeDocumentError(f"{source}: not UTF-8 text: {exc}") from None
    decoder = json.JSONDecoder()
    position, count = 0, 0
    values: list[tuple[str, object]] = []
    while True:
        while position < len(text) and text[position] in " \t\r\n":
            position += 1
        if position >= len(text):
            break
        try:
            value, position = decoder.raw_decode(text, position)
        except json.JSONDecodeError as exc:
            line = text.count("\n", 0, exc.pos) + 1
            raise NodeDocumentError(f"{source}:{line}: not valid JSON: {exc.msg}") from None
        count += 1
        values.append((source, value))
    if not values:
        raise NodeDocumentError(f"{source}: empty: no document")
    if count > 1:
        values = [(f"{src}#{index}", value) for index, (src, value) in enumerate(values, 1)]
    yield from values


def _is_document_name(name: str) -> bool:
    return name.lower().endswith(DOCUMENT_SUFFIXES)


def _read_file(path: Path) -> bytes:
    with open(path, "rb") as handle:
        raw = handle.read(MAX_FILE_BYTES + 1)
    if len(raw) > MAX_FILE_BYTES:
        raise NodeDocumentError(f"{path}: larger than {MAX_FILE_BYTES >> 20} MiB")
    return raw


def _from_tar(path: Path) -> Iterator[tuple[str, bytes, float]]:
    try:
        with tarfile.open(path) as archive:
            for member in archive:
                if not member.isfile() or not _is_document_name(member.name):
                    continue
                if member.size > MAX_FILE_BYTES:
                    raise NodeDocumentError(f"{path}:{member.name}: larger than "
                                            f"{MAX_FILE_BYTES >> 20} MiB")
                handle = archive.extractfile(member)
                if handle is not None:
                    yield f"{path}:{member.name}", handle.read(), float(member.mtime)
    except (tarfile.TarError, OSError, EOFError, zlib.error) as exc:
        raise NodeDocumentError(f"{path}: cannot read the archive: {exc}") from None


def _raw_inputs(inputs: Sequence[str], stdin: io.BufferedIOBase | None
                ) -> Iterator[tuple[str, bytes | NodeDocumentError, float | None]]:
    """(source, bytes or the error reading them, mtime) for every document file named."""
    for name in inputs:
        if name == "-":
            stream = stdin if stdin is not None else sys.stdin.buffer
            yield "<stdin>", stream.read(), None
            continue
        path = Path(name)
        if path.is_dir():
            found = sorted(p for p in path.rglob("*") if p.is_file()
                           and _is_document_name(p.name) and not p.name.startswith("."))
            if not found:
                yield str(path), NodeDocumentError(
                    f"{path}: no node documents in it (*{', *'.join(DOCUMENT_SUFFIXES)})"), None
            for file in found:
                yield from _one_path(file)
            continue
        yield from _one_path(path)


def _one_path(path: Path) -> Iterator[tuple[str, bytes | NodeDocumentError, float | None]]:
    try:
        if tarfile.is_tarfile(path):
            members = list(_from_tar(path))
            if not members:
                yield str(path), NodeDocumentError(f"{path}: no node documents in the "
                                                   "archive"), None
            yield from members
            return
        yield str(path), _read_file(path), path.stat().st_mtime
    except FileNotFoundError:
        yield str(path), NodeDocumentError(f"{path}: no such file or folder"), None
    except NodeDocumentError as exc:
        yield str(path), exc, None
    except OSError as exc:
        yield str(path), NodeDocumentError(f"{path}: cannot read: {exc.strerror or exc}"), None


def read_documents(inputs: Sequence[str], stdin: io.BufferedIOBase | None = None
                   ) -> tuple[list[NodeDocument], list[MergeProblem]]:
    """Every node document the inputs hold, and one problem per input that could not be read.

    A file, a folder (every *.json, *.json.gz, *.jsonl, *.ndjson under it), a tarball (the same
    names inside it) or `-` (stdin). An undated document from a file is dated by the file's
    (or the tar member's) modification time.
    """
    documents: list[NodeDocument] = []
    problems: list[MergeProblem] = []
    for source, raw, mtime in _raw_inputs(inputs, stdin):
        if isinstance(raw, NodeDocumentError):
            problems.append(MergeProblem("unread", source, str(raw)))
            continue
        try:
            values = list(_decode_stream(raw, source))
        except NodeDocumentError as exc:
            problems.append(MergeProblem("unread", source, str(exc)))
            continue
        for where, value in values:
            try:
                found = documents_from_json(value, where)
            except NodeDocumentError as exc:
                problems.append(MergeProblem("unread", where, str(exc)))
                continue
            for document in found:
                if document.probed_at is None and mtime is not None:
                    document = dataclasses.replace(
                        document, probed_at=datetime.fromtimestamp(mtime, timezone.utc),
                        dated_by="file time")
                documents.append(document)
    return documents, problems


# --- naming ------------------------------------------------------------------------------------


def check_id_template(template: str) -> None:
    """Refuse an --id template with a field it cannot fill, before anything is read."""
    if template == AUTO_ID:
        return
    try:
        parsed = list(string.Formatter().parse(template))
    except ValueError as exc:
        raise MergeError(f"--id {template!r}: {exc}") from None
    names = [name for _, name, _, _ in parsed if name is not None]
    if not names:
        raise MergeError(f"--id {template!r}: names no field; use {{id}}, {{hostname}}, "
                         "{slurm_node}, {k8s_node}, {pod}, ... or 'auto'")
    for _, name, spec, conversion in parsed:
        if name is None:
            continue
        if name not in ID_FIELDS or spec or conversion:
            raise MergeError(f"--id {template!r}: unknown field {{{name}}}; fields: "
                             + ", ".join(f"{{{field}}}" for field in ID_FIELDS))


def _file_stem(source: str) -> str:
    """The name of the file a document came from, without its suffix ("" from stdin)."""
    if source.startswith("<stdin>"):
        return ""
    stem = source.rsplit("/", 1)[-1].split(":")[-1].split("#")[0]
    for suffix in DOCUMENT_SUFFIXES:
        if stem.lower().endswith(suffix):
            return stem[: -len(suffix)]
    return stem


def document_id(document: NodeDocument, template: str) -> str:
    """The merged node's id: the template filled from the document, or `auto`'s choice.

    `auto` is the Slurm node name, else the Kubernetes node's, else the document's own id
    (for the probe script's document: the host name it found), else its file's name.
    """
    origin = document.origin
    stem = _file_stem(document.source)
    if template == AUTO_ID:
        found = (origin.get("slurm_node") or origin.get("k8s_node") or document.node.id
                 or stem)
        if not found:
            raise NodeDocumentError(f"{document.source}: names no node (no host name in its "
                                    "facts, no file name): name it with --id")
        return found
    fields: dict[str, str] = {"id": document.node.id, "file": stem, **origin}
    missing = [name for _, name, _, _ in string.Formatter().parse(template)
               if name is not None and not fields.get(name)]
    if missing:
        raise NodeDocumentError(f"{document.source}: --id {template!r}: the document has no "
                                f"{missing[0]} (its origin: "
                                + (", ".join(f"{k}={v}" for k, v in origin.items()) or "none")
                                + ")")
    return template.format(**fields)


def _renamed(node: NodeResult, node_id: str) -> NodeResult:
    if node_id == node.id:
        return node
    # A merged node stands for itself: a host-level node of the merged fleet.
    host = node.host if node.host != node.id else node_id
    name = node.name if node.name != node.id else node_id
    return dataclasses.replace(node, id=node_id, host=host, name=name)


# --- merging -----------------------------------------------------------------------------------


def _natural(node_id: str) -> list[tuple[int, int | str]]:
    """gpu2 before gpu10: documents arrive in any order, a report reads in the nodes' own."""
    return [(0, int(part)) if part.isdigit() else (1, part)
            for part in re.split(r"(\d+)", node_id) if part]


def _stale_node(node: NodeResult, age_s: float, max_age_s: float, probed: datetime) -> NodeResult:
    when = stamp(probed)
    reason = (f"stale node document: probed {when}, {_age(age_s)} before the merge "
              f"(--max-age {_age(max_age_s)})")
    check = Check(STALE_CHECK, "error", reason,
                  "probe the node again (its timer, prolog or DaemonSet may have stopped), or "
                  "raise --max-age", {"probed_at": when, "age_s": round(age_s)})
    # The old facts say nothing about the node now: they are kept out of fleet comparisons.
    return dataclasses.replace(node, status="error", reason=reason,
                               triton=TritonVerdict(verdict="unknown"), checks=(check,),
                               facts={})


def _age(seconds: float) -> str:
    seconds = max(0.0, seconds)
    for unit, size in (("d", 86400), ("h", 3600), ("min", 60)):
        if seconds >= size:
            return f"{seconds / size:.1f} {unit}".replace(".0 ", " ")
    return f"{seconds:.0f} s"


def _problem_check(check_id: str, status: str, problems: Sequence[MergeProblem],
                   what: str, fix: str) -> Check:
    shown = "; ".join(p.message for p in problems[:3])
    more = f"; and {len(problems) - 3} more" if len(problems) > 3 else ""
    return Check(check_id, status, f"{len(problems)} {what}: {shown}{more}", fix,
                 {"sources": [p.source for p in problems]})


def merge_documents(documents: Iterable[NodeDocument], *, policy: Policy,
                    id_template: str = AUTO_ID, max_age_s: float | None = None,
                    now: datetime | None = None, problems: Sequence[MergeProblem] = (),
                    label: str = "") -> MergeOutcome:
    """One audit report from node documents, with the policy's fleet checks.

    Nothing is dropped without a word: a node given twice keeps its newest document and the
    others become `duplicate` problems (and a warning fleet check); a document older than
    `max_age_s` keeps its node in the report as `error` (stale), without its facts; problems
    already met while reading become an error fleet check and make the exit code at least 3.
    """
    check_id_template(id_template)
    moment = now or datetime.now(timezone.utc)
    found: list[MergeProblem] = list(problems)
    notes: list[str] = []
    chosen: dict[str, tuple[NodeDocument, NodeResult]] = {}
    order: list[str] = []
    for document in documents:
        try:
            node_id = document_id(document, id_template)
        except NodeDocumentError as exc:
            found.append(MergeProblem("unread", document.source, str(exc)))
            continue
        if document.note:
            notes.append(f"{document.source}: {document.note}")
        node = _renamed(document.judged(policy), node_id)
        if node_id not in chosen:
            order.append(node_id)
            chosen[node_id] = (document, node)
            continue
        kept, _ = chosen[node_id]
        newer = (document.probed_at or datetime.min.replace(tzinfo=timezone.utc)) >= (
            kept.probed_at or datetime.min.replace(tzinfo=timezone.utc))
        winner, loser = (document, kept) if newer else (kept, document)
        found.append(MergeProblem(
            "duplicate", loser.source,
            f"{node_id}: given twice; {winner.source} kept ({_dated(winner)}), "
            f"{loser.source} left out ({_dated(loser)})", node_id))
        if newer:
            chosen[node_id] = (document, node)
    nodes = []
    for node_id in sorted(order, key=_natural):
        document, node = chosen[node_id]
        if max_age_s is not None and document.probed_at is None:
            notes.append(f"{document.source}: {node_id}: undated (no probed_at, and no file "
                         "time): its age is not checked")
        elif max_age_s is not None and document.probed_at is not None:
            age = (moment - document.probed_at).total_seconds()
            if age > max_age_s:
                node = _stale_node(node, age, max_age_s, document.probed_at)
                found.append(MergeProblem("stale", document.source,
                                          f"{node_id}: {node.reason}", node_id))
        nodes.append(node)
    dates = sorted(d.probed_at for d, _ in chosen.values() if d.probed_at is not None)
    started = stamp(dates[0]) if dates else stamp(moment)
    finished = stamp(dates[-1]) if dates else stamp(moment)
    merged = Report(started_at=started, finished_at=finished, nodes=tuple(nodes),
                    inventory=label or f"<merged: {len(nodes)} node documents>",
                    playbook=policy.name)
    checks = list(fleet_checks(merged.nodes, policy))
    duplicates = [p for p in found if p.kind == "duplicate"]
    unread = [p for p in found if p.kind == "unread"]
    if duplicates:
        checks.append(_problem_check(
            DUPLICATE_CHECK, "warn", duplicates, "node document(s) left out as duplicates",
            "gather one document per node (srun --output=DIR/%N.json), or name nodes with "
            "--id"))
    if unread:
        checks.append(_problem_check(
            UNREAD_CHECK, "error", unread, "input(s) not merged",
            "fix or remove the inputs named; their nodes are missing from this report"))
    report = dataclasses.replace(merged, fleet_checks=tuple(checks))
    return MergeOutcome(report=report, problems=tuple(found), notes=tuple(notes))


def stamp(moment: datetime) -> str:
    """A datetime as reports write time."""
    return moment.astimezone(timezone.utc).strftime(REPORT_FORMAT)


def _dated(document: NodeDocument) -> str:
    if document.probed_at is None:
        return "undated"
    return f"{document.dated_by} {stamp(document.probed_at)}"


def merge_inputs(inputs: Sequence[str], *, policy: Policy, id_template: str = AUTO_ID,
                 max_age_s: float | None = None, now: datetime | None = None,
                 stdin: io.BufferedIOBase | None = None) -> MergeOutcome:
    """Read every input and merge: the whole of `fleetcheck merge` but its rendering."""
    if not inputs:
        raise MergeError("no input: name files, folders, tarballs or - (stdin)")
    check_id_template(id_template)
    documents, problems = read_documents(inputs, stdin)
    label = "<merged: " + ", ".join(os.fspath(name) for name in inputs[:3]) + (
        f" and {len(inputs) - 3} more" if len(inputs) > 3 else "") + ">"
    return merge_documents(documents, policy=policy, id_template=id_template,
                           max_age_s=max_age_s, now=now, problems=problems, label=label)


def problem_lines(outcome: MergeOutcome, nodes: Iterable[str] | None = None,
                  command: str = "merge") -> list[str]:
    """stderr's lines (less the `fleetcheck: ` every line of the CLI begins with): every
    problem, then the notes, one line each, in the words of the `command` that read the
    documents (`merge`, `gate`); with `nodes`, only the problems about those nodes, or about
    inputs no node could be read from."""
    wanted = None if nodes is None else set(nodes)
    lines = [f"{command}: {p.kind}: {p.message}" for p in outcome.problems
             if wanted is None or not p.node or p.node in wanted]
    lines += [f"{command}: note: {note}" for note in outcome.notes]
    return lines

