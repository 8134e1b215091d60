"""Login lockout behind a reverse proxy (issue 26, item 7): the pair locked is (username, the
client's address), the address taken from X-Forwarded-For only when the request comes from a
proxy named in TRUSTED_PROXIES; otherwise the header is ignored."""

import pytest
from django.urls import reverse

from tests.conftest import PASSWORD, make_person

pytestmark = pytest.mark.django_db

PROXY = "10.0.0.7"
ATTACKER, VICTIM = "203.0.113.5", "198.51.100.7"


@pytest.fixture(autouse=True)
def _behind_nginx(settings, annotator):
    settings.TRUSTED_PROXIES = ["10.0.0.0/29"]


def login_from(client, username, password, *, remote, forwarded=None):
    headers = {"REMOTE_ADDR": remote}
    if forwarded is not None:
        headers["HTTP_X_FORWARDED_FOR"] = forwarded
    return client.post(reverse("login"), {"username": username, "password": password}, **headers)


def test_five_failures_through_the_proxy_lock_only_their_own_address(client):
    for _ in range(5):
        login_from(client, "alice", "wrong", remote=PROXY, forwarded=ATTACKER)
    assert login_from(client, "alice", PASSWORD, remote=PROXY, forwarded=ATTACKER).status_code == 429
    client.cookies.clear()
    # Alice, at her own address behind the same proxy, logs in.
    assert login_from(client, "alice", PASSWORD, remote=PROXY, forwarded=VICTIM).status_code == 302


def test_the_pair_is_username_and_address(client):
    make_person("bob")
    for _ in range(5):
        login_from(client, "alice", "wrong", remote=PROXY, forwarded=ATTACKER)
    assert login_from(client, "bob", PASSWORD, remote=PROXY, forwarded=ATTACKER).status_code == 302


def test_an_address_the_client_wrote_itself_is_never_the_key(client):
    """Through the proxy, the client's own X-Forwarded-For stands left of what nginx appended."""
    for _ in range(5):
        login_from(client, "alice", "wrong", remote=PROXY, forwarded=f"{VICTIM}, {ATTACKER}")
    assert login_from(client, "alice", PASSWORD, remote=PROXY, forwarded=ATTACKER).status_code == 429
    client.cookies.clear()
    assert login_from(client, "alice", PASSWORD, remote=PROXY, forwarded=VICTIM).status_code == 302


def test_a_header_from_anyone_but_a_trusted_proxy_is_ignored(client):
    """Straight to gunicorn (or a proxy nobody named): new fake addresses on each try change nothing,
    and naming the victim's address does not lock the victim."""
    for i in range(5):
        login_from(client, "alice", "wrong", remote=ATTACKER, forwarded=f"192.0.2.{i}")
    assert login_from(client, "alice", PASSWORD, remote=ATTACKER, forwarded="192.0.2.99").status_code == 429
    client.cookies.clear()
    for _ in range(5):
        login_from(client, "alice", "wrong", remote="192.0.2.200", forwarded=VICTIM)
    assert login_from(client, "alice", PASSWORD, remote=PROXY, forwarded=VICTIM).status_code == 302


def test_without_trusted_proxies_the_header_means_nothing(client, settings):
    settings.TRUSTED_PROXIES = []
    for i in range(5):
        login_from(client, "alice", "wrong", remote=PROXY, forwarded=f"192.0.2.{i}")
    assert login_from(client, "alice", PASSWORD, remote=PROXY, forwarded=VICTIM).status_code == 429


@pytest.mark.parametrize("value", ["nginx", "10.0.0.300", "10.0.0.0/99"])
def test_a_malformed_trusted_proxy_stops_start_up(value):
    from tests.test_settings import run_django

    result = run_django({"DEBUG": "1", "TRUSTED_PROXIES": value}, "check")
    assert result.returncode != 0 and "TRUSTED_PROXIES" in result.stderr


def test_client_ip_reads_the_header_from_the_right(settings, rf):
    from k12vista.client_address import client_ip

    settings.TRUSTED_PROXIES = ["10.0.0.0/29", "172.16.0.1"]
    chain = {"REMOTE_ADDR": "172.16.0.1", "HTTP_X_FORWARDED_FOR": f"{VICTIM}, {ATTACKER}, 10.0.0.3"}
    assert client_ip(rf.post("/login/", **chain)) == ATTACKER  # two proxies of ours, then the client
    assert client_ip(rf.post("/login/", REMOTE_ADDR=PROXY, HTTP_X_FORWARDED_FOR="not-an-ip")) == PROXY
    assert client_ip(rf.post("/login/", REMOTE_ADDR=PROXY)) == PROXY
    assert client_ip(rf.post("/login/", REMOTE_ADDR=ATTACKER, HTTP_X_FORWARDED_FOR=VICTIM)) == ATTACKER
