"""K12Vista Studio settings: one module, configured from the environment.

With no environment at all the studio runs on the embedded default: an SQLite
file and a Celery broker on the filesystem, both in ``DATA_DIR``. Production sets
``DATABASE_URL`` (PostgreSQL), ``CELERY_BROKER_URL`` (Redis or RabbitMQ),
``SECRET_KEY``, ``ALLOWED_HOSTS`` and ``BEHIND_TLS``. A missing or malformed value
stops start-up with a message that names the variable.
"""

from __future__ import annotations

import ipaddress
import json
import os
from pathlib import Path

import dj_database_url
from django.core.exceptions import ImproperlyConfigured
from django.utils.csp import CSP

BASE_DIR = Path(__file__).resolve().parent.parent


def env_str(name: str, default: str = "") -> str:
    return os.environ.get(name, default).strip()


def env_bool(name: str, default: bool) -> bool:
    raw = os.environ.get(name, "").strip().lower()
    if not raw:
        return default
    if raw in ("1", "true", "yes", "on"):
        return True
    if raw in ("0", "false", "no", "off"):
        return False
    raise ImproperlyConfigured(f"{name}={raw!r} is not a boolean; use 1/0, true/false, yes/no or on/off.")


def env_int(name: str, default: int, *, minimum: int = 0) -> int:
    raw = os.environ.get(name, "").strip()
    if not raw:
        return default
    try:
        value = int(raw)
    except ValueError:
        raise ImproperlyConfigured(f"{name}={raw!r} is not an integer.") from None
    if value < minimum:
        raise ImproperlyConfigured(f"{name}={value} must be at least {minimum}.")
    return value


def env_list(name: str, default: list[str]) -> list[str]:
    raw = os.environ.get(name)
    if raw is None or not raw.strip():
        return default
    return [item.strip() for item in raw.split(",") if item.strip()]


def env_json_object(name: str, default: dict[str, list[str]]) -> dict[str, list[str]]:
    """A JSON object of lists of strings, such as {"OPENAI_API_KEY": ["https://api.openai.com/v1"]}."""
    raw = os.environ.get(name, "").strip()
    if not raw:
        return default
    try:
        value = json.loads(raw)
    except ValueError:
        raise ImproperlyConfigured(f"{name} is not JSON.") from None
    if not isinstance(value, dict) or not all(
        isinstance(urls, list) and all(isinstance(url, str) for url in urls) for urls in value.values()
    ):
        raise ImproperlyConfigured(f'{name} is a JSON object of lists of URLs, such as {{"VAR": ["https://host/v1"]}}.')
    return value


DEBUG = env_bool("DEBUG", False)
DATA_DIR = Path(env_str("DATA_DIR") or BASE_DIR / "data")

SECRET_KEY = env_str("SECRET_KEY")
if not SECRET_KEY:
    if not DEBUG:
        raise ImproperlyConfigured(
            "SECRET_KEY is not set. Set SECRET_KEY (50+ random characters) or DEBUG=1 for local development."
        )
    SECRET_KEY = "insecure-development-key-only-used-with-DEBUG=1"  # noqa: S105

ALLOWED_HOSTS = env_list("ALLOWED_HOSTS", ["localhost", "127.0.0.1", "[::1]"] if DEBUG else [])
if not DEBUG and not ALLOWED_HOSTS:
    raise ImproperlyConfigured("ALLOWED_HOSTS is not set; list the host names the studio is served under.")
CSRF_TRUSTED_ORIGINS = env_list("CSRF_TRUSTED_ORIGINS", [])
# A refused form shows the studio's own page (translated, with a way back), not Django's stock one.
CSRF_FAILURE_VIEW = "k12vista.views.csrf_failure"

INSTALLED_APPS = [
    "django.contrib.admin",
    "django.contrib.auth",
    "django.contrib.contenttypes",
    "django.contrib.sessions",
    "django.contrib.messages",
    "django.contrib.staticfiles",
    "django.contrib.humanize",
    "django_htmx",
    "rest_framework",
    "rest_framework.authtoken",
    "drf_spectacular",
    "drf_spectacular_sidecar",
    "axes",
    "k12vista",
    "annotation",
    "inference",
    "pem",
    "review",
]

