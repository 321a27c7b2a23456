"""The console made safe to expose, in a real Chromium: HTTPS with the brokers' own PEM key store, a
login checked against the cluster's SASL (PLAIN here), every page read as the logged-in user (so the
cluster's ACLs decide what each sees), log out, Secure / HttpOnly / SameSite=Strict session cookies,
CSRF tokens and same-origin checks on every change; and an open console, read-only by default."""

from __future__ import annotations

import http.cookiejar
import ssl
import subprocess
import sys
import urllib.error
import urllib.parse
import urllib.request
from collections.abc import Iterator

import pytest
from confluent_kafka.admin import (
    AclBinding,
    AclOperation,
    AclPermissionType,
    AdminClient,
    NewTopic,
    ResourcePatternType,
    ResourceType,
)

from odradek.testing.broker import free_port
from tests.console.browsing import submit, visit
from tests.console.conftest import chromium
from tests.security.sasl_brokers import ADMIN, ADMIN_PASSWORD, ALICE, ALICE_PASSWORD
from tests.security.secured_broker import Broker, sasl_ssl_broker

VISIBLE, HIDDEN = "alice-may-see", "alice-may-not"


@pytest.fixture(scope="module")
def secured(tmp_path_factory: pytest.TempPathFactory) -> Iterator[tuple[Broker, str]]:
    port = free_port()
    extra = {
        "authorizer.class.name": "kafka.security.authorizer.AclAuthorizer",
        "super.users": f"User:{ADMIN}",
        "http.listeners": f"https://127.0.0.1:{port}",
        "console.authentication": "sasl",
    }
    with sasl_ssl_broker(tmp_path_factory.mktemp("console-secured"), **extra) as broker:
        admin = AdminClient(broker.confluent("PLAIN", ADMIN, ADMIN_PASSWORD))
        for future in admin.create_topics([NewTopic(VISIBLE, 1), NewTopic(HIDDEN, 1)]).values():
            future.result(30)
        binding = AclBinding(
            ResourceType.TOPIC,
            VISIBLE,
            ResourcePatternType.LITERAL,
            f"User:{ALICE}",
            "*",
            AclOperation.DESCRIBE,
            AclPermissionType.ALLOW,
        )
        for future in admin.create_acls([binding]).values():
            future.result(30)
        yield broker, f"https://127.0.0.1:{port}"


@pytest.fixture(scope="module")
def browser() -> Iterator[object]:
    """Chromium trusting any certificate (the broker's comes from a CA made by the test)."""
    with chromium("--ignore-certificate-errors") as driver:
        yield driver


def _opener(broker: Broker) -> tuple[urllib.request.OpenerDirector, http.cookiejar.CookieJar]:
    """A client that verifies the console's certificate against the test CA and keeps cookies, and
    does not follow redirects (so each answer is seen as sent)."""

    class NoRedirect(urllib.request.HTTPRedirectHandler):
        def redirect_request(self, *args: object, **kwargs: object) -> None:
            return None

    jar = http.cookiejar.CookieJar()
    context = ssl.create_default_context(cafile=str(broker.pki.ca.cert_path))
    opener = urllib.request.build_opener(
        urllib.request.HTTPSHandler(context=context), urllib.request.HTTPCookieProcessor(jar), NoRedirect
    )
    return opener, jar


def _answer(opener: urllib.request.OpenerDirector, request: urllib.request.Request) -> tuple[int, dict, str]:
    try:
        with opener.open(request, timeout=30) as response:
            return response.status, dict(response.headers), response.read().decode()
    except urllib.error.HTTPError as answer:
        with answer:
            return answer.code, dict(answer.headers), answer.read().decode()


def test_a_user_logs_in_with_the_clusters_credentials_and_sees_what_the_acls_allow(
    secured, browser, screenshots
):
    broker, base = secured
    assert "Log in" in visit(browser, screenshots, base + "/topics", "security-login")
    refused = submit(browser, "form[action='/login']", username=ALICE, password="not-her-password")
    assert "The cluster refused this user name and password." in refused

    topics = submit(browser, "form[action='/login']", username=ALICE, password=ALICE_PASSWORD)
    assert f"User:{ALICE}" in topics and VISIBLE in topics and HIDDEN not in topics
    visit(browser, screenshots, base + "/topics", "security-alice-topics")
    assert "Not found" in visit(browser, screenshots, base + f"/topic?name={HIDDEN}", "security-alice-hidden")

    assert "Log in" in submit(browser, "form[action='/logout']")
    assert "Log in" in visit(browser, screenshots, base + "/topics", "security-after-logout")

    visit(browser, screenshots, base + "/login?next=/topics", "security-login-admin")
    topics = submit(browser, "form[action='/login']", username=ADMIN, password=ADMIN_PASSWORD)
    assert VISIBLE in topics and HIDDEN in topics


