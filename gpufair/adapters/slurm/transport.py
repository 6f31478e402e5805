"""How gpufair talks to Slurm: the CLI with ``--json``, or slurmrestd. One small interface.

Both read the same documents (``squeue --json`` equals REST ``GET /jobs``; ``sinfo --json``
equals ``GET /nodes``). Writes are ``scontrol`` verbs with ``key=value`` arguments; the REST
transport maps the ones slurmrestd 22.05 serves (job update, hold/release as an update,
signal/cancel) and hands the rest (suspend, resume, requeue, requeuehold, which v0.0.38 has no
endpoint for) to the CLI. Every command is an argument list: job names, user names and paths
from Slurm never pass through a shell.

Slurm prints what users typed byte for byte: a job name, comment, account, working directory
or output path may hold bytes that are not UTF-8 (``sbatch --comment $'\\xff'``). Both
transports decode Slurm's answers with :func:`decode`, which never fails.
"""

from __future__ import annotations

import http.client
import json
import os
import re
import socket
import subprocess
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from http import HTTPStatus
from typing import Any, Protocol

from gpufair.adapters.slurm.job_fields import loads_jobs
from gpufair.adapters.slurm.token import TokenSource


class TransportError(RuntimeError):
    """Slurm did not answer, or answered something that is not a usable document."""


@dataclass(frozen=True)
class CommandResult:
    ok: bool
    detail: str
    unavailable: bool = False   # Slurm did not answer (timeout, cannot run, no connection)


class Transport(Protocol):
    name: str

    def read_jobs(self) -> dict[str, Any]:
        """The ``squeue --json`` document (all states, so finished jobs are accounted)."""
        ...

    def read_nodes(self) -> dict[str, Any]:
        """The ``sinfo --json`` document."""
        ...

    def control(self, verb: str, job_id: str, fields: Mapping[str, str] | None = None
                ) -> CommandResult:
        """``update`` (with fields), ``hold``, ``uhold`` (a user hold: gpufair's own, told
        apart from an administrator's ``hold``), ``release``, ``requeue``, ``requeuehold``,
        ``suspend``, ``resume``, ``cancel`` or ``signal`` (fields: signal)."""
        ...

    def control_many(self, verb: str, job_ids: Sequence[str]) -> dict[str, CommandResult]:
        """A :data:`MANY_VERBS` verb for several jobs at once; each id's own outcome."""
        ...


_VERBS = {"update", "hold", "uhold", "release", "requeue", "requeuehold", "suspend", "resume",
          "cancel", "signal", "top"}


def _check_verb(verb: str, job_id: str) -> None:
    if verb not in _VERBS:
        raise ValueError(f"unknown Slurm verb {verb!r}")
    if not job_id.isdigit() and not job_id.replace("_", "").isdigit():
        raise ValueError(f"not a Slurm job id: {job_id!r}")


def decode(data: bytes) -> str:
    """Slurm's output as text: UTF-8, each byte that is not UTF-8 as U+FFFD.

    Replacement rather than ``surrogateescape``: the text goes on into the model, the SQLite
    store, JSON logs and metrics labels, all of which must encode it as UTF-8 again, and a
    lone surrogate (what ``surrogateescape`` makes of a bad byte) fails exactly there, far
    from here and in every round. What replacement loses (the exact bytes) matters only for
    names that differ in their invalid bytes alone, which then read the same, and for paths,
    which no longer name the file: the translation never uses a path holding U+FFFD.
    """
    return data.decode("utf-8", "replace")


def _parse_document(text: str, what: str, key: str) -> dict[str, Any]:
    try:
        # strict=False: 22.05 escapes control characters (\u0001), but a raw one inside a
        # string (another version, a saved file) is a user's data, not a reason to lose
        # the whole document and skip the round
        doc = loads_jobs(text, strict=False) if key == "jobs" else json.loads(text, strict=False)
    except json.JSONDecodeError as exc:
        raise TransportError(f"{what}: not JSON ({exc.msg} at line {exc.lineno})") from exc
    except RecursionError:
        raise TransportError(f"{what}: JSON nested too deeply to read") from None
    if not isinstance(doc, dict) or not isinstance(doc.get(key), list):
        raise TransportError(f"{what}: no {key!r} list in the reply")
    errors = doc.get("errors") or []
    if errors:
        raise TransportError(f"{what}: Slurm reported {json.dumps(errors)[:300]}")
    return doc


