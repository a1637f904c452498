"""The UI's ASGI app: a JSON API under ``/api`` beside the static pages.

Handlers are plain functions (Starlette runs them in its thread pool); the store
behind them is bound to one tenant, which scopes every route.
"""

from __future__ import annotations

from collections.abc import Callable
from pathlib import Path
from typing import Any
from urllib.parse import urlsplit

from starlette.applications import Starlette
from starlette.concurrency import run_in_threadpool
from starlette.middleware import Middleware
from starlette.requests import Request
from starlette.responses import FileResponse, JSONResponse
from starlette.routing import Mount, Route
from starlette.staticfiles import StaticFiles

from beeweave_core.errors import StoreError
from beeweave_core.store import NotFound
from beeweave_core.weave import Weave
from beeweave_ui import actions, reads
from beeweave_ui.guard import AccessGuard

STATIC = Path(__file__).parent / "static"
#: A write must carry this header: a cross-site form cannot set it without a preflight
#: the server never grants.
ACTION_HEADER = "x-beeweave-action"

Handler = Callable[[Request], Any]


def _json(fn: Handler) -> Callable[[Request], JSONResponse]:
    """Turn a handler's result or its error into JSON with the right status."""

    def endpoint(request: Request) -> JSONResponse:
        try:
            return JSONResponse(fn(request))
        except NotFound as exc:
            return JSONResponse({"error": str(exc.args[0] if exc.args else exc)}, status_code=404)
        except PermissionError as exc:  # outside the weave's scopes (beeweave_core.scopes)
            return JSONResponse({"error": " ".join(str(exc).split())[:300]}, status_code=403)
        except (ValueError, TypeError, StoreError) as exc:
            return JSONResponse({"error": " ".join(str(exc).split())[:300]}, status_code=400)

    return endpoint


def _int(request: Request, name: str, default: int | None) -> int | None:
    raw = request.query_params.get(name)
    if raw in (None, ""):
        return default
    try:
        value = int(raw)
    except ValueError:
        raise ValueError(f"{name} must be an integer, got {raw[:40]!r}") from None
    if not -(2**63) <= value < 2**63:  # what a store's integer column holds
        raise ValueError(f"{name} is out of range: {raw[:40]!r}")
    return value


def _where(url: str) -> str:
    """The store's address without credentials, for the page header."""
    parts = urlsplit(url)
    if parts.scheme == "sqlite":
        return url
    return f"{parts.scheme}://{parts.hostname or ''}{':' + str(parts.port) if parts.port else ''}"


def _routes(weave: Weave) -> list[Route]:
    store = weave.store

    def info(r: Request) -> dict[str, Any]:
        return {"tenant": weave.tenant, "store": _where(weave.url)}

    def session_graph(r: Request) -> dict[str, Any]:
        sid = r.path_params["sid"]
        return reads.graph_window(
            store, sid, _int(r, "seq_from", None), _int(r, "limit", reads.WINDOW) or reads.WINDOW
        )

    def search(r: Request) -> list[dict[str, Any]]:
        q = r.query_params.get("q", "").strip()
        if not q:
            raise ValueError("search needs a query (?q=…)")
        return reads.search(
            weave, q, session_id=r.query_params.get("session") or None, k=_int(r, "k", 10) or 10
        )

    get = {
        "/api/info": info,
        "/api/sessions": lambda r: reads.sessions(store, r.query_params.get("q", "")),
        "/api/sessions/{sid}/graph": session_graph,
        "/api/sessions/{sid}/assemblies": lambda r: reads.assemblies(store, r.path_params["sid"]),
        "/api/sessions/{sid}/memories": lambda r: reads.memories(store, r.path_params["sid"]),
        "/api/sessions/{sid}/health": lambda r: reads.health(store, [r.path_params["sid"]]),
        "/api/health": lambda r: reads.health(store),
        "/api/events/{eid}": lambda r: reads.event_detail(store, r.path_params["eid"]),
        "/api/assemblies/{eid}": lambda r: reads.assembly(store, r.path_params["eid"]),
        "/api/search": search,
    }
    routes = [Route(path, _json(fn), methods=["GET"]) for path, fn in get.items()]
    routes.append(Route("/api/memories/{eid}/{action}", _action_endpoint(weave), methods=["POST"]))
    return routes


def _action_endpoint(weave: Weave) -> Callable[[Request], Any]:
    async def endpoint(request: Request) -> JSONResponse:
        if request.headers.get(ACTION_HEADER) != "1":
            return JSONResponse(
                {"error": f"writes need the {ACTION_HEADER} header"}, status_code=403
            )
        try:
            body = await request.json()
        except ValueError:
            body = {}
        reason = body.get("reason", "") if isinstance(body, dict) else ""
        eid, action = request.path_params["eid"], request.path_params["action"]
        return await run_in_threadpool(
            _json(lambda r: actions.apply(weave, eid, action, reason)), request
        )

    return endpoint


def build_app(weave: Weave, *, token: str | None = None) -> Starlette:
    """The UI over ``weave``; ``token`` lets non-local clients in (None: local only)."""

    def index(request: Request) -> FileResponse:
        return FileResponse(STATIC / "index.html", headers={"cache-control": "no-store"})

    return Starlette(
        routes=[
            *_routes(weave),
            Route("/", index),
            Mount("/static", StaticFiles(directory=STATIC), name="static"),
        ],
        middleware=[Middleware(AccessGuard, token=token)],
    )
