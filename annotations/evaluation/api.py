"""The evaluation API: ``POST /api/studies/{id}/evaluations/`` (a search evaluation) and
``POST /api/studies/{id}/evaluations/final/`` (the holdout's final report), authenticated by
an evaluation token (``Authorization: Evaluation <token>``), never by a user's token or
session. Views parse nothing themselves: ``services.evaluate.evaluation_submit`` checks,
computes and logs."""

from __future__ import annotations

from django.contrib.auth.models import AnonymousUser
from drf_spectacular.extensions import OpenApiAuthenticationExtension
from drf_spectacular.utils import OpenApiResponse, extend_schema
from rest_framework import exceptions, serializers, status
from rest_framework.authentication import BaseAuthentication, get_authorization_header
from rest_framework.permissions import BasePermission
from rest_framework.response import Response
from rest_framework.throttling import SimpleRateThrottle
from rest_framework.views import APIView

from annotations.evaluation.models import EvaluationCall, EvaluationToken
from annotations.evaluation.services.evaluate import call_rejected_log, evaluation_submit
from annotations.evaluation.services.tokens import token_lookup

KEYWORD = "Evaluation"


class EvaluationTokenAuthentication(BaseAuthentication):
    """``Authorization: Evaluation <token>``: ``request.auth`` is the
    :class:`EvaluationToken` (revoked ones too: the evaluation refuses and logs them)."""

    def authenticate(self, request):
        parts = get_authorization_header(request).split()
        if not parts or parts[0].lower() != KEYWORD.lower().encode():
            return None
        if len(parts) != 2:
            raise exceptions.AuthenticationFailed("Give one token: 'Evaluation <token>'.")
        try:
            raw = parts[1].decode()
        except UnicodeDecodeError:
            raise exceptions.AuthenticationFailed("Unknown evaluation token.") from None
        token = token_lookup(raw)
        if token is None:
            raise exceptions.AuthenticationFailed("Unknown evaluation token.")
        return AnonymousUser(), token

    def authenticate_header(self, request) -> str:
        return KEYWORD


class EvaluationTokenScheme(OpenApiAuthenticationExtension):
    target_class = EvaluationTokenAuthentication
    name = "evaluationToken"

    def get_security_definition(self, auto_schema):
        return {"type": "apiKey", "in": "header", "name": "Authorization",
                "description": "`Evaluation <token>`: a token a researcher created for one "
                               "study (admin → Evaluation tokens)."}


class HasEvaluationToken(BasePermission):
    def has_permission(self, request, view) -> bool:
        return isinstance(request.auth, EvaluationToken)


class EvaluationTokenThrottle(SimpleRateThrottle):
    """Calls per token (rejected ones included), apart from users' throttles."""

    scope = "evaluation"
    rate = "120/minute"

    def get_cache_key(self, request, view):
        if isinstance(request.auth, EvaluationToken):
            return self.cache_format % {"scope": self.scope, "ident": request.auth.pk}
        return self.cache_format % {"scope": self.scope, "ident": self.get_ident(request)}


class PredictionEntrySerializer(serializers.Serializer):
    item = serializers.CharField(help_text="The item's id as exported (its external id).")
    prediction = serializers.CharField(required=False, allow_null=True,
                                       help_text="The predicted option's text (null: none).")
    index = serializers.IntegerField(required=False, help_text="Or the option's 0-based "
                                     "index in the item's original order.")


class EvaluationRequestSerializer(serializers.Serializer):
    candidate = serializers.CharField(max_length=200, help_text="The candidate's name.")
    predictions = PredictionEntrySerializer(many=True)


class SourceCellSerializer(serializers.Serializer):
    accuracy = serializers.FloatField(required=False, allow_null=True)
    raw = serializers.FloatField(required=False, allow_null=True,
                                 help_text="comp: the unbiased estimate, may leave [0, 1]")
    clipped = serializers.FloatField(required=False, allow_null=True)
    se = serializers.FloatField(allow_null=True)
    ci_low = serializers.FloatField(allow_null=True)
    ci_high = serializers.FloatField(allow_null=True)
    bound = serializers.FloatField(required=False, allow_null=True,
                                   help_text="finite-sample half-width (95 %)")
    weight = serializers.FloatField(required=False, allow_null=True)


class DesignCellSerializer(serializers.Serializer):
    accuracy = serializers.FloatField(help_text="The design-weighted (inverse-probability) "
                                      "estimate from every answer of the scored items.")
    se = serializers.FloatField()
    ci_low = serializers.FloatField()
    ci_high = serializers.FloatField()
    approximate = serializers.BooleanField(help_text="The interval rests on few decisive "
                                           "items or one heavy weight.")
    answers = serializers.IntegerField(help_text="Answers read (chains end at 'not sure').")
    items = serializers.IntegerField()
    interval_method = serializers.CharField()


