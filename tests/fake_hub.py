"""A Hugging Face hub on this machine, for tests of the loading code users run with internet access: an HTTP server
(``HF_ENDPOINT=hub.url``) that answers huggingface_hub's calls for the repositories it is given, as the hub does
(file downloads under ``resolve``, repository information, file listings, a moved repository's redirect, the
headers and error codes huggingface_hub reads). Only what the suite's loading paths ask for is answered; every
request is recorded (``hub.requests``) so a test can say what was asked.

    hub = FakeHub()
    hub.add("dataset", "nyu-mll/glue", {"README.md": b"...", "sst2/validation-00000-of-00001.parquet": b"..."})
    hub.move("dataset", "glue", "nyu-mll/glue")   # the bare name the hub redirects
    with hub.serving() as url: ...
"""
from __future__ import annotations

import hashlib
import json
import threading
from contextlib import contextmanager
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from urllib.parse import parse_qs, quote, unquote, urlsplit

PREFIX = {"model": "", "dataset": "datasets/"}


def _sha(text: str) -> str:
    return hashlib.sha1(text.encode()).hexdigest()


class FakeHub:
    def __init__(self):
        self.repos: dict[tuple[str, str], dict[str, dict[str, bytes]]] = {}  # (kind, id) -> revision -> files
        self.moved: dict[tuple[str, str], str] = {}
        self.gated: set[tuple[str, str]] = set()  # repositories a user without a token is refused (401, GatedRepo)
        self.requests: list[str] = []
        self.url = ""

    def add(self, kind: str, repo_id: str, files: dict[str, bytes], revision: str = "main") -> None:
        self.repos.setdefault((kind, repo_id), {})[revision] = dict(files)

    def move(self, kind: str, old: str, new: str) -> None:
        self.moved[(kind, old)] = new

    def gate(self, kind: str, repo_id: str) -> None:
        self.gated.add((kind, repo_id))

    def commit(self, kind: str, repo_id: str, revision: str) -> str:
        return _sha(f"{kind}/{repo_id}@{revision}")

    def _revision(self, kind: str, repo_id: str, revision: str) -> str | None:
        """The revision named by ``revision``: a branch or ref as added, or the commit hash it answers with."""
        revisions = self.repos[(kind, repo_id)]
        if revision in revisions:
            return revision
        return next((r for r in revisions if self.commit(kind, repo_id, r) == revision), None)

    # ------------------------------------------------------------------------------------------------ the server
    @contextmanager
    def serving(self):
        hub = self

        class Handler(BaseHTTPRequestHandler):
            def log_message(self, *args):  # quiet
                pass

            def do_HEAD(self):
                hub._answer(self, head=True)

            def do_GET(self):
                hub._answer(self, head=False)

            def do_POST(self):
                hub._answer(self, head=False, post=True)

        server = ThreadingHTTPServer(("127.0.0.1", 0), Handler)
        self.url = f"http://127.0.0.1:{server.server_address[1]}"
        thread = threading.Thread(target=server.serve_forever, daemon=True)
        thread.start()
        try:
            yield self.url
        finally:
            server.shutdown()
            server.server_close()

    def _send(self, h, status: int, body: bytes = b"", headers: dict | None = None, head: bool = False) -> None:
        h.send_response(status)
        headers = dict(headers or {})
        headers.setdefault("Content-Length", str(len(body)))
        for k, v in headers.items():
            h.send_header(k, v)
        h.end_headers()
        if not head and body:
            h.wfile.write(body)

    def _json(self, h, obj, head=False):
        self._send(h, 200, json.dumps(obj).encode(), {"Content-Type": "application/json"}, head)

    def _missing(self, h, code: str, head=False, commit: str | None = None):
        """A 404 with the hub's error code; a file missing at a revision that exists also names that revision's
        commit (X-Repo-Commit), as the hub does: huggingface_hub then records in its cache that the file is absent."""
        extra = {"X-Repo-Commit": commit} if commit else {}
        self._send(h, 404, json.dumps({"error": code}).encode(), {"X-Error-Code": code,
                                                                   "Content-Type": "application/json", **extra}, head)

    def _refuse_gated(self, h, kind: str, rid: str, head: bool) -> bool:
        if (kind, rid) not in self.gated:
            return False
        message = f"Access to {kind} {rid} is restricted. You must have access to it and be authenticated to access it."
        self._send(h, 401, json.dumps({"error": message}).encode(),
                   {"X-Error-Code": "GatedRepo", "X-Error-Message": message, "Content-Type": "application/json"}, head)
        return True

    def _split_repo(self, kind: str, parts: list[str]) -> tuple[str, list[str]] | None:
        """The repository id at the start of ``parts`` (one or two segments; a moved name included) and the rest."""
        for n in (2, 1):
            if len(parts) >= n:
                rid = "/".join(parts[:n])
                if (kind, rid) in self.repos or (kind, rid) in self.moved:
                    return rid, parts[n:]
        return None

    def _answer(self, h, head: bool, post: bool = False) -> None:
        url = urlsplit(h.path)
        self.requests.append(f"{h.command} {url.path}{'?' + url.query if url.query else ''}")
        parts = [unquote(p) for p in url.path.strip("/").split("/")]
        if parts[:1] == ["api"]:
            return self._api(h, parts[1:], parse_qs(url.query), head, post)
        kind = "dataset" if parts[:1] == ["datasets"] else "model"
        found = self._split_repo(kind, parts[1:] if kind == "dataset" else parts)
        if found is None:
            return self._missing(h, "RepoNotFound", head)
        rid, rest = found
        if (kind, rid) in self.moved:
            new = self.moved[(kind, rid)]
            location = "/" + PREFIX[kind] + new + "/" + "/".join(quote(p, safe="") for p in rest)
            return self._send(h, 307, b"", {"Location": location}, head)
        if self._refuse_gated(h, kind, rid, head):
            return
        if len(rest) < 3 or rest[0] != "resolve":
            return self._missing(h, "EntryNotFound", head)
        revision, path = self._revision(kind, rid, rest[1]), "/".join(rest[2:])
        if revision is None:
            return self._missing(h, "RevisionNotFound", head)
        files = self.repos[(kind, rid)][revision]
        if path not in files:
            return self._missing(h, "EntryNotFound", head, self.commit(kind, rid, revision))
        body = files[path]
        etag = hashlib.sha1(body).hexdigest()
        self._send(h, 200, body, {"X-Repo-Commit": self.commit(kind, rid, revision), "ETag": f'"{etag}"',
                                  "Content-Type": "application/octet-stream"}, head)

    def _api(self, h, parts: list[str], query: dict, head: bool, post: bool) -> None:
        kind = {"datasets": "dataset", "models": "model"}.get(parts[0] if parts else "")
        if kind is None:
            return self._missing(h, "EntryNotFound", head)
        found = self._split_repo(kind, parts[1:])
        if found is None:
            return self._missing(h, "RepoNotFound", head)
        rid, rest = found
        if (kind, rid) in self.moved:
            new = self.moved[(kind, rid)]
            location = f"/api/{parts[0]}/{new}" + ("/" + "/".join(rest) if rest else "")
            return self._send(h, 307, b"", {"Location": location}, head)
        if self._refuse_gated(h, kind, rid, head):
            return
        revisions = self.repos[(kind, rid)]
        what, revision, path = (rest[0] if rest else "info"), "main", ""
        if len(rest) >= 2:
            revision, path = self._revision(kind, rid, rest[1]), "/".join(rest[2:])
        if revision is None:
            return self._missing(h, "RevisionNotFound", head)
        files, commit = revisions[revision], self.commit(kind, rid, revision)
        if what in ("info", "revision"):
            return self._json(h, {"id": rid, "_id": _sha(rid)[:24], "sha": commit, "private": False, "gated": False,
                                  "disabled": False, "siblings": [{"rfilename": f} for f in sorted(files)],
                                  "lastModified": "2026-01-01T00:00:00.000Z", "tags": [], "cardData": {}}, head)
        if what == "tree":
            return self._json(h, self._tree(files, path, query.get("recursive", ["false"])[0] in ("true", "True")),
                              head)
        if what == "paths-info":
            length = int(h.headers.get("Content-Length") or 0)
            raw = h.rfile.read(length).decode() if length else ""
            try:
                asked = json.loads(raw).get("paths", [])
            except ValueError:
                asked = parse_qs(raw).get("paths", [])
            entries = []
            for p in asked:
                if p in files:
                    entries.append(self._file_entry(files, p))
                elif any(f.startswith(p.rstrip("/") + "/") for f in files) or p in ("", "/"):
                    entries.append({"type": "directory", "path": p.strip("/"), "oid": _sha(p)})
            return self._json(h, entries, head)
        return self._missing(h, "EntryNotFound", head)

    @staticmethod
    def _file_entry(files, path):
        return {"type": "file", "path": path, "size": len(files[path]), "oid": hashlib.sha1(files[path]).hexdigest()}

    def _tree(self, files, folder: str, recursive: bool) -> list[dict]:
        folder = folder.strip("/")
        base = folder + "/" if folder else ""
        entries, dirs = [], set()
        for f in sorted(files):
            if not f.startswith(base):
                continue
            rest = f[len(base):]
            if "/" in rest and not recursive:
                dirs.add(base + rest.split("/")[0])
                continue
            if recursive:
                segs = rest.split("/")[:-1]
                for i in range(1, len(segs) + 1):
                    dirs.add(base + "/".join(segs[:i]))
            entries.append(self._file_entry(files, f))
        return [{"type": "directory", "path": d, "oid": _sha(d)} for d in sorted(dirs)] + entries