MIDDLEWARE = [
    # First, so that request latencies (/metrics) cover every other middleware too.
    "k12vista.metrics.RequestLatencyMiddleware",
    "django.middleware.security.SecurityMiddleware",
    "django.middleware.csp.ContentSecurityPolicyMiddleware",
    "whitenoise.middleware.WhiteNoiseMiddleware",
    # Outside the rest: it reads the finished page (its Chinese text) and names the font ranges it needs.
    "k12vista.fonts.FontPreloadMiddleware",
    "django.contrib.sessions.middleware.SessionMiddleware",
    "k12vista.middleware.LanguageMiddleware",
    "django.middleware.common.CommonMiddleware",
    "django.middleware.csrf.CsrfViewMiddleware",
    "django.contrib.auth.middleware.AuthenticationMiddleware",
    # After the user is known, so that the 404 and 400 pages render as any other.
    "k12vista.middleware.NulMiddleware",
    "django.contrib.messages.middleware.MessageMiddleware",
    "django.middleware.clickjacking.XFrameOptionsMiddleware",
    "django_htmx.middleware.HtmxMiddleware",
    # Last, so that it sees the user and counts failed logins.
    "axes.middleware.AxesMiddleware",
    # With DEBUG on: the studio's 404, not Django's technical page (TECHNICAL_404=1 for that).
    "k12vista.middleware.StudioNotFoundMiddleware",
]
TECHNICAL_404 = env_bool("TECHNICAL_404", False)

ROOT_URLCONF = "k12vista.urls"
WSGI_APPLICATION = "k12vista.wsgi.application"

TEMPLATES = [
    {
        "BACKEND": "django.template.backends.django.DjangoTemplates",
        "DIRS": [BASE_DIR / "templates"],
        "APP_DIRS": True,
        "OPTIONS": {
            "context_processors": [
                "django.template.context_processors.request",
                "django.template.context_processors.i18n",
                "django.template.context_processors.csp",
                "django.contrib.auth.context_processors.auth",
                "django.contrib.messages.context_processors.messages",
                "k12vista.context_processors.roles",
            ],
        },
    },
]

# --- Database -------------------------------------------------------------

_default_db = f"sqlite:///{DATA_DIR / 'k12vista.sqlite3'}"
try:
    DATABASES = {"default": dj_database_url.parse(env_str("DATABASE_URL") or _default_db, conn_max_age=60)}
except ValueError as exc:
    raise ImproperlyConfigured(f"DATABASE_URL is not a valid database URL: {exc}") from None

if DATABASES["default"]["ENGINE"] == "django.db.backends.sqlite3":
    Path(DATABASES["default"]["NAME"]).parent.mkdir(parents=True, exist_ok=True)
    # WAL lets the web server read while the worker writes; IMMEDIATE makes a
    # writer wait for the lock up front instead of failing half-way through.
    DATABASES["default"]["CONN_MAX_AGE"] = 0
    DATABASES["default"]["OPTIONS"] = {
        "init_command": "PRAGMA journal_mode=WAL; PRAGMA synchronous=NORMAL;",
        "transaction_mode": "IMMEDIATE",
        "timeout": 30,
    }
    # Tests start real worker processes, which cannot see an in-memory database.
    DATABASES["default"]["TEST"] = {"NAME": str(DATA_DIR / "test-k12vista.sqlite3")}

DEFAULT_AUTO_FIELD = "django.db.models.BigAutoField"

# --- Auth -----------------------------------------------------------------