class EstimatesSerializer(serializers.Serializer):
    n_o = serializers.FloatField(help_text="Ordinary labels ('yes'); on a study with "
                                 "targeted answers, of the uniform part only.")
    n_c = serializers.FloatField(help_text="Complementary labels ('no'); on a study with "
                                 "targeted answers, of the uniform part only.")
    q_hat = serializers.FloatField(allow_null=True)
    comp = SourceCellSerializer(allow_null=True, help_text="On a study with targeted "
                                "answers: from the uniform part of the answers.")
    ivw = SourceCellSerializer(allow_null=True, help_text="Idem.")
    ml = SourceCellSerializer(allow_null=True, help_text="Idem.")
    design = DesignCellSerializer(required=False, help_text="Only on a study with targeted "
                                  "answers (a targeted routing design): the score's "
                                  "estimate, from every answer.")
    confidence = serializers.FloatField()
    interval_method = serializers.CharField()


class LadderSerializer(serializers.Serializer):
    margin = serializers.FloatField()
    improved = serializers.BooleanField()


class BudgetSerializer(serializers.Serializer):
    daily = serializers.IntegerField()
    used = serializers.IntegerField()
    left = serializers.IntegerField()


class EvaluationResultSerializer(serializers.Serializer):
    candidate = serializers.CharField()
    kind = serializers.ChoiceField(choices=EvaluationCall.Kind.choices)
    items_submitted = serializers.IntegerField()
    items_used = serializers.IntegerField(help_text="Items with an answered query, scored.")
    items_not_evaluated = serializers.IntegerField(
        help_text="Submitted items not scored (no answered query, or held out): a count only.")
    score = serializers.FloatField(help_text="The fitness score: the ML estimate (on a "
                                   "study with targeted answers the design-weighted "
                                   "estimate, see score_method), or with the Ladder on the "
                                   "Ladder's released value.")
    score_method = serializers.CharField(required=False, help_text="Only on a study with "
                                         "targeted answers: 'design' (the score is the "
                                         "design-weighted estimate; absent: ML).")
    estimates = EstimatesSerializer(allow_null=True, help_text="Every figure (null with the "
                                    "Ladder on: only its score is released).")
    ladder = LadderSerializer(allow_null=True)
    budget = BudgetSerializer()


class RejectionSerializer(serializers.Serializer):
    code = serializers.CharField()
    detail = serializers.CharField()
    errors = serializers.ListField(child=serializers.DictField(), required=False,
                                   help_text="The offending entries of the request: entry "
                                   "(index), item (as sent), field, problem.")


REJECTIONS = {
    400: OpenApiResponse(RejectionSerializer, description="Invalid entries (unknown ids, "
                         "duplicates, bad index, wrong types, empty), or too few items "
                         "evaluated (below the minimum batch); nothing evaluated."),
    401: OpenApiResponse(RejectionSerializer, description="No or unknown evaluation token."),
    403: OpenApiResponse(RejectionSerializer, description="Revoked token, or another study's."),
    409: OpenApiResponse(RejectionSerializer, description="Final report already made."),
    413: OpenApiResponse(RejectionSerializer, description="More predictions than the maximum."),
    429: OpenApiResponse(RejectionSerializer, description="Daily budget or final reports "
                         "spent (code budget_spent / final_spent), or too many calls a "
                         "minute (throttled: retry later)."),
}


class _EvaluationApi(APIView):
    authentication_classes = [EvaluationTokenAuthentication]
    permission_classes = [HasEvaluationToken]
    throttle_classes = [EvaluationTokenThrottle]
    kind = EvaluationCall.Kind.SEARCH

    def post(self, request, study_id: int):
        try:
            body = request.data
        except exceptions.ParseError as exc:  # logged too: every call of a token is
            call_rejected_log(token=request.auth, kind=self.kind, candidate="", n_items=0,
                              reason=f"parse_error: {exc.detail}")
            raise
        released = evaluation_submit(token=request.auth, study_id=study_id, body=body,
                                     kind=self.kind)
        return Response(released, status=status.HTTP_201_CREATED)

    def throttled(self, request, wait):
        if isinstance(request.auth, EvaluationToken):
            call_rejected_log(token=request.auth, kind=self.kind, candidate="", n_items=0,
                              reason="throttled: more calls a minute than the token's rate")
        super().throttled(request, wait)


class EvaluationApi(_EvaluationApi):
    @extend_schema(request=EvaluationRequestSerializer,
                   responses={201: EvaluationResultSerializer, **REJECTIONS},
                   summary="Evaluate a candidate's predictions (evaluation token)",
                   description="The candidate's estimated accuracy from the study's labels "
                   "(holdout excluded), by the estimator engine (ML; on a study with "
                   "targeted routing answers the design-weighted estimate). With the "
                   "token's Ladder on only the Ladder's score is released. Every call is "
                   "logged.")
    def post(self, request, study_id: int):
        return super().post(request, study_id)


class EvaluationFinalApi(_EvaluationApi):
    kind = EvaluationCall.Kind.FINAL

    @extend_schema(request=EvaluationRequestSerializer,
                   responses={201: EvaluationResultSerializer, **REJECTIONS},
                   summary="Final report of a chosen candidate on the holdout",
                   description="Scores the candidate on the held-out items only, with every "
                   "figure; once per candidate, within the token's final reports.")
    def post(self, request, study_id: int):
        return super().post(request, study_id)
