"""Stand-ins a real JupyterHub 5.5 runs with in tests/test_gpu_culler.py: a proxy that keeps its routes in memory (the
tests reach the hub and the servers directly; configurable-http-proxy, a Node program, is there only after `make chp`)
and a spawner whose "server" is a tiny HTTP server in the hub's own process, which answers the hub's readiness check as
a notebook server would."""

from jupyterhub.proxy import Proxy
from jupyterhub.spawner import Spawner
from tornado.httpserver import HTTPServer
from tornado.netutil import bind_sockets
from tornado.web import Application, RequestHandler


class MemoryProxy(Proxy):
    should_start = False

    def __init__(self, **kwargs):
        super().__init__(**kwargs)
        self.routes: dict[str, dict] = {}

    async def add_route(self, routespec, target, data):
        self.routes[routespec] = {"routespec": routespec, "target": target, "data": data}

    async def delete_route(self, routespec):
        self.routes.pop(routespec, None)

    async def get_all_routes(self):
        return dict(self.routes)


class _Answer(RequestHandler):
    def get(self, *args):
        self.write("a stand-in for jupyterhub-singleuser")


class DummySpawner(Spawner):
    _http: HTTPServer | None = None

    async def start(self):
        sockets = bind_sockets(0, "127.0.0.1")
        self._http = HTTPServer(Application([(r".*", _Answer)]))
        self._http.add_sockets(sockets)
        return ("127.0.0.1", sockets[0].getsockname()[1])

    async def poll(self):
        return None if self._http else 0

    async def stop(self, now=False):
        if self._http:
            self._http.stop()
            self._http = None