def scontrol_argv(verb: str, job_id: str, fields: Mapping[str, str] | None = None
                  ) -> list[str]:
    """The argument list for one job verb (exposed for tests and ``--dry-run`` logs)."""
    _check_verb(verb, job_id)
    if verb == "update":
        if not fields:
            raise ValueError("update needs fields")
        for key, value in fields.items():   # one argument each: a comment may hold spaces
            if not key.isalnum() or not value.isprintable() \
                    or (" " in value and key not in ("Comment", "AdminComment")):
                raise ValueError(f"bad update field {key}={value!r}")
        return ["scontrol", "update", f"JobId={job_id}",
                *(f"{k}={v}" for k, v in fields.items())]
    if verb == "cancel":
        return ["scancel", job_id]
    if verb == "signal":
        signal = (fields or {}).get("signal", "USR1")
        if not signal.isalnum():
            raise ValueError(f"bad signal {signal!r}")
        return ["scancel", f"--signal={signal}", "--full", job_id]
    return ["scontrol", verb, job_id]


_SQUEUE = ("squeue", "--all", "--states=all", "--json")
_SINFO = ("sinfo", "--json")
#: sinfo fields that change on a quiet cluster (slurmd's pings, the nodes' load) and that
#: nothing in gpufair reads: left out of the nodes' fingerprint
VOLATILE_NODE_FIELDS = frozenset({"cpu_load", "free_memory", "last_busy"})


def _nodes_stamp(doc: Mapping[str, Any]) -> int:
    return hash(repr([{k: v for k, v in node.items() if k not in VOLATILE_NODE_FIELDS}
                      if isinstance(node, dict) else node for node in doc["nodes"]]))


#: Verbs slurmctld 22.05 carries out for several job ids in one call (``scontrol release
#: 1,2,3``), reporting each id that failed on a line of its own ("Job has already finished
#: for job 4"; checked on the loopback cluster). An ``update`` of a job's placement is not
#: among them: 22.05 refuses ``JobId=2,3 NodeList=...`` outright ("Invalid job ID 2,3").
MANY_VERBS = frozenset({"release", "hold", "uhold", "requeue", "requeuehold"})
_PER_ID_ERROR = re.compile(r"^(?P<why>.+) for job (?P<id>\d+(?:_\d+)?)$")


def scontrol_many_argv(verb: str, job_ids: Sequence[str]) -> list[str]:
    """The argument list for one verb on several jobs: one comma list (a space-separated
    list is not the same: 22.05 then acts on none of them)."""
    if verb not in MANY_VERBS:
        raise ValueError(f"Slurm verb {verb!r} is not applied to several jobs at once")
    if not job_ids:
        raise ValueError("no job ids")
    for job_id in job_ids:
        _check_verb(verb, job_id)
    return ["scontrol", verb, ",".join(job_ids)]


def per_id_outcomes(verb: str, job_ids: Sequence[str], returncode: int, text: str
                    ) -> dict[str, CommandResult] | None:
    """Each id's outcome of one ``scontrol VERB 1,2,3``, from its exit status and its lines
    "<why> for job <id>"; None when a failure names no id of the call (the whole call was
    refused, or Slurm said something else): the caller then asks per id rather than guess."""
    if returncode == 0:
        return {job_id: CommandResult(True, verb) for job_id in job_ids}
    asked = set(job_ids)
    failed: dict[str, str] = {}
    for line in text.splitlines():
        match = _PER_ID_ERROR.match(line.strip())
        if match and match["id"] in asked:
            failed[match["id"]] = match["why"][:300]
    if not failed:
        return None
    return {job_id: CommandResult(job_id not in failed, failed.get(job_id, verb))
            for job_id in job_ids}


