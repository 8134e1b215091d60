from drf_spectacular.utils import OpenApiParameter, extend_schema
from rest_framework import generics, pagination

from annotation.forms import QuestionFilterForm
from annotation.models import Question
from annotation.serializers import QuestionSerializer
from k12vista.roles import HasRole, Role

BROWSERS = HasRole(Role.RESEARCHER, Role.INSPECTOR, Role.ADMIN)
FILTERS = [OpenApiParameter(name, str, description=f"filter by {name}") for name in QuestionFilterForm.base_fields]


class QuestionPages(pagination.CursorPagination):
    ordering = "id"  # keyset: as fast on the last page of 300,000 as on the first
    page_size = 100
    max_page_size = 1000
    page_size_query_param = "page_size"


@extend_schema(parameters=FILTERS)
class QuestionList(generics.ListAPIView):
    serializer_class = QuestionSerializer
    permission_classes = [BROWSERS]
    pagination_class = QuestionPages

    def get_queryset(self):
        form = QuestionFilterForm(self.request.query_params)
        filters = form.cleaned_data if form.is_valid() else {}
        return Question.objects.matching(filters).prefetch_related("knowledge_points", "figures", "flags")


class QuestionDetail(generics.RetrieveAPIView):
    serializer_class = QuestionSerializer
    permission_classes = [BROWSERS]
    lookup_field = "hash_id"
    queryset = Question.objects.prefetch_related("knowledge_points", "figures", "flags")