AUTHENTICATION_BACKENDS = [
    "axes.backends.AxesStandaloneBackend",
    "django.contrib.auth.backends.ModelBackend",
]
AUTH_PASSWORD_VALIDATORS = [
    {"NAME": "django.contrib.auth.password_validation.UserAttributeSimilarityValidator"},
    {"NAME": "django.contrib.auth.password_validation.MinimumLengthValidator"},
    {"NAME": "django.contrib.auth.password_validation.CommonPasswordValidator"},
    {"NAME": "django.contrib.auth.password_validation.NumericPasswordValidator"},
]
# Argon2id first (k12vista/hashers.py; measured in docs/benchmarks.md). PBKDF2
# stays so that older hashes still verify; Django rehashes them with Argon2 at
# their owner's next login.
PASSWORD_HASHERS = [
    "k12vista.hashers.StudioArgon2PasswordHasher",
    "django.contrib.auth.hashers.PBKDF2PasswordHasher",
    "django.contrib.auth.hashers.PBKDF2SHA1PasswordHasher",
    "django.contrib.auth.hashers.ScryptPasswordHasher",
]
ARGON2_TIME_COST = env_int("ARGON2_TIME_COST", 2, minimum=1)
ARGON2_MEMORY_KIB = env_int("ARGON2_MEMORY_KIB", 19 * 1024, minimum=8 * 1024)
LOGIN_URL = "login"
LOGIN_REDIRECT_URL = "home"
LOGOUT_REDIRECT_URL = "login"
PASSWORD_RESET_TIMEOUT = 7 * 24 * 3600  # invitations stay valid for a week

# Login guessing: five failures for one username from one address lock that
# pair for a quarter of an hour (django-axes keeps the count in the database, so
# it holds across gunicorn workers).
AXES_FAILURE_LIMIT = env_int("LOGIN_FAILURE_LIMIT", 5, minimum=1)
AXES_COOLOFF_TIME = 0.25  # hours
AXES_LOCKOUT_PARAMETERS = [["username", "ip_address"]]
AXES_RESET_ON_SUCCESS = True
AXES_LOCKOUT_TEMPLATE = "registration/locked_out.html"
AXES_VERBOSE = False
# Behind a reverse proxy, the addresses (or networks, 10.0.0.0/8) of the proxies whose
# X-Forwarded-For is believed: the lockout pair's address is then the client's, not the
# proxy's (which every person would share). A request from anywhere else is keyed on its own
# address whatever header it sends (k12vista/client_address.py).
TRUSTED_PROXIES = env_list("TRUSTED_PROXIES", [])
for _proxy in TRUSTED_PROXIES:
    try:
        ipaddress.ip_network(_proxy, strict=False)
    except ValueError:
        raise ImproperlyConfigured(f"TRUSTED_PROXIES entry {_proxy!r} is not an address or a network.") from None
AXES_CLIENT_IP_CALLABLE = "k12vista.client_address.client_ip"

# --- Internationalisation -------------------------------------------------

LANGUAGE_CODE = "zh-hans"
LANGUAGES = [("zh-hans", "简体中文"), ("en", "English")]
LOCALE_PATHS = [BASE_DIR / "locale"]
LANGUAGE_COOKIE_NAME = "k12vista_language"
TIME_ZONE = env_str("TIME_ZONE", "Asia/Shanghai")
USE_I18N = True
USE_TZ = True

# --- Files ----------------------------------------------------------------

STATIC_URL = "static/"
STATICFILES_DIRS = [BASE_DIR / "static"]
STATIC_ROOT = Path(env_str("STATIC_ROOT") or DATA_DIR / "staticfiles")
MEDIA_URL = "media/"
MEDIA_ROOT = Path(env_str("MEDIA_ROOT") or DATA_DIR / "media")
STORAGES = {
    "default": {"BACKEND": "django.core.files.storage.FileSystemStorage"},
    "staticfiles": {
        "BACKEND": "django.contrib.staticfiles.storage.StaticFilesStorage"
        if DEBUG
        else "whitenoise.storage.CompressedManifestStaticFilesStorage"
    },
}
FILE_UPLOAD_MAX_MEMORY_SIZE = 5 * 1024 * 1024
DATA_UPLOAD_MAX_MEMORY_SIZE = 20 * 1024 * 1024
MAX_UPLOAD_BYTES = env_int("MAX_UPLOAD_BYTES", 200 * 1024 * 1024, minimum=1)
# Stored files are sent by /media/ after the access check (k12vista/files.py). By default
# Django sends them; behind nginx set SENDFILE_BACKEND=django_sendfile.backends.nginx and
# nginx sends them from the internal location SENDFILE_URL (X-Accel-Redirect; README).
# The development backend streams the file (Django's FileResponse); "simple" would read it into memory.
SENDFILE_BACKEND = env_str("SENDFILE_BACKEND") or "django_sendfile.backends.development"
SENDFILE_ROOT = MEDIA_ROOT
SENDFILE_URL = env_str("SENDFILE_URL") or "/protected-media"

