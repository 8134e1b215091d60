from django.conf import settings
from django.core.exceptions import BadRequest
from django.http import Http404
from django.utils import translation
from django.utils.translation import gettext


class LanguageMiddleware:
    """Chinese unless the person chose otherwise with the language switch.

    Unlike Django's LocaleMiddleware this ignores the browser's Accept-Language:
    the team works in Chinese by default, whatever the browser says. An unknown
    code in the cookie falls back to Chinese.
    """

    def __init__(self, get_response):
        self.get_response = get_response
        self.supported = {code for code, _name in settings.LANGUAGES}

    def __call__(self, request):
        chosen = request.COOKIES.get(settings.LANGUAGE_COOKIE_NAME, "")
        language = chosen if chosen in self.supported else settings.LANGUAGE_CODE
        translation.activate(language)
        request.LANGUAGE_CODE = language
        response = self.get_response(request)
        response.headers.setdefault("Content-Language", language)
        translation.deactivate()
        return response


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
