from django.conf import settings
from django.core.exceptions import BadRequest
from django.http import Http404
from django.urls import Resolver404, resolve
from django.utils import translation
from django.utils.cache import patch_vary_headers
from django.utils.translation import get_supported_language_variant, gettext
from django.utils.translation.trans_real import parse_accept_lang_header
from django.views.defaults import page_not_found


class LanguageMiddleware:
    """Chinese unless the person chose otherwise with the language switch.

    Unlike Django's LocaleMiddleware the pages ignore the browser's Accept-Language:
    the team works in Chinese by default, whatever the browser says. The API
    honours it (a script chooses its language there). An unknown code in the
    cookie falls back to Chinese.
    """

    def __init__(self, get_response):
        self.get_response = get_response
        self.supported = {code for code, _name in settings.LANGUAGES}

    def __call__(self, request):
        chosen = request.COOKIES.get(settings.LANGUAGE_COOKIE_NAME, "")
        if chosen in self.supported:
            language = chosen
        elif request.path_info.startswith("/api/"):
            # A script has no language switch: the API answers in the language its Accept-Language asks
            # for (a browser's own calls carry the page's cookie, so the page and its API calls agree).
            language = self.accepted(request) or settings.LANGUAGE_CODE
        else:
            language = settings.LANGUAGE_CODE
        translation.activate(language)
        request.LANGUAGE_CODE = language
        response = self.get_response(request)
        response.headers.setdefault("Content-Language", language)
        if request.path_info.startswith("/api/"):
            patch_vary_headers(response, ("Accept-Language", "Cookie"))
        translation.deactivate()
        return response

    def accepted(self, request) -> str:
        """The first supported language of the request's Accept-Language, by its weights; "" if none."""
        for code, _weight in parse_accept_lang_header(request.headers.get("Accept-Language", "")):
            if code == "*":
                continue
            try:
                return get_supported_language_variant(code)
            except LookupError:
                continue
        return ""


class StudioNotFoundMiddleware:
    """With DEBUG on (``make run``) a missing page shows the studio's 404, as in production, not Django's
    technical page listing every URL; ``TECHNICAL_404=1`` brings that page back for whoever debugs routing.

    Django decides on the technical page itself whenever DEBUG is on, for a view's Http404 and for a path
    no URL matches (raised before any view middleware runs), so both are answered here first. Last in
    MIDDLEWARE: the request has its user and language, and CommonMiddleware still adds a missing slash."""

    def __init__(self, get_response):
        self.get_response = get_response

    @staticmethod
    def wanted() -> bool:
        return settings.DEBUG and not settings.TECHNICAL_404

    def __call__(self, request):
        if self.wanted():
            try:
                resolve(request.path_info, getattr(request, "urlconf", None))
            except Resolver404 as exc:
                return page_not_found(request, exc)
        return self.get_response(request)

    def process_exception(self, request, exception):
        if self.wanted() and isinstance(exception, Http404):
            return page_not_found(request, exception)
        return None


class NulMiddleware:
    """A NUL character in a URL's path is a 404 and in its query a 400, before any view runs.

    No id, name or search of ours holds one, and PostgreSQL refuses it in a query's text (psycopg
    raises ValueError, a 500), so every view that looks up a path parameter or filters on a query
    parameter would need its own check; here is the one."""

    def __init__(self, get_response):
        self.get_response = get_response

    def __call__(self, request):
        if "\x00" in request.path_info:
            raise Http404
        if any("\x00" in name or any("\x00" in value for value in values) for name, values in request.GET.lists()):
            raise BadRequest(gettext("The request's query holds a NUL character."))
        return self.get_response(request)