# --- Security -------------------------------------------------------------

# "Behind TLS" means the studio is reached over HTTPS (usually through a proxy
# that sets X-Forwarded-Proto). Only then do HSTS, secure cookies and the
# redirect make sense; on the embedded default at http://localhost they would
# lock people out.
BEHIND_TLS = env_bool("BEHIND_TLS", not DEBUG)
SECURE_CONTENT_TYPE_NOSNIFF = True
SECURE_REFERRER_POLICY = "same-origin"
SECURE_CROSS_ORIGIN_OPENER_POLICY = "same-origin"
X_FRAME_OPTIONS = "DENY"
SESSION_COOKIE_HTTPONLY = True
SESSION_COOKIE_AGE = 12 * 3600
if BEHIND_TLS:
    SECURE_PROXY_SSL_HEADER = ("HTTP_X_FORWARDED_PROTO", "https")
    SECURE_SSL_REDIRECT = env_bool("SECURE_SSL_REDIRECT", True)
    SECURE_HSTS_SECONDS = env_int("SECURE_HSTS_SECONDS", 31536000)
    SECURE_HSTS_INCLUDE_SUBDOMAINS = True
    SECURE_HSTS_PRELOAD = True
    SESSION_COOKIE_SECURE = True
    CSRF_COOKIE_SECURE = True
    LANGUAGE_COOKIE_SECURE = True

# Enforced, not report-only. Scripts only from our own static files (htmx and
# KaTeX are vendored). KaTeX sizes glyphs with inline style attributes, so
# style-src needs 'unsafe-inline'; scripts never do.
SECURE_CSP = {
    "default-src": [CSP.SELF],
    "script-src": [CSP.SELF],
    "style-src": [CSP.SELF, CSP.UNSAFE_INLINE],
    "img-src": [CSP.SELF, "data:", "blob:"],
    "font-src": [CSP.SELF, "data:"],
    "connect-src": [CSP.SELF],
    "object-src": [CSP.NONE],
    "base-uri": [CSP.SELF],
    "form-action": [CSP.SELF],
    "frame-ancestors": [CSP.NONE],
}

# --- Caches ---------------------------------------------------------------

REDIS_CACHE_URL = env_str("CACHE_URL")
CACHES = {
    "default": {
        "BACKEND": "django.core.cache.backends.redis.RedisCache",
        "LOCATION": REDIS_CACHE_URL,
        # A cache that is down or unreachable must answer fast: its callers fall back.
        "OPTIONS": {"socket_connect_timeout": 0.5, "socket_timeout": 0.5},
    }
    if REDIS_CACHE_URL
    else {"BACKEND": "django.core.cache.backends.locmem.LocMemCache"}
}

# --- REST API -------------------------------------------------------------

