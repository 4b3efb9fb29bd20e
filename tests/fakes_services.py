"""Fake GitHub and Slack Web APIs over real HTTP on 127.0.0.1, for the integration tests.

They speak the real REST shapes the tools rely on: bearer tokens mapped to users (401 /
`invalid_auth` otherwise), GitHub's `Link: <…>; rel="next"` pagination and
`x-ratelimit-*` headers, Slack's `{"ok": …}` envelopes and `response_metadata.next_cursor`.
Every request is recorded (method, path, query, headers, JSON or form body), and a test can
inject the next failure (a 401, a rate limit). In-memory data; stdlib only; daemon threads.

    with FakeGitHub({"tok-a": "alice"}) as gh:
        gh.add_repo("alice/app", issues=30)
        ...                                  # point an account's base_url at gh.base_url
        assert gh.requests[-1].token == "tok-a"
"""

from __future__ import annotations

import base64
import json
import re
import threading
import time
from collections import deque
from dataclasses import dataclass, field
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from typing import Any
from urllib.parse import parse_qs, unquote, urlencode, urlsplit

Reply = tuple[int, dict[str, str], Any]


@dataclass(frozen=True)
class Seen:
    """One request a fake received."""

    method: str
    path: str
    query: dict[str, str]
    headers: dict[str, str]
    body: Any

    @property
    def token(self) -> str | None:
        auth = self.headers.get("authorization", "")
        return auth.removeprefix("Bearer ") if auth.startswith("Bearer ") else None


class _Handler(BaseHTTPRequestHandler):
    server: _Server
    protocol_version = "HTTP/1.1"

    def log_message(self, format: str, *args: Any) -> None:
        pass

    def do_GET(self) -> None:
        self._serve("GET")

    def do_POST(self) -> None:
        self._serve("POST")

    def _serve(self, method: str) -> None:
        url = urlsplit(self.path)
        query = {k: v[-1] for k, v in parse_qs(url.query, keep_blank_values=True).items()}
        length = int(self.headers.get("content-length") or 0)
        raw = self.rfile.read(length) if length else b""
        body: Any = None
        if raw:
            kind = self.headers.get("content-type", "")
            if "json" in kind:
                body = json.loads(raw)
            else:
                body = {k: v[-1] for k, v in parse_qs(raw.decode()).items()}
        headers = {k.lower(): v for k, v in self.headers.items()}
        seen = Seen(method, unquote(url.path), query, headers, body)
        status, extra, payload = self.server.owner._receive(seen)
        data = json.dumps(payload).encode()
        self.send_response(status)
        self.send_header("Content-Type", "application/json; charset=utf-8")
        self.send_header("Content-Length", str(len(data)))
        for key, value in extra.items():
            self.send_header(key, value)
        self.end_headers()
        self.wfile.write(data)


class _Server(ThreadingHTTPServer):
    daemon_threads = True

    def __init__(self, owner: FakeService) -> None:
        super().__init__(("127.0.0.1", 0), _Handler)
        self.owner = owner


class FakeService:
    """The server plumbing both fakes share: start/stop, recording, injected failures."""

    prefix = ""

    def __init__(self) -> None:
        self._server: _Server | None = None
        self._thread: threading.Thread | None = None
        self._lock = threading.Lock()
        self._requests: list[Seen] = []
        self._failures: deque[Reply] = deque()

    def start(self) -> FakeService:
        self._server = _Server(self)
        self._thread = threading.Thread(
            target=self._server.serve_forever, kwargs={"poll_interval": 0.05}, daemon=True
        )
        self._thread.start()
        return self

    def stop(self) -> None:
        if self._server is not None:
            self._server.shutdown()
            self._server.server_close()
            self._server = None

    def __enter__(self) -> Any:
        return self.start()

    def __exit__(self, *exc: object) -> None:
        self.stop()

    @property
    def origin(self) -> str:
        assert self._server is not None, "not started"
        return f"http://127.0.0.1:{self._server.server_address[1]}"

    @property
    def base_url(self) -> str:
        return self.origin + self.prefix

    @property
    def requests(self) -> list[Seen]:
        with self._lock:
            return list(self._requests)

    def tokens_seen(self) -> list[str | None]:
        return [r.token for r in self.requests]

    def fail_next(self, status: int, payload: Any, headers: dict[str, str] | None = None) -> None:
        """The next request gets this reply instead of its normal one."""
        with self._lock:
            self._failures.append((status, dict(headers or {}), payload))

    def _receive(self, seen: Seen) -> Reply:
        with self._lock:
            self._requests.append(seen)
            failure = self._failures.popleft() if self._failures else None
            if failure is not None:
                return failure
            return self.handle(seen)

    def handle(self, seen: Seen) -> Reply:  # pragma: no cover - overridden
        raise NotImplementedError


