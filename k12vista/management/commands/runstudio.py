import os
import signal
import socket
import subprocess
import sys
import threading

from django.conf import settings
from django.core.management import call_command
from django.core.management.base import BaseCommand, CommandError

from k12vista.management.commands.load_demo import DEMO_ACCOUNTS, DEMO_PASSWORD


class Command(BaseCommand):
    help = "Runs the web server and a Celery worker together (the embedded default). Ctrl-C stops both."

    def add_arguments(self, parser):
        parser.add_argument("--port", type=int, default=int(os.environ.get("PORT", "8000")))
        parser.add_argument("--host", default="127.0.0.1")

    def handle(self, *args, port, host, **options):
        # runserver ends the process with os._exit when its port is taken, past any cleanup of ours: a worker
        # started first would be left running. So the port is tried before anything starts.
        refusal = port_in_use(host, port)
        if refusal:
            raise CommandError(
                f"{host}:{port} cannot be served ({refusal}); nothing was started. "
                f"Stop what holds it, or choose another port: make run PORT=8001"
            )
        command = [sys.executable, "-m", "celery", "-A", "k12vista", "worker", "-Q", "cpu,io", "--loglevel", "INFO",
                   "--concurrency", "2", "--without-gossip", "--without-mingle", "--hostname", "studio@%h"]  # fmt: skip
        worker = subprocess.Popen(command)
        stopping = threading.Event()

        def keep_the_worker_running() -> None:
            # Celery's worker exits when it loses a Redis broker; start it again, as systemd would.
            nonlocal worker
            while not stopping.wait(2):
                if worker.poll() is not None:
                    self.stderr.write(f"The worker exited (code {worker.returncode}); starting it again.")
                    worker = subprocess.Popen(command)

        threading.Thread(target=keep_the_worker_running, daemon=True).start()
        url = f"http://{host}:{port}/"
        self.stdout.write(self.style.SUCCESS(f"\nK12Vista Studio: {url}"))
        if settings.DEMO_MODE:
            for username, role in DEMO_ACCOUNTS:
                self.stdout.write(f"  {role.label:<14} {username} / {DEMO_PASSWORD}")
        # The worker's JobSweeper bootstep (k12vista/celery.py) re-sends lost jobs; nothing else to start.
        self.stdout.write(
            f"The worker sweeps the job table every {settings.JOB_SWEEP_INTERVAL_SECONDS} s (lost or unsent jobs)."
        )
        self.stdout.write("Ctrl-C stops the web server and the worker.\n")
        try:
            call_command("runserver", f"{host}:{port}", use_reloader=False)
        except KeyboardInterrupt:
            pass
        finally:
            stopping.set()
            if worker.poll() is None:
                worker.send_signal(signal.SIGTERM)
                try:
                    worker.wait(timeout=20)
                except subprocess.TimeoutExpired:
                    worker.kill()


def port_in_use(host: str, port: int) -> str:
    """Why ``host:port`` cannot be listened on, or "" when it can (bound as runserver binds: address reuse on)."""
    try:
        infos = socket.getaddrinfo(host.strip("[]"), port, type=socket.SOCK_STREAM)
    except OSError as exc:
        return str(exc)
    family, kind, proto, _name, address = infos[0]
    with socket.socket(family, kind, proto) as probe:
        probe.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
        try:
            probe.bind(address)
        except OSError as exc:
            return exc.strerror or str(exc)
    return ""
