from drf_spectacular.utils import OpenApiParameter, extend_schema
from rest_framework import generics

from annotation.forms import QuestionFilterForm
from annotation.models import Question
from annotation.serializers import QuestionSerializer
from k12vista.pagination import ById
from k12vista.roles import HasRole, Role

BROWSERS = HasRole(Role.RESEARCHER, Role.INSPECTOR, Role.ADMIN)
FILTERS = [OpenApiParameter(name, str, description=f"filter by {name}") for name in QuestionFilterForm.base_fields]


@extend_schema(parameters=FILTERS)
class QuestionList(generics.ListAPIView):
    serializer_class = QuestionSerializer
    permission_classes = [BROWSERS]
    pagination_class = ById

    def get_queryset(self):
        form = QuestionFilterForm(self.request.query_params)
        filters = form.cleaned_data if form.is_valid() else {}
        return Question.objects.matching(filters).prefetch_related("knowledge_points", "figures", "flags")


class QuestionDetail(generics.RetrieveAPIView):
    serializer_class = QuestionSerializer
    permission_classes = [BROWSERS]
    lookup_field = "hash_id"
    queryset = Question.objects.prefetch_related("knowledge_points", "figures", "flags")
