"""Two `specmon sim` replicas behind nginx (Debian's nginx-light, as users run it), round
robin, and a real Prometheus (tests/support/fleet_fixtures.py) scraping each replica by its
own address, as a Kubernetes Service and the cluster's Prometheus do.

/metrics has an upstream block of its own: nginx keeps one round-robin position per
upstream, so consecutive scrapes alternate between the replicas whatever the load's requests
do (a Service's balancer picks per connection, at random or in turn: alternation is its
determinate case).
"""

from __future__ import annotations

import shutil
import subprocess
import tempfile
import time
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path

import httpx
import pytest

from specmon.run.sweep.servers import free_port
from specmon.server.process import ServerProcess
from specmon.sim.process import start_sim
from support.fleet_fixtures import Prometheus, start_prometheus
from support.paths import debian_binary

JOB = "replicas"
CONFIG = """worker_processes 1;
daemon off;
pid {prefix}/nginx.pid;
error_log {prefix}/error.log warn;
events {{ worker_connections 1024; }}
http {{
    access_log off;
    client_body_temp_path {prefix}/tmp/body;
    proxy_temp_path {prefix}/tmp/proxy;
    fastcgi_temp_path {prefix}/tmp/fastcgi;
    uwsgi_temp_path {prefix}/tmp/uwsgi;
    scgi_temp_path {prefix}/tmp/scgi;
    upstream replicas {{ {servers} keepalive 16; }}
    upstream replicas_metrics {{ {servers} }}
    server {{
        listen 127.0.0.1:{port};
        location = /metrics {{ proxy_pass http://replicas_metrics; }}
        location / {{
            proxy_pass http://replicas;
            proxy_http_version 1.1;
            proxy_set_header Connection "";
            proxy_buffering off;
            proxy_read_timeout 300s;
        }}
    }}
}}
"""


def nginx_binary() -> str:
    return debian_binary("nginx", "/usr/sbin/nginx", "nginx-light")


@dataclass
class Balancer:
    url: str  # nginx, in front of both replicas
    replicas: list[ServerProcess]
    prometheus: Prometheus
    process: subprocess.Popen[bytes]


def start_nginx(backends: list[str]) -> tuple[str, subprocess.Popen[bytes], Path]:
    """nginx in the foreground on a free loopback port, round robin over `backends`."""
    prefix = Path(tempfile.mkdtemp(prefix="specmon-test-nginx-"))
    (prefix / "tmp").mkdir()
    port = free_port()
    servers = " ".join(f"server {b};" for b in backends)
    (prefix / "nginx.conf").write_text(CONFIG.format(prefix=prefix, port=port, servers=servers))
    for path in [prefix, *prefix.rglob("*")]:  # workers started by root run as nobody
        path.chmod(0o755 if path.is_dir() else 0o644)
    command = [nginx_binary(), "-p", str(prefix), "-e", str(prefix / "error.log")]
    process = subprocess.Popen(
        [*command, "-c", str(prefix / "nginx.conf")],
        stdout=subprocess.DEVNULL,
        stderr=subprocess.DEVNULL,
    )
    url = f"http://127.0.0.1:{port}"
    deadline = time.monotonic() + 30
    while time.monotonic() < deadline:
        try:
            if httpx.get(url + "/v1/models", timeout=5).status_code == 200:
                return url, process, prefix
        except httpx.HTTPError:
            time.sleep(0.1)
    process.kill()
    raise AssertionError(f"nginx did not start: {(prefix / 'error.log').read_text()[-500:]}")


@pytest.fixture(scope="module")
def balancer(tmp_path_factory: pytest.TempPathFactory) -> Iterator[Balancer]:
    nginx_binary()
    common = ["--num-spec-tokens", "3", "--step-ms", "20", "--ttft-ms", "5"]
    sims = [
        start_sim([*common, "--acceptance", "0.8", "--seed", "21"]),
        start_sim([*common, "--acceptance", "0.6", "--seed", "22"]),
    ]
    backends = [s.url.split("//", 1)[1] for s in sims]
    prom = start_prometheus(backends, tmp_path_factory.mktemp("prometheus"), job=JOB)
    url, nginx, prefix = start_nginx(backends)
    try:
        prom.wait_for(f'vllm:spec_decode_num_drafts_total{{job="{JOB}"}}', 2)
        yield Balancer(url, sims, prom, nginx)
    finally:
        nginx.terminate()
        nginx.wait(10)
        shutil.rmtree(prefix, ignore_errors=True)
        prom.process.terminate()
        prom.process.wait(10)
        for sim in sims:
            sim.stop()
