from django.conf import settings
from django.utils import translation


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
