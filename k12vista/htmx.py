"""The request type of views that read ``request.htmx``.

django-htmx's middleware sets the attribute at run time but Django's ``HttpRequest`` does not declare it, so
such a view annotates its request with this class (as django-htmx's documentation advises) for mypy to know it.
"""

from django.http import HttpRequest
from django_htmx.middleware import HtmxDetails


class HtmxHttpRequest(HttpRequest):
    htmx: HtmxDetails  # set by django_htmx.middleware.HtmxMiddleware on every request
