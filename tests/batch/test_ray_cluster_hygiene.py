"""The local Ray cluster toolbridge starts: loopback only (every listening socket of every process
of it, listed by psutil), a line on stderr when it starts, and nothing left behind after its
driver is killed with SIGKILL (Ray alone leaves its agents, GCS and raylet for about a minute).

One real driver subprocess, one cluster: slow (20 to 40 s), so one test."""

from __future__ import annotations

import json
import os
import signal
import subprocess
import sys
import threading
import time
from pathlib import Path

import psutil
import pytest

LOOPBACK = {"127.0.0.1", "::1", "::ffff:127.0.0.1"}

DRIVER = r"""
import json, os, sys, time
from toolbridge.batch._ray import start_announced
from toolbridge.batch._reaper import descendants
start_announced(num_cpus=1)
import ray

@ray.remote
def pid():
    return os.getpid()

ray.get(pid.remote())  # a worker too
print(json.dumps(sorted(descendants([os.getpid()]))), flush=True)
time.sleep(600)
"""


def _alive(procs: list[psutil.Process]) -> list[psutil.Process]:
    out = []
    for p in procs:
        try:
            if p.is_running() and p.status() != psutil.STATUS_ZOMBIE:
                out.append(p)
        except psutil.NoSuchProcess:
            continue
    return out


@pytest.mark.timeout(300)
def test_loopback_only_a_start_line_and_no_orphans_after_sigkill(tmp_path: Path) -> None:
    err = (tmp_path / "stderr").open("w+b")
    env = {k: v for k, v in os.environ.items() if k != "RAY_ADDRESS"}
    driver = subprocess.Popen(
        [sys.executable, "-c", DRIVER], stdout=subprocess.PIPE, stderr=err, env=env, start_new_session=True
    )
    procs: list[psutil.Process] = []
    try:
        assert driver.stdout is not None
        timer = threading.Timer(240, driver.kill)  # hang guard
        timer.start()
        try:
            line = driver.stdout.readline()
        finally:
            timer.cancel()
        err.seek(0)
        assert line, err.read().decode(errors="replace")[-3000:]
        for pid in json.loads(line):
            try:
                procs.append(psutil.Process(pid))
            except psutil.NoSuchProcess:
                continue
        names = " ".join(p.name() for p in procs)
        assert "gcs_server" in names and "raylet" in names, names
        listening = [
            (p.name(), c.laddr.ip)
            for p in _alive(procs)
            for c in p.net_connections(kind="inet")
            if c.status == psutil.CONN_LISTEN
        ]
        assert len(listening) >= 3, listening  # the GCS, the raylet, a worker at least
        assert [x for x in listening if x[1] not in LOOPBACK] == []
        err.seek(0)
        assert err.read().decode().startswith("toolbridge: starting a local Ray cluster (loopback only")
        driver.send_signal(signal.SIGKILL)
        driver.wait(timeout=30)
        deadline = time.monotonic() + 30  # Ray alone: about 60 s
        while _alive(procs):
            assert time.monotonic() < deadline, [p.name() for p in _alive(procs)]
            time.sleep(0.2)
    finally:
        if driver.poll() is None:
            driver.kill()
            driver.wait(timeout=30)
        for p in _alive(procs):
            p.kill()
        err.close()
