"""A Flower deployment on 127.0.0.1 for the deployment tests: one ``flower-superlink`` and a
few ``flower-supernode`` processes, the ``flwr`` CLI with its own FLWR_HOME, runs submitted with
``flwr run`` and judged by the run's status (``flwr ls``), never by ``flwr run``'s exit code
(0 even when the run fails).

Every process gets free ports, runs in its own session (process group) and is stopped by its pid
(SIGTERM to its group, SIGKILL after a grace period); it also runs under coreutils' ``timeout``
with the deployment's ``lifetime``, so it ends even if the test runner itself is killed.
Everything it writes stays under one directory. The SuperLink runs with ``--disable-runtime-dependency-installation``: the apps run in
the environment of these executables, where privfed and flwr are installed (the SuperNodes do
not install dependencies unless told to).
"""

from __future__ import annotations

import json
import os
import shutil
import signal
import socket
import subprocess
import time
from dataclasses import dataclass, field
from pathlib import Path
from typing import Dict, List, Optional

EXECUTABLES = ("flower-superlink", "flower-supernode", "flwr")
#: Flower's processes otherwise call api.flower.ai (update check, telemetry): tests stay local.
QUIET_FLOWER = {"FLWR_DISABLE_UPDATE_CHECK": "1", "FLWR_TELEMETRY_ENABLED": "0"}


def flower_bin_dir(python: str) -> Optional[Path]:
    """The directory holding Flower's executables beside ``python`` (a venv's bin), or None."""
    d = Path(python).parent
    if all((d / e).is_file() for e in EXECUTABLES):
        return d
    return None


def free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return int(s.getsockname()[1])


def _wait_port(port: int, proc: subprocess.Popen, seconds: float, what: str, log: Path) -> None:
    deadline = time.monotonic() + seconds
    while time.monotonic() < deadline:
        if proc.poll() is not None:
            raise RuntimeError(f"{what} exited with {proc.returncode}:\n{_tail(log)}")
        with socket.socket() as s:
            s.settimeout(0.5)
            if s.connect_ex(("127.0.0.1", port)) == 0:
                return
        time.sleep(0.2)
    raise RuntimeError(f"{what} did not listen on 127.0.0.1:{port} within {seconds} s:\n"
                       f"{_tail(log)}")


def _tail(path: Path, chars: int = 4000) -> str:
    try:
        return path.read_text(errors="replace")[-chars:]
    except OSError:
        return ""


@dataclass
class Process:
    name: str
    proc: subprocess.Popen
    log: Path

    def stop(self, grace: float = 10.0) -> None:
        """SIGTERM to the process's group (it and the SuperExec/app processes it started),
        SIGKILL after ``grace`` seconds."""
        if self.proc.poll() is not None:
            return
        try:
            os.killpg(self.proc.pid, signal.SIGTERM)
        except ProcessLookupError:
            return
        try:
            self.proc.wait(grace)
        except subprocess.TimeoutExpired:
            self.kill()

    def kill(self) -> None:
        """SIGKILL to the process's group: a crash, no goodbye to the SuperLink."""
        try:
            os.killpg(self.proc.pid, signal.SIGKILL)
        except ProcessLookupError:
            pass
        self.proc.wait(10)


@dataclass
class RunResult:
    run_id: str
    status: str  # e.g. finished:completed, finished:failed
    details: str
    seconds: float  # from submission to the finished status
    log: str  # the run's log (flwr log --show)