def test_sessions_are_secure_cookies_and_every_change_needs_its_csrf_token_and_origin(secured):
    broker, base = secured
    opener, jar = _opener(broker)
    status, headers, _ = _answer(opener, urllib.request.Request(base + "/"))
    assert status == 303 and headers["Location"].startswith("/login")  # no session: to the login page

    form = urllib.parse.urlencode({"username": ADMIN, "password": ADMIN_PASSWORD, "next": "/"}).encode()
    status, headers, _ = _answer(opener, urllib.request.Request(base + "/login", data=form))
    assert status == 303
    cookie = headers["Set-Cookie"]
    assert "HttpOnly" in cookie and "Secure" in cookie and "SameSite=Strict" in cookie

    status, headers, page = _answer(opener, urllib.request.Request(base + "/"))
    assert status == 200 and "default-src 'self'" in headers["Content-Security-Policy"]
    token = page.split('name="csrf-token" content="')[1].split('"')[0]

    status, _, page = _answer(opener, urllib.request.Request(base + "/logout", data=b"csrf_token=stale"))
    assert status == 403 and "did not come from this console" in page
    elsewhere = urllib.request.Request(
        base + "/logout", data=f"csrf_token={token}".encode(), headers={"Origin": "https://elsewhere.test"}
    )
    assert _answer(opener, elsewhere)[0] == 403
    assert _answer(opener, urllib.request.Request(base + "/"))[0] == 200  # still logged in

    status, headers, _ = _answer(
        opener, urllib.request.Request(base + "/logout", data=f"csrf_token={token}".encode())
    )
    assert status == 303 and headers["Location"] == "/login"
    assert _answer(opener, urllib.request.Request(base + "/"))[0] == 303  # the session is gone


def test_an_open_console_is_read_only_unless_configured(console_broker_at):
    _, read_only = console_broker_at()
    _, writable = console_broker_at(**{"console.read.only": "false"})
    for base, status in ((read_only, 403), (writable, 405)):  # writable: the token passes, / has no POST
        with urllib.request.urlopen(base + "/", timeout=30) as page:
            html = page.read().decode()
        assert ('<span class="badge">read-only</span>' in html) == (base == read_only)
        token = html.split('name="csrf-token" content="')[1].split('"')[0]
        request = urllib.request.Request(base + "/", data=f"csrf_token={token}".encode())
        with pytest.raises(urllib.error.HTTPError) as refused:
            urllib.request.urlopen(request, timeout=30)
        refused.value.close()
        assert refused.value.code == status


def test_the_https_listener_serves_the_brokers_certificate(secured):
    broker, base = secured
    context = ssl.create_default_context(cafile=str(broker.pki.ca.cert_path))
    with urllib.request.urlopen(base + "/login", timeout=30, context=context) as page:
        assert page.status == 200 and "Log in" in page.read().decode()
    with pytest.raises((urllib.error.URLError, ConnectionError)):  # plain HTTP is not answered
        urllib.request.urlopen(base.replace("https", "http") + "/login", timeout=30)


def test_odradek_console_logs_users_in_over_https_for_a_secured_cluster(secured, tmp_path):
    """The standalone console: --login with the cluster's SASL_SSL settings but no credentials of
    its own, https with the brokers' PEM key store; a user sees what the ACLs allow."""
    broker, _ = secured
    client = tmp_path / "client.properties"
    client.write_text(
        "security.protocol=SASL_SSL\nsasl.mechanism=PLAIN\n"
        f"ssl.truststore.type=PEM\nssl.truststore.location={broker.pki.ca.cert_path}\n"
    )
    https = tmp_path / "https.properties"
    https.write_text(f"ssl.keystore.type=PEM\nssl.keystore.location={broker.pki.broker.keystore_path}\n")
    port = free_port()
    argv = [sys.executable, "-m", "odradek", "console", "--bootstrap-server", broker.bootstrap, "--login"]
    argv += [
        "--command-config",
        str(client),
        "--https-config",
        str(https),
        "--listen",
        f"https://127.0.0.1:{port}",
    ]
    console = subprocess.Popen(argv, stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True)
    try:
        assert console.stdout is not None
        assert f"on https://127.0.0.1:{port}" in console.stdout.readline()
        opener, _ = _opener(broker)
        base = f"https://127.0.0.1:{port}"
        form = urllib.parse.urlencode({"username": ALICE, "password": ALICE_PASSWORD, "next": "/topics"})
        status, headers, _ = _answer(opener, urllib.request.Request(base + "/login", data=form.encode()))
        assert status == 303 and headers["Location"] == "/topics"
        status, _, page = _answer(opener, urllib.request.Request(base + "/topics"))
        assert status == 200 and VISIBLE in page and HIDDEN not in page
        wrong = urllib.parse.urlencode({"username": ALICE, "password": "wrong"}).encode()
        assert _answer(_opener(broker)[0], urllib.request.Request(base + "/login", data=wrong))[0] == 401
    finally:
        console.terminate()
        code = console.wait(30)
        console.stdout.close()
    assert code == 0


def test_odradek_console_refuses_https_without_a_key_store_in_one_line(secured):
    broker, _ = secured
    argv = [sys.executable, "-m", "odradek", "console", "--bootstrap-server", broker.bootstrap]
    argv += ["--listen", f"https://127.0.0.1:{free_port()}"]
    result = subprocess.run(argv, capture_output=True, text=True, timeout=60)
    assert result.returncode == 1 and result.stderr.count("\n") == 1
    assert "--https-config" in result.stderr