REST_FRAMEWORK = {
    "DEFAULT_AUTHENTICATION_CLASSES": [
        # Token first, so that a bad token is answered 401 with WWW-Authenticate.
        "rest_framework.authentication.TokenAuthentication",
        "rest_framework.authentication.SessionAuthentication",
    ],
    "DEFAULT_PERMISSION_CLASSES": ["rest_framework.permissions.IsAuthenticated"],
    # orjson, refusing deep nesting, non-finite numbers, NULs and lone surrogates with a 400 (k12vista/parsers.py).
    "DEFAULT_PARSER_CLASSES": [
        "k12vista.parsers.JSONParser",
        "rest_framework.parsers.FormParser",
        "rest_framework.parsers.MultiPartParser",
    ],
    "DEFAULT_SCHEMA_CLASS": "drf_spectacular.openapi.AutoSchema",
    "DEFAULT_PAGINATION_CLASS": "k12vista.pagination.Newest",
    "PAGE_SIZE": 50,
    # Fails open while the cache is down (k12vista/throttling.py); logins are guarded by django-axes.
    "DEFAULT_THROTTLE_CLASSES": ["k12vista.throttling.FailOpenUserRateThrottle"],
    "DEFAULT_THROTTLE_RATES": {"user": "600/min"},
    # A missing object answered in the request's language, not Django's English "No X matches the given query."
    "EXCEPTION_HANDLER": "k12vista.api_errors.exception_handler",
}
SPECTACULAR_SETTINGS = {
    "TITLE": "K12Vista Studio API",
    "DESCRIPTION": "Question bank, inference runs, PEBench and audits of the K12Vista benchmark.",
    "VERSION": "0.1.0",
    "SERVE_INCLUDE_SCHEMA": False,
    "SWAGGER_UI_DIST": "SIDECAR",
    "SWAGGER_UI_FAVICON_HREF": "SIDECAR",
    "REDOC_DIST": "SIDECAR",
    # Three models have a "status" field with different choices.
    "ENUM_NAME_OVERRIDES": {
        "JobStatusEnum": "k12vista.models.Job.Status",
        "QuestionStatusEnum": "annotation.models.Question.Status",
        "ResponseStatusEnum": "inference.models.Response.Status",
        "JudgmentStatusEnum": "inference.models.Judgment.Status",
        "EndpointKindEnum": "inference.models.ModelEndpoint.Kind",
        "AssistKindEnum": "inference.models.AssistRun.Kind",
        "ReworkStageEnum": "review.models.Stage",  # the pipeline stage a failed item goes back to
        "StageEnum": "k12vista.vocabulary.Stage",  # the school stage (primary, middle, high)
        "ReleaseStatusEnum": "k12vista.releases.ReleaseBase.Status",  # a PEBench release's list and detail
        "AgreementScaleEnum": "pem.ratings.SCALES",  # a ratings report's scale and Krippendorff's metric
    },
}

# --- Celery ---------------------------------------------------------------

BROKER_DIR = DATA_DIR / "broker"
CELERY_BROKER_URL = env_str("CELERY_BROKER_URL") or "filesystem://"
if CELERY_BROKER_URL.split("://", 1)[0] not in ("filesystem", "redis", "rediss", "amqp", "amqps", "pyamqp", "memory"):
    raise ImproperlyConfigured(
        f"CELERY_BROKER_URL={CELERY_BROKER_URL!r} has an unsupported scheme; use redis://, amqp:// or filesystem://."
    )
if CELERY_BROKER_URL.startswith("filesystem://"):
    # One folder for producers and consumers: the web server and the worker run
    # on the same machine in the embedded default. k12vista.broker writes and takes each
    # message whole, so several workers can share the folder.
    CELERY_BROKER_TRANSPORT = "k12vista.broker:Transport"
    CELERY_BROKER_TRANSPORT_OPTIONS = {
        "data_folder_in": str(BROKER_DIR / "queue"),
        "data_folder_out": str(BROKER_DIR / "queue"),
        "control_folder": str(BROKER_DIR / "control"),
        "store_processed": False,
    }
# Job status lives on our own Job model, so no result backend is needed.
CELERY_TASK_IGNORE_RESULT = True
CELERY_TASK_ACKS_LATE = True  # safe: run_job claims its Job row before working
CELERY_TASK_REJECT_ON_WORKER_LOST = True
# A job start must not hang a page when the broker is down: one quick retry,
# then the job waits for the sweeper (jobs.send_message).
CELERY_TASK_PUBLISH_RETRY_POLICY = {"max_retries": 1, "interval_start": 0, "interval_step": 0.2, "interval_max": 0.2}
CELERY_BROKER_CONNECTION_TIMEOUT = 2
CELERY_WORKER_PREFETCH_MULTIPLIER = 1
CELERY_TASK_DEFAULT_QUEUE = "cpu"
CELERY_BROKER_CONNECTION_RETRY_ON_STARTUP = True
CELERY_TASK_SERIALIZER = "json"
CELERY_ACCEPT_CONTENT = ["json"]