class CliTransport:
    """``squeue``/``sinfo``/``scontrol``/``scancel`` as subprocesses with a timeout."""

    name = "cli"

    def __init__(self, *, timeout_s: float = 10.0, env: Mapping[str, str] | None = None) -> None:
        self.timeout_s = timeout_s
        self.env = dict(os.environ if env is None else env)

    def _run(self, argv: Sequence[str]) -> subprocess.CompletedProcess[str]:
        """Run one command; its output captured as bytes and decoded by :func:`decode`
        (``text=True`` would raise UnicodeDecodeError on one job's non-UTF-8 comment)."""
        proc = self._run_bytes(argv)
        return subprocess.CompletedProcess(proc.args, proc.returncode, decode(proc.stdout),
                                           decode(proc.stderr))

    def _run_bytes(self, argv: Sequence[str]) -> subprocess.CompletedProcess[bytes]:
        try:
            return subprocess.run(list(argv), capture_output=True, timeout=self.timeout_s,
                                  env=self.env, check=False)
        except subprocess.TimeoutExpired as exc:
            raise TransportError(f"{argv[0]}: no answer in {self.timeout_s:g} s") from exc
        except OSError as exc:
            raise TransportError(f"{argv[0]}: cannot run: {exc.strerror}") from exc

    def read_bytes(self, argv: Sequence[str]) -> bytes:
        """The standard output of a read-only command (``sacct``) as Slurm printed it, for
        a reader that decodes field by field; TransportError when it does not answer, cannot
        run or exits non-zero (stderr says why)."""
        proc = self._run_bytes(argv)
        if proc.returncode != 0:
            raise TransportError(f"{' '.join(argv)[:200]}: exit {proc.returncode}: "
                                 f"{decode(proc.stderr).strip()[:300]}")
        return proc.stdout

    def read_text(self, argv: Sequence[str]) -> str:
        """:meth:`read_bytes` decoded by :func:`decode`."""
        return decode(self.read_bytes(argv))

    def _read(self, argv: Sequence[str], key: str) -> dict[str, Any]:
        return _parse_document(self.read_text(argv), " ".join(argv), key)

    def read_jobs(self) -> dict[str, Any]:
        data = self.read_bytes(_SQUEUE)
        doc = _parse_document(decode(data), " ".join(_SQUEUE), "jobs")
        self._jobs_stamp = hash(data)
        return doc

    def read_nodes(self) -> dict[str, Any]:
        doc = self._read(_SINFO, "nodes")
        self._nodes_stamp = _nodes_stamp(doc)
        return doc

    def stamps(self) -> tuple[int | None, int | None]:
        """The fingerprints of the last squeue and sinfo read (see :meth:`current_stamps`)."""
        return getattr(self, "_jobs_stamp", None), getattr(self, "_nodes_stamp", None)

    def current_stamps(self) -> tuple[int, int]:
        """Fingerprints of what squeue and sinfo print now, for the daemon's poll (issue 30):
        squeue's bytes as they are (a quiet cluster prints the same bytes again: nothing is
        decoded or translated), sinfo's records without the figures slurmd's pings move on
        a quiet cluster and nothing in gpufair reads (:data:`VOLATILE_NODE_FIELDS`)."""
        jobs = hash(self.read_bytes(_SQUEUE))
        return jobs, _nodes_stamp(self._read(_SINFO, "nodes"))

    def control(self, verb: str, job_id: str, fields: Mapping[str, str] | None = None
                ) -> CommandResult:
        argv = scontrol_argv(verb, job_id, fields)
        try:
            proc = self._run(argv)
        except TransportError as exc:
            return CommandResult(False, str(exc), unavailable=True)
        text = (proc.stderr or proc.stdout).strip()
        return CommandResult(proc.returncode == 0, text[:300] or " ".join(argv[1:3]))

    def control_many(self, verb: str, job_ids: Sequence[str]) -> dict[str, CommandResult]:
        """One ``scontrol VERB 1,2,3`` (a :data:`MANY_VERBS` verb) for all ``job_ids``: one
        process and one RPC per job inside slurmctld instead of a process each. One failing
        id does not lose the others: each id's outcome is read from Slurm's per-id lines;
        when the output names none, each id is asked again on its own."""
        argv = scontrol_many_argv(verb, job_ids)
        try:
            proc = self._run(argv)
        except TransportError as exc:
            return {job_id: CommandResult(False, str(exc), unavailable=True)
                    for job_id in job_ids}
        outcomes = per_id_outcomes(verb, job_ids, proc.returncode,
                                   f"{proc.stderr}\n{proc.stdout}")
        if outcomes is None:
            return {job_id: self.control(verb, job_id) for job_id in job_ids}
        return outcomes


