"""Editing and switching off a model endpoint through the API (issue 29): the endpoint form page's save and
the list's "switch off", with the same services (save_endpoint's URL allowlist, deactivate_endpoint) and the
same role rule (researchers and administrators, inference/views.py: get_endpoint_for_user)."""

from __future__ import annotations

import copy
from typing import Any

from drf_spectacular.utils import extend_schema
from rest_framework import serializers
from rest_framework.decorators import api_view, permission_classes
from rest_framework.exceptions import ValidationError
from rest_framework.request import Request
from rest_framework.response import Response

from inference import services
from inference.api import MANAGERS, EndpointInput, EndpointOutput
from inference.views import get_endpoint_for_user


class EndpointEditInput(EndpointInput):
    """The fields to change (the others stay as they are), and ``active`` as the form has it."""

    active = serializers.BooleanField(required=False, help_text="false switches the endpoint off, true back on")

    class Meta(EndpointInput.Meta):
        fields = [*EndpointInput.Meta.fields, "active"]

    def validate(self, attrs: dict) -> dict:
        # The kind-dependent checks read the endpoint as it will be: the stored fields under the changed ones.
        endpoint = self.instance
        super().validate({"kind": endpoint.kind, "base_url": endpoint.base_url, **attrs} if endpoint else attrs)
        return attrs


@extend_schema(methods=["GET"], responses={200: EndpointOutput})
@extend_schema(methods=["PATCH"], request=EndpointEditInput, responses={200: EndpointOutput})
@api_view(["GET", "PATCH"])
@permission_classes([MANAGERS])
def endpoint_detail(request: Request, pk: int) -> Response:
    """GET: the endpoint. PATCH: changes the fields given, through the same checks as the endpoint form
    (the URL allowlist, the key variable, the replicas); a refused change writes nothing."""
    endpoint = get_endpoint_for_user(request.user, pk)
    if request.method == "GET":
        return Response(EndpointOutput(endpoint).data)
    given = EndpointEditInput(endpoint, data=request.data, partial=True)
    given.is_valid(raise_exception=True)
    changed = copy.copy(endpoint)
    data: dict[str, Any] = given.validated_data
    for name, value in data.items():
        setattr(changed, name, value)
    try:
        saved = services.save_endpoint(endpoint=changed, user=request.user)
    except services.EndpointError as exc:
        field = "replica_urls" if isinstance(exc, services.ReplicaError) else "base_url"
        raise ValidationError({field: [str(exc)]}) from exc
    return Response(EndpointOutput(saved).data)


@extend_schema(request=None, responses={200: EndpointOutput})
@api_view(["POST"])
@permission_classes([MANAGERS])
def endpoint_deactivate(request: Request, pk: int) -> Response:
    """Switches the endpoint off (as the list's button): no new run or scoring chooses it; its runs stay."""
    endpoint = services.deactivate_endpoint(endpoint=get_endpoint_for_user(request.user, pk))
    return Response(EndpointOutput(endpoint).data)