# A running job whose heartbeat is older than this is taken to belong to a dead
# worker, and a re-delivered message may take it over.
JOB_STALE_AFTER_SECONDS = env_int("JOB_STALE_AFTER_SECONDS", 300, minimum=5)
# Every worker sweeps the Job table this often (jobs.sweep): it sends jobs whose
# message was never sent or was lost and hands dead workers' jobs to live ones.
JOB_SWEEP_INTERVAL_SECONDS = env_int("JOB_SWEEP_INTERVAL_SECONDS", 30, minimum=1)
if CELERY_BROKER_URL.split("://", 1)[0] in ("redis", "rediss"):
    # Redis hands an unacknowledged message (acks_late) to another worker after
    # this long. Not sooner than a takeover could succeed: an earlier copy finds
    # the job held and is dropped. The sweeper covers a Redis that lost the message.
    CELERY_BROKER_TRANSPORT_OPTIONS = {"visibility_timeout": JOB_STALE_AFTER_SECONDS + JOB_SWEEP_INTERVAL_SECONDS}

# --- Question bank ------------------------------------------------------

# The OCR backend for PDF pages without a usable text layer, named by class as
# Django's EMAIL_BACKEND is. annotation.ocr has the offline default (RapidOCR);
# the vision-model backend lives with the model endpoints.
OCR_BACKEND = env_str("OCR_BACKEND", "annotation.ocr.RapidOCRBackend")
# onnxruntime threads for RapidOCR. 1 by default: on cores other work shares, a second thread spins and
# doubles the CPU for a slower page; a worker with two free cores reads a page about 1.7x faster with 2.
OCR_THREADS = env_int("OCR_THREADS", 1, minimum=1)
# With OCR_BACKEND=inference.ocr_vision.VisionOCRBackend: the name of the model
# endpoint (a vision model such as Qwen2.5-VL behind vllm serve) that reads pages.
OCR_VISION_ENDPOINT = env_str("OCR_VISION_ENDPOINT")
# A vision model that cuts the pages the rules are unsure of into questions (annotation.pdf.vision);
# empty: none, the rules alone. "inference.segment_vision.VisionSegmentBackend" calls the endpoint named
# by SEGMENTATION_ENDPOINT (empty: OCR_VISION_ENDPOINT's).
SEGMENTATION_BACKEND = env_str("SEGMENTATION_BACKEND")
SEGMENTATION_ENDPOINT = env_str("SEGMENTATION_ENDPOINT")
MATHPIX_APP_ID = env_str("MATHPIX_APP_ID")
MATHPIX_APP_KEY = env_str("MATHPIX_APP_KEY")
PDF_MAX_PAGES = env_int("PDF_MAX_PAGES", 400, minimum=1)
# Figures: the longest side they are stored at, and what counts as too small or blurred. 0 keeps every
# imported JPEG and PNG byte for byte at its own size (the reference protocol sends the stored JPEG as it is,
# so a large figure reaches the model as the reference's does); still validated and measured.
FIGURE_STANDARD_SIDE_PX = env_int("FIGURE_STANDARD_SIDE_PX", 1024)
if 0 < FIGURE_STANDARD_SIDE_PX < 64:
    raise ImproperlyConfigured(f"FIGURE_STANDARD_SIDE_PX={FIGURE_STANDARD_SIDE_PX} must be 0 or at least 64.")
FIGURE_MIN_SIDE_PX = env_int("FIGURE_MIN_SIDE_PX", 100, minimum=1)
FIGURE_BLUR_THRESHOLD = float(env_int("FIGURE_BLUR_THRESHOLD", 60))

# --- Releases -------------------------------------------------------------

