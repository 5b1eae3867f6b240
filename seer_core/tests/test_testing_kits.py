"""The pieces seer's test kits share: the loopback HTTP server the fake services are made of, and
the Docker-engine helpers (tar archives, the missing-package and missing-engine reasons)."""

from __future__ import annotations

import io
import sys
import tarfile
import urllib.request
from http.server import BaseHTTPRequestHandler
from typing import Any

import pytest
from seer.testing import docker_engine
from seer.testing.loopback import LoopbackServer

pytestmark = pytest.mark.unit


class _Hello(BaseHTTPRequestHandler):
    greeter: _Greeter

    def do_GET(self) -> None:
        body = self.greeter.greeting.encode()
        self.send_response(200)
        self.send_header("Content-Length", str(len(body)))
        self.end_headers()
        self.wfile.write(body)

    def log_message(self, *args: object) -> None:
        pass


class _Greeter(LoopbackServer):
    handler_attribute = "greeter"
    what = "the greeter"

    def __init__(self, greeting: str):
        self.greeting = greeting

    def request_handler(self) -> type[BaseHTTPRequestHandler]:
        return _Hello


@pytest.mark.e2e
def test_loopback_server_serves_its_object_and_releases_the_port() -> None:
    with _Greeter("hello from the fake") as server:
        assert server.origin.startswith("http://127.0.0.1:")
        opener = urllib.request.build_opener(urllib.request.ProxyHandler({}))
        with opener.open(server.origin + "/", timeout=10) as resp:
            assert resp.read() == b"hello from the fake"
        origin = server.origin
    with pytest.raises(RuntimeError, match="the greeter is not running"):
        _ = server.origin
    server.stop()  # twice is fine
    with pytest.raises(OSError), opener.open(origin + "/", timeout=5):
        pass


class _Failing(BaseHTTPRequestHandler):
    def do_GET(self) -> None:
        if self.path == "/gone":
            raise BrokenPipeError(32, "Broken pipe")  # as writing to a client that hung up does
        raise ValueError("a bug in the fake")

    def log_message(self, *args: object) -> None:
        pass


class _FailingServer(LoopbackServer):
    def request_handler(self) -> type[BaseHTTPRequestHandler]:
        return _Failing


@pytest.mark.e2e
def test_a_client_that_hung_up_is_no_traceback_but_a_bug_in_the_fake_is(
    capfd: pytest.CaptureFixture[str],
) -> None:
    opener = urllib.request.build_opener(urllib.request.ProxyHandler({}))
    with _FailingServer() as server:
        for path in ("/gone", "/bug"):
            with pytest.raises(OSError), opener.open(server.origin + path, timeout=10):
                pass
            err = capfd.readouterr().err
            if path == "/gone":
                assert err == ""
            else:
                assert "ValueError: a bug in the fake" in err


def test_tar_archive_holds_files_with_their_modes_owned_by_root() -> None:
    data = docker_engine.tar_archive({"/etc/x/key": (b"secret", 0o600), "run.sh": (b"#!/bin/sh\n", 0o755)})
    with tarfile.open(fileobj=io.BytesIO(data)) as tar:
        members = {m.name: m for m in tar.getmembers()}
        assert set(members) == {"etc/x/key", "run.sh"}
        assert (members["etc/x/key"].mode, members["etc/x/key"].uid) == (0o600, 0)
        assert members["run.sh"].mode == 0o755
        extracted = tar.extractfile(members["etc/x/key"])
        assert extracted is not None and extracted.read() == b"secret"


def test_a_kit_without_the_docker_package_says_which_extra_brings_it(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setitem(sys.modules, "docker", None)  # import docker fails as if not installed
    with pytest.raises(ImportError, match=r'my_kit\.testing .* pip install "my-kit\[testing\]"'):
        docker_engine.docker_client("my_kit.testing", "my-kit[testing]")
    problem = docker_engine.engine_problem(
        lambda: docker_engine.docker_client("my_kit.testing", "my-kit[testing]"), "base:tag"
    )
    assert problem is not None and "no Docker engine answers" in problem and "my-kit[testing]" in problem


class _Client:
    def __init__(self) -> None:
        self.closed = False

    def close(self) -> None:
        self.closed = True


def test_client_or_closes_only_the_client_it_made() -> None:
    given = _Client()
    with docker_engine.client_or(given, _Client) as engine:
        assert engine is given
    assert not given.closed
    made: list[_Client] = []

    def make() -> Any:
        made.append(_Client())
        return made[-1]

    with pytest.raises(RuntimeError), docker_engine.client_or(None, make) as engine:
        assert engine is made[0]
        raise RuntimeError("the block failed")
    assert made[0].closed