class NotSaved(TransportError):
    """A dry run of saved files has no output of this command."""


class FileTransport:
    """Saved ``squeue --json`` and ``sinfo --json`` files, read as if Slurm answered them: a
    dry run of raw files goes through the same snapshot logic as the daemon. Writes are
    refused (a dry run records them before they get here)."""

    name = "files"

    def __init__(self, squeue: Mapping[str, Any], sinfo: Mapping[str, Any],
                 texts: Mapping[tuple[str, ...], str] | None = None) -> None:
        self.jobs = dict(squeue)
        self.nodes = dict(sinfo)
        #: saved output of the scontrol reads beside them (the limits), by argv
        self.texts = dict(texts or {})

    def read_text(self, argv: Sequence[str]) -> str:
        """A saved command's output; one not saved is :class:`NotSaved` (read as before
        any such read existed: not at all)."""
        text = self.texts.get(tuple(argv))
        if text is None:
            raise NotSaved(f"{' '.join(argv)}: not among the saved files")
        return text

    def read_jobs(self) -> dict[str, Any]:
        return self.jobs

    def read_nodes(self) -> dict[str, Any]:
        return self.nodes

    def control(self, verb: str, job_id: str, fields: Mapping[str, str] | None = None
                ) -> CommandResult:
        return CommandResult(False, "saved files cannot be changed")

    def control_many(self, verb: str, job_ids: Sequence[str]) -> dict[str, CommandResult]:
        return {job_id: self.control(verb, job_id) for job_id in job_ids}