# The function that reports audit results for a release (the review app's; the
# question bank may not import it, so it is named here as OCR_BACKEND is).
RELEASE_AUDIT_SUMMARY = "review.reports.release_audit_summary"
# The studio commit recorded on a release; empty: `git rev-parse HEAD` at build time.
STUDIO_COMMIT = env_str("STUDIO_COMMIT")
RELEASE_PARQUET_ROWS_PER_SHARD = env_int("RELEASE_PARQUET_ROWS_PER_SHARD", 5000, minimum=1)
# Zip imports: refuse archives that would unpack past these (zip bombs).
ZIP_MAX_UNCOMPRESSED_BYTES = env_int("ZIP_MAX_UNCOMPRESSED_BYTES", 4 * 1024**3, minimum=1)
ZIP_MAX_RATIO = env_int("ZIP_MAX_RATIO", 200, minimum=1)
# Processes that prepare a large JSONL import's questions (figures, checks, KaTeX) while the job writes them.
IMPORT_WORKERS = env_int("IMPORT_WORKERS", 3, minimum=1)
# How long an annotator holds a question before it can go to someone else.
ASSIGNMENT_LOCK_MINUTES = env_int("ASSIGNMENT_LOCK_MINUTES", 120, minimum=1)

# --- Models -------------------------------------------------------------

# Where model endpoints may point: scheme://host[:port][/path], compared after
# parsing (scheme, host and port exactly, the path on a segment boundary). A port
# is a number, a range (8000-8010) or * (any); none means the scheme's default.
# The default admits the ports vllm serve / transformers serve use on this host,
# not Redis' or PostgreSQL's. Add your vLLM hosts and API providers.
MODEL_URL_ALLOWLIST = env_list("MODEL_URL_ALLOWLIST", ["http://127.0.0.1:8000-8010", "http://localhost:8000-8010"])
# The one HTTP proxy model calls may use (e.g. a lab's way out to closed APIs). The
# environment's HTTP_PROXY/ALL_PROXY are never read: they would carry prompts and keys
# to a host no setting named.
MODEL_HTTP_PROXY = env_str("MODEL_HTTP_PROXY") or None
# The only environment variables an endpoint may name for its API key: exact
# names, or a prefix ending in *. Anything else (SECRET_KEY, DATABASE_URL) is
# never read, sent or reported as set.
MODEL_API_KEY_VARIABLES = env_list("MODEL_API_KEY_VARIABLES", ["OPENAI_API_KEY", "K12VISTA_KEY_*"])
# Where each key may be sent: a JSON object from a variable (exact, or a prefix ending in *) to
# MODEL_URL_ALLOWLIST-style entries, e.g. {"K12VISTA_KEY_LAB": ["http://gpu01.lab:8001/v1"]}. A key
# goes only to a URL an entry bound to its variable admits (and the allowlist admits); a variable
# bound to nothing is sent nowhere. Endpoints are shared, so without this anyone who edits one could
# point it at their own server and receive the key.
MODEL_API_KEY_URLS = env_json_object("MODEL_API_KEY_URLS", {"OPENAI_API_KEY": ["https://api.openai.com/v1"]})
MODEL_CALL_RETRIES = env_int("MODEL_CALL_RETRIES", 4)
# A run (inference, scoring, model help) stops with one message once this many
# attempts in a row could not reach its endpoint (refused, DNS, TLS, connect
# timeout, dropped), one of them a retry; its unanswered questions stay pending.
MODEL_UNREACHABLE_AFTER = env_int("MODEL_UNREACHABLE_AFTER", 4, minimum=1)
# Seconds one server of an endpoint with replicas is set aside after it failed (no connection, a
# 5xx) while the others take its calls; after that it is tried again (inference.calls.Replicas).
MODEL_REPLICA_COOLDOWN = env_int("MODEL_REPLICA_COOLDOWN", 10, minimum=1)
# Seconds a call slot of an endpoint stays held when its run dies without giving it back (a killed
# worker): the other runs of that endpoint get it after this (inference.calls, renewed every third).
CALL_LEASE_SECONDS = env_int("CALL_LEASE_SECONDS", 60, minimum=3)
# Endpoints of kind "transformers" run small models on the worker's CPU. When the
# worker's Python lacks torch, name a Python that has it (and transformers): the
# batches then run in it as a subprocess.
TRANSFORMERS_PYTHON = env_str("TRANSFORMERS_PYTHON")
# Prometheus scrapes /metrics with "Authorization: Bearer <METRICS_TOKEN>" (admins signed in may
# read it too). Empty: no token is accepted.
METRICS_TOKEN = env_str("METRICS_TOKEN")
# How many vLLM offline engines a gpu worker keeps loaded. A job for another model first
# shuts down the least recently used one; raise it only when the models fit on the GPU together.
OFFLINE_ENGINES_PER_WORKER = env_int("OFFLINE_ENGINES_PER_WORKER", 1, minimum=1)
# An inference run over more questions than this becomes part-jobs of at most this many questions
# each (inference.run_parts), so several workers share it: io workers for HTTP endpoints, gpu workers
# for the offline engine.
RUN_PART_SIZE = env_int("RUN_PART_SIZE", 2000, minimum=1)
# The GPU classes the cluster's gpu workers come in, as <count>x<GiB per GPU>g ("1x80g,4x80g"); a
# worker of a class consumes the queue gpu-<class> (celery ... worker -Q gpu-4x80g). An offline run
# goes to the smallest class its endpoint fits (inference.gpu_classes). Empty: one "gpu" queue.
GPU_CLASSES = env_list("GPU_CLASSES", [])
# The folder holding model files for the offline engines. "Test connection" checks a model
# path only inside it (a relative model name is taken from here), so that it tells nobody
# whether any other path exists on the server.
MODEL_FILES_DIR = Path(env_str("MODEL_FILES_DIR") or DATA_DIR / "models")
# The folder holding checkouts of the K12Vista reference repository. The prompts page registers
# reference prompts only from inside it (a relative name is taken from here), so that its
# messages tell nobody whether any other path exists on the server; the management command
# register_reference_prompts, run on the server, reads any path.
REFERENCE_CHECKOUTS_DIR = Path(env_str("REFERENCE_CHECKOUTS_DIR") or DATA_DIR / "reference")
# A local folder holding a model's tokenizer.json: the token counts of the paper's Tables 2 and 3 on release
# cards (annotation.statistics); without it a stated fallback counts.
STATS_TOKENIZER_DIR = env_str("STATS_TOKENIZER_DIR")