# ---- GitHub ---------------------------------------------------------------------------


@dataclass
class FakeRepo:
    owner: str
    name: str
    private: bool = False
    collaborators: set[str] = field(default_factory=set)
    issues: list[dict[str, Any]] = field(default_factory=list)
    comments: dict[int, list[dict[str, Any]]] = field(default_factory=dict)
    pulls: dict[int, dict[str, Any]] = field(default_factory=dict)
    files: dict[str, bytes] = field(default_factory=dict)

    @property
    def full_name(self) -> str:
        return f"{self.owner}/{self.name}"

    def visible_to(self, login: str) -> bool:
        return not self.private or login == self.owner or login in self.collaborators


_RATE_LIMIT = 5000
_STAMP = "2026-01-02T03:04:05Z"


class FakeGitHub(FakeService):
    """GitHub's REST API v3 (the parts the tools use). `prefix="/api/v3"` mimics Enterprise."""

    def __init__(self, tokens: dict[str, str], *, prefix: str = "", max_per_page: int = 100):
        super().__init__()
        self.tokens = dict(tokens)
        self.prefix = prefix
        self.max_per_page = max_per_page
        self.repos: dict[str, FakeRepo] = {}
        self.remaining: dict[str, int] = {}

    # ---- data ---------------------------------------------------------------------

    def add_repo(
        self,
        full_name: str,
        *,
        private: bool = False,
        collaborators: tuple[str, ...] = (),
        issues: int = 0,
        files: dict[str, bytes] | None = None,
    ) -> FakeRepo:
        owner, name = full_name.split("/")
        repo = FakeRepo(owner, name, private, set(collaborators), files=dict(files or {}))
        self.repos[full_name] = repo
        for n in range(1, issues + 1):
            self.add_issue(full_name, f"Issue number {n}", author=owner)
        return repo

    def add_issue(
        self,
        full_name: str,
        title: str,
        *,
        author: str,
        body: str = "",
        labels: tuple[str, ...] = (),
        state: str = "open",
        pull: bool = False,
        assignee: str | None = None,
    ) -> dict[str, Any]:
        repo = self.repos[full_name]
        number = len(repo.issues) + 1
        issue: dict[str, Any] = {
            "id": 1000 + number,
            "number": number,
            "title": title,
            "body": body,
            "state": state,
            "user": {"login": author},
            "labels": [{"name": label} for label in labels],
            "assignee": {"login": assignee} if assignee else None,
            "comments": 0,
            "created_at": _STAMP,
            "updated_at": _STAMP,
            "html_url": f"https://github.test/{full_name}/issues/{number}",
            "repository_url": f"https://api.github.test/repos/{full_name}",
        }
        if pull:
            issue["pull_request"] = {
                "url": f"https://api.github.test/repos/{full_name}/pulls/{number}"
            }
            repo.pulls[number] = {
                "number": number,
                "head": {"ref": f"feature-{number}"},
                "base": {"ref": "main"},
                "merged": False,
                "draft": False,
            }
        repo.issues.append(issue)
        repo.comments[number] = []
        return issue

    def add_comment(self, full_name: str, number: int, body: str, author: str) -> dict[str, Any]:
        repo = self.repos[full_name]
        comment = {
            "id": 5000 + sum(len(c) for c in repo.comments.values()),
            "user": {"login": author},
            "body": body,
            "created_at": _STAMP,
            "html_url": f"https://github.test/{full_name}/issues/{number}#comment",
        }
        repo.comments[number].append(comment)
        repo.issues[number - 1]["comments"] += 1
        return comment

    def rate_limit_next(self, reset_in: int = 600) -> int:
        """The next request is refused as over the primary rate limit. Returns the reset time."""
        reset = int(time.time()) + reset_in
        headers = {
            "x-ratelimit-limit": str(_RATE_LIMIT),
            "x-ratelimit-remaining": "0",
            "x-ratelimit-reset": str(reset),
            "x-ratelimit-resource": "core",
        }
        self.fail_next(403, {"message": "API rate limit exceeded for user ID 1."}, headers)
        return reset

    # ---- serving ------------------------------------------------------------------

    def handle(self, seen: Seen) -> Reply:
        login = self.tokens.get(seen.token or "")
        if login is None:
            return 401, {}, {"message": "Bad credentials", "status": "401"}
        left = self.remaining.get(login, _RATE_LIMIT) - 1
        self.remaining[login] = left
        limits = {
            "x-ratelimit-limit": str(_RATE_LIMIT),
            "x-ratelimit-remaining": str(left),
            "x-ratelimit-reset": str(int(time.time()) + 3600),
        }
        if not seen.path.startswith(self.prefix):
            return 404, limits, {"message": "Not Found"}
        path = seen.path[len(self.prefix) :]
        status, extra, payload = self._route(seen, path, login)
        return status, {**limits, **extra}, payload

    def _route(self, seen: Seen, path: str, login: str) -> Reply:
        if seen.method == "GET" and path == "/user":
            return 200, {}, {"login": login, "id": abs(hash(login)) % 10_000}
        if seen.method == "GET" and path == "/user/repos":
            mine = [r for r in self.repos.values() if r.owner == login or login in r.collaborators]
            return self._page(seen, path, [self._repo_json(r) for r in mine])
        if match := re.fullmatch(r"/users/([^/]+)/repos", path):
            theirs = [r for r in self.repos.values() if r.owner == match[1] and not r.private]
            return self._page(seen, path, [self._repo_json(r) for r in theirs])
        if seen.method == "GET" and path == "/search/issues":
            return self._page(seen, path, self._search(seen.query.get("q", ""), login), wrap=True)
        match = re.fullmatch(r"/repos/([^/]+/[^/]+)(/.*)?", path)
        repo = self.repos.get(match[1]) if match else None
        if match is None or repo is None or not repo.visible_to(login):
            return 404, {}, {"message": "Not Found"}
        return self._repo_route(seen, path, match[2] or "", repo, login)

    def _repo_route(self, seen: Seen, path: str, rest: str, repo: FakeRepo, login: str) -> Reply:
        if rest == "/issues" and seen.method == "GET":
            return self._page(seen, path, self._filter(repo.issues, seen.query))
        if rest == "/issues" and seen.method == "POST":
            body = seen.body or {}
            if not body.get("title"):
                return 422, {}, {"message": "Validation Failed"}
            issue = self.add_issue(
                repo.full_name, body["title"], author=login, body=body.get("body", "")
            )
            issue["labels"] = [{"name": n} for n in body.get("labels", [])]
            return 201, {}, issue
        if match := re.fullmatch(r"/issues/(\d+)(/comments)?", rest):
            number = int(match[1])
            if not 0 < number <= len(repo.issues):
                return 404, {}, {"message": "Not Found"}
            if match[2] and seen.method == "POST":
                comment = self.add_comment(repo.full_name, number, seen.body["body"], login)
                return 201, {}, comment
            if match[2]:
                return self._page(seen, path, repo.comments[number])
            return 200, {}, repo.issues[number - 1]
        if (match := re.fullmatch(r"/pulls/(\d+)", rest)) and int(match[1]) in repo.pulls:
            return 200, {}, repo.pulls[int(match[1])]
        if rest.startswith("/contents/"):
            return self._contents(repo, rest.removeprefix("/contents/"))
        return 404, {}, {"message": "Not Found"}

    def _repo_json(self, repo: FakeRepo) -> dict[str, Any]:
        return {
            "full_name": repo.full_name,
            "name": repo.name,
            "owner": {"login": repo.owner},
            "private": repo.private,
            "description": f"The {repo.name} repository",
            "default_branch": "main",
            "stargazers_count": 3,
            "open_issues_count": sum(1 for i in repo.issues if i["state"] == "open"),
            "updated_at": _STAMP,
            "html_url": f"https://github.test/{repo.full_name}",
        }

    @staticmethod
    def _filter(issues: list[dict[str, Any]], query: dict[str, str]) -> list[dict[str, Any]]:
        state = query.get("state", "open")
        wanted = {n for n in query.get("labels", "").split(",") if n}
        found = []
        for issue in reversed(issues):  # newest first, like GitHub's default sort
            names = {label["name"] for label in issue["labels"]}
            if state != "all" and issue["state"] != state:
                continue
            if not wanted <= names:
                continue
            if (
                query.get("assignee")
                and (issue["assignee"] or {}).get("login") != query["assignee"]
            ):
                continue
            found.append(issue)
        return found

    def _search(self, q: str, login: str) -> list[dict[str, Any]]:
        words, quals = [], {}
        for term in q.split():
            key, sep, value = term.partition(":")
            if sep:
                quals.setdefault(key, []).append(value)
            else:
                words.append(term.lower())
        found = []
        for repo in self.repos.values():
            if not repo.visible_to(login) or repo.full_name not in quals.get(
                "repo", [repo.full_name]
            ):
                continue
            for issue in reversed(repo.issues):
                text = f"{issue['title']} {issue['body']}".lower()
                kind = "pr" if "pull_request" in issue else "issue"
                if any(w not in text for w in words) or kind not in quals.get("is", [kind]):
                    continue
                if issue["state"] not in quals.get("state", [issue["state"]]):
                    continue
                found.append(issue)
        return found

    def _contents(self, repo: FakeRepo, path: str) -> Reply:
        if path in repo.files:
            raw = repo.files[path]
            return (
                200,
                {},
                {
                    "type": "file",
                    "path": path,
                    "name": path.rsplit("/", 1)[-1],
                    "size": len(raw),
                    "sha": f"{abs(hash(raw)):x}",
                    "encoding": "base64",
                    "content": base64.encodebytes(raw).decode(),  # GitHub wraps lines
                },
            )
        folder = path.rstrip("/") + "/"
        entries = sorted(
            {p[len(folder) :].split("/")[0] for p in repo.files if p.startswith(folder)}
        )
        if not entries:
            return 404, {}, {"message": "Not Found"}
        listing = [
            {"name": e, "path": folder + e, "type": "file" if folder + e in repo.files else "dir"}
            for e in entries
        ]
        return 200, {}, listing

    def _page(self, seen: Seen, path: str, items: list[Any], *, wrap: bool = False) -> Reply:
        per_page = min(int(seen.query.get("per_page", 30)), self.max_per_page)
        page = int(seen.query.get("page", 1))
        chunk = items[(page - 1) * per_page : page * per_page]
        last = max(1, -(-len(items) // per_page))
        links = []
        if page < last:
            for rel, n in (("next", page + 1), ("last", last)):
                query = urlencode({**seen.query, "page": n})
                links.append(f'<{self.base_url}{path}?{query}>; rel="{rel}"')
        headers = {"Link": ", ".join(links)} if links else {}
        payload = {"total_count": len(items), "incomplete_results": False, "items": chunk}
        return 200, headers, payload if wrap else chunk


# ---- Slack ----------------------------------------------------------------------------


@dataclass(frozen=True)
class SlackIdentity:
    user_id: str
    user: str
    team: str = "Acme"
    bot: bool = True


class FakeSlack(FakeService):
    """Slack's Web API (the methods the tools use) under `/api/`."""

    prefix = "/api"

    def __init__(self, tokens: dict[str, SlackIdentity], *, max_page: int = 1000) -> None:
        super().__init__()
        self.tokens = dict(tokens)
        self.max_page = max_page
        self.channels: list[dict[str, Any]] = []
        self.users: list[dict[str, Any]] = []
        self.messages: dict[str, list[dict[str, Any]]] = {}  # newest first, like Slack
        self._clock = 1_767_000_000.0

    def add_channel(
        self, name: str, *, private: bool = False, member: bool = True, archived: bool = False
    ) -> str:
        channel_id = f"C{len(self.channels) + 1:08d}"
        self.channels.append(
            {
                "id": channel_id,
                "name": name,
                "is_channel": True,
                "is_private": private,
                "is_archived": archived,
                "is_member": member,
                "num_members": 3,
                "topic": {"value": f"All about {name}"},
            }
        )
        self.messages[channel_id] = []
        return channel_id

    def add_user(self, name: str, real_name: str, email: str = "", bot: bool = False) -> str:
        user_id = f"U{len(self.users) + 1:08d}"
        profile = {"real_name": real_name, "display_name": name, "email": email}
        self.users.append(
            {"id": user_id, "name": name, "real_name": real_name, "is_bot": bot, "profile": profile}
        )
        return user_id

    def post(self, channel_id: str, user: str, text: str) -> dict[str, Any]:
        self._clock += 60
        message = {"type": "message", "user": user, "text": text, "ts": f"{self._clock:.6f}"}
        self.messages[channel_id].insert(0, message)
        return message

    def handle(self, seen: Seen) -> Reply:
        params = {**seen.query, **(seen.body or {})}
        if not seen.path.startswith("/api/"):
            return 404, {}, {"ok": False, "error": "unknown_method"}
        method = seen.path.removeprefix("/api/")
        if seen.token is None:
            return 200, {}, {"ok": False, "error": "not_authed"}
        who = self.tokens.get(seen.token)
        if who is None:
            return 200, {}, {"ok": False, "error": "invalid_auth"}
        handler = getattr(self, "_m_" + method.replace(".", "_"), None)
        if handler is None:
            return 200, {}, {"ok": False, "error": "unknown_method"}
        return 200, {}, {"ok": True, **handler(params, who)}

    def _paged(self, params: dict[str, Any], items: list[Any], key: str) -> dict[str, Any]:
        size = min(int(params.get("limit") or 100), self.max_page)
        start = int(base64.b64decode(params["cursor"]).decode()) if params.get("cursor") else 0
        chunk = items[start : start + size]
        after = start + size
        cursor = base64.b64encode(str(after).encode()).decode() if after < len(items) else ""
        return {key: chunk, "response_metadata": {"next_cursor": cursor}}

    def _m_auth_test(self, params: dict[str, Any], who: SlackIdentity) -> dict[str, Any]:
        out = {"url": "https://acme.slack.test/", "team": who.team, "team_id": "T0001"}
        out |= {"user": who.user, "user_id": who.user_id}
        return out | ({"bot_id": "B0001"} if who.bot else {})

    def _m_conversations_list(self, params: dict[str, Any], who: SlackIdentity) -> dict[str, Any]:
        types = str(params.get("types", "public_channel")).split(",")
        skip_archived = str(params.get("exclude_archived", "false")) == "true"
        chosen = [
            c
            for c in self.channels
            if ("private_channel" if c["is_private"] else "public_channel") in types
            and not (skip_archived and c["is_archived"])
        ]
        return self._paged(params, chosen, "channels")

    def _m_users_list(self, params: dict[str, Any], who: SlackIdentity) -> dict[str, Any]:
        return self._paged(params, self.users, "members")

    def _m_users_info(self, params: dict[str, Any], who: SlackIdentity) -> dict[str, Any]:
        for user in self.users:
            if user["id"] == params.get("user"):
                return {"user": user}
        raise _SlackFailure("user_not_found")

    def _channel(self, params: dict[str, Any]) -> dict[str, Any]:
        for channel in self.channels:
            if channel["id"] == params.get("channel"):
                return channel
        raise _SlackFailure("channel_not_found")

    def _m_conversations_history(
        self, params: dict[str, Any], who: SlackIdentity
    ) -> dict[str, Any]:
        channel = self._channel(params)
        if not channel["is_member"]:
            raise _SlackFailure("not_in_channel")
        limit = int(params.get("limit") or 100)
        found = self.messages[channel["id"]]
        return {"messages": found[:limit], "has_more": len(found) > limit}

    def _m_chat_postMessage(self, params: dict[str, Any], who: SlackIdentity) -> dict[str, Any]:
        channel = self._channel(params)
        if not channel["is_member"]:
            raise _SlackFailure("not_in_channel")
        if not params.get("text"):
            raise _SlackFailure("no_text")
        message = self.post(channel["id"], who.user_id, str(params["text"]))
        return {"channel": channel["id"], "ts": message["ts"], "message": message}

    def _receive(self, seen: Seen) -> Reply:
        try:
            return super()._receive(seen)
        except _SlackFailure as exc:
            return 200, {}, {"ok": False, "error": exc.code}


class _SlackFailure(Exception):
    def __init__(self, code: str) -> None:
        super().__init__(code)
        self.code = code
