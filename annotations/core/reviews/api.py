"""The review REST API: a study's answers with their reviews, one answer, accept / reject /
undo, the items whose answers disagree and an item in context. For the study's reviewers
and researchers (403 for other members and strangers, 404 for answers and items of
another study). Validate → call a service or selector → serialise."""

from __future__ import annotations

from drf_spectacular.utils import OpenApiParameter, OpenApiResponse, extend_schema
from rest_framework import status
from rest_framework.response import Response
from rest_framework.views import APIView

from annotations.core.reviews import selectors
from annotations.core.reviews.serializers import (
    DisagreementOutputSerializer,
    ReviewAnswerOutputSerializer,
    ReviewAnswerPageSerializer,
    ReviewDecisionInputSerializer,
    ReviewItemContextSerializer,
    ReviewOutputSerializer,
)
from annotations.core.reviews.services import answer_rejection_undo, answer_review

LIMIT_MAX = 200
FORBIDDEN = OpenApiResponse(description="not_permitted: not a reviewer or researcher of the "
                                        "study")
UNKNOWN = OpenApiResponse(description="unknown_answer / unknown_item: not the study's")


def _int(value, default: int, top: int) -> int:
    try:
        return min(max(0, int(value)), top)
    except (TypeError, ValueError):
        return default


class ReviewAnswersApi(APIView):
    @extend_schema(
        parameters=[OpenApiParameter("state", str, enum=list(selectors.REVIEW_FILTERS),
                                     description="all (default), unreviewed, accepted, "
                                     "rejected"),
                    OpenApiParameter("limit", int), OpenApiParameter("offset", int)],
        responses={200: ReviewAnswerPageSerializer, 403: FORBIDDEN},
        operation_id="studies_review_answers_list",
        summary="A study's answers with their reviews, newest first (reviewers, researchers)")
    def get(self, request, study_id: int):
        study = selectors.review_study(user=request.user, study_id=study_id)
        state = request.query_params.get("state", "all")
        state = state if state in selectors.REVIEW_FILTERS else "all"
        limit = _int(request.query_params.get("limit"), 50, LIMIT_MAX) or 50
        offset = _int(request.query_params.get("offset"), 0, 2**31)
        answers, total = selectors.study_answers(study=study, state=state, offset=offset,
                                                 limit=limit)
        return Response(ReviewAnswerPageSerializer(
            {"count": total, "limit": limit, "offset": offset, "results": answers}).data)


class ReviewAnswerApi(APIView):
    @extend_schema(responses={200: ReviewAnswerOutputSerializer, 403: FORBIDDEN,
                              404: UNKNOWN},
                   summary="One answer with its review")
    def get(self, request, study_id: int, answer_id: int):
        study = selectors.review_study(user=request.user, study_id=study_id)
        return Response(ReviewAnswerOutputSerializer(
            selectors.study_answer(study=study, answer_id=answer_id)).data)

    @extend_schema(
        request=ReviewDecisionInputSerializer,
        responses={200: ReviewOutputSerializer, 400: OpenApiResponse(
            description="invalid_review: a rejection without a reason"), 403: FORBIDDEN,
            404: UNKNOWN},
        summary="Accept or reject an answer (a rejected answer leaves the estimates; the "
                "study is recomputed)")
    def post(self, request, study_id: int, answer_id: int):
        study = selectors.review_study(user=request.user, study_id=study_id)
        data = ReviewDecisionInputSerializer(data=request.data)
        data.is_valid(raise_exception=True)
        review = answer_review(study=study, answer_id=answer_id,
                               accept=data.validated_data["decision"] == "accept",
                               reason=data.validated_data["reason"], by=request.user)
        return Response(ReviewOutputSerializer(review).data)


class ReviewAnswerUndoApi(APIView):
    @extend_schema(
        request=None,
        responses={200: ReviewOutputSerializer, 403: FORBIDDEN, 404: UNKNOWN,
                   409: OpenApiResponse(description="nothing_to_undo: the answer is not "
                                                    "rejected")},
        summary="Undo an answer's rejection (it is back in the estimates)")
    def post(self, request, study_id: int, answer_id: int):
        study = selectors.review_study(user=request.user, study_id=study_id)
        review = answer_rejection_undo(study=study, answer_id=answer_id, by=request.user)
        return Response(ReviewOutputSerializer(review).data, status=status.HTTP_200_OK)


class ReviewDisagreementsApi(APIView):
    @extend_schema(responses={200: DisagreementOutputSerializer(many=True), 403: FORBIDDEN},
                   summary="Items whose answers disagree (several queries of an item, "
                           "several raters of a sentence, critique votes)")
    def get(self, request, study_id: int):
        study = selectors.review_study(user=request.user, study_id=study_id)
        return Response(DisagreementOutputSerializer(
            selectors.study_disagreements(study=study), many=True).data)


class ReviewItemApi(APIView):
    @extend_schema(responses={200: ReviewItemContextSerializer, 403: FORBIDDEN, 404: UNKNOWN},
                   summary="An item in context: its text and options, its answers with their "
                           "reviews, its flags")
    def get(self, request, study_id: int, item_id: int):
        study = selectors.review_study(user=request.user, study_id=study_id)
        context = selectors.item_in_context(study=study, item_id=item_id)
        return Response(ReviewItemContextSerializer(
            {"item": context.item, "answers": context.answers, "flags": context.flags}).data)