class RestTransport:
    """slurmrestd v0.0.38: a unix socket with local auth, or TCP with a JWT.

    ``url`` is ``unix:/path/to/slurmrestd.sock`` or ``http://host:port``. With TCP, ``user``
    and the JWT go into the X-SLURM-USER-* headers; the JWT comes from a fixed ``token`` or,
    better, a :class:`~gpufair.adapters.slurm.token.TokenSource`, which renews it before it
    expires. A 401 asks the source for a new token and the request is tried once more.
    """

    name = "rest"
    API = "/slurm/v0.0.38"

    def __init__(self, url: str, *, user: str | None = None, token: str | None = None,
                 timeout_s: float = 10.0, cli: CliTransport | None = None,
                 tokens: TokenSource | None = None) -> None:
        self.url = url
        self.user = user
        self.token = token
        self.tokens = tokens
        self.timeout_s = timeout_s
        self.cli = cli or CliTransport(timeout_s=timeout_s)

    def _connection(self) -> http.client.HTTPConnection:
        if self.url.startswith("unix:"):
            return _UnixConnection(self.url[5:], self.timeout_s)
        rest = self.url.removeprefix("http://")
        host, _, port = rest.partition(":")
        return http.client.HTTPConnection(host, int(port or 6820), timeout=self.timeout_s)

    def request(self, method: str, path: str, body: Any = None) -> tuple[int, dict[str, Any]]:
        if self.tokens is not None:
            self.token = self.tokens.current()
        status, doc = self._request(method, path, body)
        # 22.05 answers an expired or bad JWT with 401, or with a 500 from slurmctld's side
        # ("slurm_load_jobs": authentication failed there): both get one fresh token
        if self.tokens is not None and (status == 401 or (
                status >= 500 and self.tokens.expired(margin_s=1.0)) or (
                status >= 500 and self.tokens.expires is None)):
            self.token = self.tokens.rejected()
            status, doc = self._request(method, path, body)
        return status, doc

    def _request(self, method: str, path: str, body: Any) -> tuple[int, dict[str, Any]]:
        headers = {"Accept": "application/json"}
        if self.token:
            headers["X-SLURM-USER-NAME"] = self.user or "root"
            headers["X-SLURM-USER-TOKEN"] = self.token
        data = None
        if body is not None:
            data = json.dumps(body).encode()
            headers["Content-Type"] = "application/json"
        conn = self._connection()
        try:
            conn.request(method, self.API + path, body=data, headers=headers)
            resp = conn.getresponse()
            text = decode(resp.read())   # slurmrestd passes job fields' bytes through too
        except (OSError, http.client.HTTPException) as exc:
            raise TransportError(f"slurmrestd {self.url}{path}: {exc}") from exc
        finally:
            conn.close()
        try:
            doc = json.loads(text, strict=False) if text.strip() else {}
        except json.JSONDecodeError as exc:
            raise TransportError(f"slurmrestd {path}: HTTP {resp.status}, not JSON: "
                                 f"{text[:200]!r}") from exc
        except RecursionError:
            raise TransportError(f"slurmrestd {path}: JSON nested too deeply to read"
                                 ) from None
        return resp.status, doc if isinstance(doc, dict) else {}

    def _read(self, path: str, key: str) -> dict[str, Any]:
        status, doc = self.request("GET", path)
        if status != 200:
            raise TransportError(f"slurmrestd {path}: HTTP {status}: "
                                 f"{json.dumps(doc.get('errors'))[:300]}")
        return _parse_document(json.dumps(doc), f"slurmrestd {path}", key)

    def read_jobs(self) -> dict[str, Any]:
        return self._read("/jobs", "jobs")

    def read_nodes(self) -> dict[str, Any]:
        return self._read("/nodes", "nodes")

    def changed_since(self, since: float) -> bool:
        """Whether slurmctld's jobs or nodes changed at or after ``since`` (epoch seconds, its
        clock). Asked with ``update_time``: slurmctld compares it with the time of its last
        change of any job (node) and, when there was none, slurmrestd answers 304 Not
        Modified without a body, so a quiet cluster costs two small replies, not documents
        of every job. Any other answer counts as a change (the caller then reads in full)."""
        stamp = int(since)
        for path in (f"/jobs?update_time={stamp}", f"/nodes?update_time={stamp}"):
            status, _ = self.request("GET", path)
            if status != HTTPStatus.NOT_MODIFIED:
                return True
        return False

    def control(self, verb: str, job_id: str, fields: Mapping[str, str] | None = None
                ) -> CommandResult:
        _check_verb(verb, job_id)
        body: dict[str, Any] | None = None
        if "_" in job_id:
            # an array task A_T: for a task still in its array record, 22.05's v0.0.38
            # answers "job array update ... failed" (having split the task out all the
            # same); scontrol splits it out and acts on it
            return self.cli.control(verb, job_id, fields)
        if verb in ("hold", "release"):
            body = {"hold": verb == "hold"}
        elif verb == "update" and fields and set(fields) <= set(_REST_FIELDS):
            body = {_REST_FIELDS[k]: _rest_value(k, v) for k, v in fields.items()}
        elif verb == "cancel":
            return self._delete(job_id, "SIGKILL")
        if body is None:  # no v0.0.38 endpoint for it: the CLI does it
            return self.cli.control(verb, job_id, fields)
        try:
            status, doc = self.request("POST", f"/job/{job_id}", body)
        except TransportError as exc:
            return CommandResult(False, str(exc), unavailable=True)
        errors = doc.get("errors") or []
        return CommandResult(status == 200 and not errors,
                             json.dumps(errors)[:300] if errors else f"HTTP {status}")

    def control_many(self, verb: str, job_ids: Sequence[str]) -> dict[str, CommandResult]:
        """Through the CLI: v0.0.38 has no request for several jobs (one POST per job)."""
        return self.cli.control_many(verb, job_ids)

    def _delete(self, job_id: str, signal: str) -> CommandResult:
        try:
            status, doc = self.request("DELETE", f"/job/{job_id}?signal={signal}")
        except TransportError as exc:
            return CommandResult(False, str(exc), unavailable=True)
        errors = doc.get("errors") or []
        return CommandResult(status == 200 and not errors,
                             json.dumps(errors)[:300] if errors else f"HTTP {status}")


_REST_FIELDS = {"Priority": "priority", "Nice": "nice", "TimeLimit": "time_limit",
                "Comment": "comment"}


def _rest_value(key: str, value: str) -> Any:
    return int(value) if key in ("Priority", "Nice", "TimeLimit") else value


class _UnixConnection(http.client.HTTPConnection):
    def __init__(self, path: str, timeout: float) -> None:
        super().__init__("localhost", timeout=timeout)
        self.unix_path = path

    def connect(self) -> None:
        sock = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
        sock.settimeout(self.timeout)
        sock.connect(self.unix_path)
        self.sock = sock