# --- PEBench and audits --------------------------------------------------

# How many annotators label each PEBench item before it can be adjudicated.
PEM_ANNOTATORS_PER_ITEM = env_int("PEM_ANNOTATORS_PER_ITEM", 2, minimum=1)
# The labelling guideline the team works to; recorded on every label.
# Labelling submissions refresh the stored agreement report (pem.agreement_store)
# at most this often; imports, labels from scoring and judge panels refresh it at once.
AGREEMENT_REFRESH_SECONDS = env_int("AGREEMENT_REFRESH_SECONDS", 300, minimum=0)
PEM_GUIDELINE_VERSION = env_str("PEM_GUIDELINE_VERSION", "guideline.v1")
# How many inspectors rate each sampled item of an audit.
AUDIT_INSPECTORS_PER_ITEM = env_int("AUDIT_INSPECTORS_PER_ITEM", 3, minimum=1)

# --- Logging --------------------------------------------------------------

LOGGING = {
    "version": 1,
    "disable_existing_loggers": False,
    "formatters": {"plain": {"format": "%(asctime)s %(levelname)s %(name)s %(message)s"}},
    "handlers": {"console": {"class": "logging.StreamHandler", "formatter": "plain"}},
    "root": {"handlers": ["console"], "level": env_str("LOG_LEVEL", "INFO")},
    "loggers": {"axes": {"level": "WARNING"}, "httpx2": {"level": "WARNING"}, "httpx": {"level": "WARNING"}},
}

# Invitations are shown to the admin as links, so mail is optional; errors
# still go to ADMINS by mail when an SMTP host is configured.
MAILERS = {
    "default": {
        "BACKEND": env_str("EMAIL_BACKEND")
        or (
            "django.core.mail.backends.console.EmailBackend" if DEBUG else "django.core.mail.backends.smtp.EmailBackend"
        ),
        "OPTIONS": {"host": env_str("EMAIL_HOST", "localhost"), "port": env_int("EMAIL_PORT", 25, minimum=1)}
        if not DEBUG
        else {},
    }
}
DEFAULT_FROM_EMAIL = env_str("DEFAULT_FROM_EMAIL", "k12vista@localhost")

# Demo data and accounts (make run) are refused when this is off.
DEMO_MODE = env_bool("DEMO_MODE", DEBUG)