@dataclass
class Deployment:
    """``node_configs[i]`` is SuperNode i's ``--node-config`` (a dict of TOML values)."""

    bin_dir: Path
    workdir: Path
    node_configs: List[Dict[str, object]]
    lifetime: float = 1800.0  # seconds any process may live (then timeout ends it)
    processes: List[Process] = field(default_factory=list)
    supernodes: List[Process] = field(default_factory=list)
    port: int = 0

    def _env(self, home: Path) -> Dict[str, str]:
        env = dict(os.environ)
        env["FLWR_HOME"] = str(home)
        env["PATH"] = str(self.bin_dir) + os.pathsep + env.get("PATH", "")
        env["PYTHONUNBUFFERED"] = "1"
        env.update(QUIET_FLOWER)
        return env

    def _spawn(self, name: str, args: List[str], home: Path) -> Process:
        home.mkdir(parents=True, exist_ok=True)
        log = self.workdir / f"{name}.log"
        cmd = [str(self.bin_dir / args[0]), *args[1:]]
        bound = shutil.which("timeout")
        if bound:
            cmd = [bound, "--kill-after=10", str(int(self.lifetime)), *cmd]
        with open(log, "wb") as out:
            proc = subprocess.Popen(cmd, env=self._env(home),
                                    stdout=out, stderr=subprocess.STDOUT,
                                    stdin=subprocess.DEVNULL, start_new_session=True,
                                    cwd=self.workdir)
        p = Process(name, proc, log)
        self.processes.append(p)
        return p

    def start(self) -> "Deployment":
        self.workdir.mkdir(parents=True, exist_ok=True)
        self.port = free_port()
        link = self._spawn("superlink", [
            "flower-superlink", "--insecure", "--host", "127.0.0.1", "--port", str(self.port),
            "--disable-runtime-dependency-installation"], self.workdir / "home-superlink")
        _wait_port(self.port, link.proc, 60, "flower-superlink", link.log)
        for i, cfg in enumerate(self.node_configs):
            node_config = " ".join(f"{k}={json.dumps(v)}" for k, v in cfg.items())
            sn = self._spawn(f"supernode-{i}", [
                "flower-supernode", "--insecure", "--superlink", f"127.0.0.1:{self.port}",
                "--host", "127.0.0.1", "--port", str(free_port()), "--isolation", "subprocess",
                "--node-config", node_config], self.workdir / f"home-supernode-{i}")
            self.supernodes.append(sn)
        cli_home = self.workdir / "home-cli"
        cli_home.mkdir(parents=True, exist_ok=True)
        (cli_home / "config.toml").write_text(
            '[superlink]\ndefault = "e2e"\n\n[superlink.e2e]\n'
            f'address = "127.0.0.1:{self.port}"\ninsecure = true\n')
        return self

    def stop(self) -> None:
        for p in reversed(self.processes):
            p.stop()

    def __enter__(self) -> "Deployment":
        return self.start()

    def __exit__(self, *exc) -> None:
        self.stop()

    # ------------------------------------------------------------------ the CLI
    def flwr(self, *args: str, timeout: float = 60) -> subprocess.CompletedProcess:
        return subprocess.run([str(self.bin_dir / "flwr"), *args],
                              env=self._env(self.workdir / "home-cli"), cwd=self.workdir,
                              capture_output=True, text=True, timeout=timeout)

    def submit(self, app: Path, run_config: Dict[str, object]) -> str:
        """``flwr run`` of a copy of ``app`` (the CLI may rewrite a legacy pyproject) with
        ``run_config`` (written to a TOML file); returns the run id."""
        copy = self.workdir / f"app-{len(list(self.workdir.glob('app-*')))}"
        shutil.copytree(app, copy, ignore=shutil.ignore_patterns(
            "__pycache__", "*.egg-info", "build", "dist", ".*"))
        cfg = copy / "run-config.toml"
        cfg.write_text("".join(f"{k} = {json.dumps(v)}\n" for k, v in run_config.items()))
        out = self.flwr("run", str(copy), "e2e", "--run-config", str(cfg), "--format", "json",
                        timeout=120)
        try:
            doc = json.loads(out.stdout)
        except json.JSONDecodeError:
            raise RuntimeError(f"flwr run printed no JSON:\n{out.stdout}\n{out.stderr}")
        if not doc.get("success") or "run-id" not in doc:
            raise RuntimeError(f"flwr run refused the app: {out.stdout}\n{out.stderr}")
        return str(doc["run-id"])

    def status(self, run_id: str) -> Dict[str, object]:
        out = self.flwr("ls", "e2e", "--run-id", run_id, "--format", "json")
        doc = json.loads(out.stdout)
        (run,) = [r for r in doc["runs"] if str(r["run-id"]) == run_id]
        return run

    def wait(self, run_id: str, seconds: float, t0: Optional[float] = None) -> RunResult:
        """Polls the run's status until it is finished (or ``seconds`` pass: then the run is
        stopped and reported as timed out)."""
        t0 = time.monotonic() if t0 is None else t0
        deadline = t0 + seconds
        run: Dict[str, object] = {}
        while time.monotonic() < deadline:
            run = self.status(run_id)
            if str(run["status"]).startswith("finished"):
                break
            time.sleep(1.0)
        else:
            self.flwr("stop", run_id, "e2e")
            run = {"status": f"timed out after {seconds} s (last: {run.get('status')})",
                   "status-details": ""}
        elapsed = time.monotonic() - t0
        log = self.flwr("log", run_id, "e2e", "--show").stdout
        (self.workdir / f"run-{run_id}.log").write_text(log)
        return RunResult(run_id, str(run["status"]), str(run.get("status-details", "")),
                         elapsed, log)

    def logs(self) -> str:
        """The tails of every process's log (for a failing test's message)."""
        return "\n".join(f"--- {p.name}\n{_tail(p.log, 2500)}" for p in self.processes)


def pid_listening_on(port: int) -> Optional[int]:
    """The pid of the process with a TCP socket listening on 127.0.0.1:``port`` (from /proc:
    the socket's inode in /proc/net/tcp, then the process holding it), or None."""
    want = f"0100007F:{port:04X}"
    inode = None
    try:
        for line in Path("/proc/net/tcp").read_text().splitlines()[1:]:
            f = line.split()
            if f[1] == want and f[3] == "0A":  # 0A: LISTEN
                inode = f[9]
                break
    except OSError:
        return None
    if inode is None:
        return None
    target = f"socket:[{inode}]"
    for proc in Path("/proc").iterdir():
        if not proc.name.isdigit():
            continue
        try:
            for fd in (proc / "fd").iterdir():
                if os.readlink(fd) == target:
                    return int(proc.name)
        except OSError:
            continue
    return None
