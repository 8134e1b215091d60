"""Restarting a judge panel through the API (issue 29): the panel page's restart, with the same service
(pem.panel.restart_panel) and access rule (pem/pipeline_views.py: get_panel_for_user)."""

from __future__ import annotations

from drf_spectacular.utils import extend_schema
from rest_framework import status
from rest_framework.decorators import api_view, permission_classes
from rest_framework.exceptions import ValidationError
from rest_framework.request import Request
from rest_framework.response import Response

from pem import panel
from pem.pipeline_api import MANAGERS, PanelOutput
from pem.pipeline_views import get_panel_for_user


@extend_schema(request=None, responses={202: PanelOutput})
@api_view(["POST"])
@permission_classes([MANAGERS])
def panel_restart(request: Request, pk: int) -> Response:
    """Judges again what failed (a failed call, an unreadable output), then votes again: 202 with the panel and
    its new job; a panel still running is a 400."""
    found = get_panel_for_user(request.user, pk)
    try:
        panel.restart_panel(panel=found, user=request.user)
    except panel.PanelError as exc:
        raise ValidationError({"detail": [str(exc)]}) from exc
    return Response(PanelOutput(found).data, status=status.HTTP_202_ACCEPTED)
