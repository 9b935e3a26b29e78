"""The vector list is fused only when its head agrees with the keyword list's head."""

from kgr.config import RetrievalWeights
from kgr.retrieval.query import Candidate, RankedList, agreement, fuse


def test_heads_with_a_passage_in_common_keep_the_vector_weight():
    kw = {1: 9.0, 2: 8.0, 3: 7.0, 4: 6.0, 5: 5.0}
    vec = {9: 0.6, 8: 0.5, 7: 0.45, 6: 0.42, 5: 0.4}
    assert agreement(kw, vec, 5) == 1.0


def test_heads_with_nothing_in_common_drop_the_vector_list():
    kw = {1: 9.0, 2: 8.0, 3: 7.0, 4: 6.0, 5: 5.0}
    vec = {6: 0.5, 7: 0.49, 8: 0.48, 9: 0.47, 10: 0.46, 1: 0.1}  # 1 is on it, below its head
    assert agreement(kw, vec, 5) == 0.0
    assert agreement(kw, vec, 6) == 1.0  # a longer head reaches it


def test_no_keyword_list_or_head_zero_leaves_the_vector_list_alone():
    vec = {1: 0.5, 2: 0.4}
    assert agreement({}, vec, 5) == 1.0
    assert agreement({3: 1.0}, vec, 0) == 1.0


def _order(kw, vec, head):
    w = RetrievalWeights()
    cands = {cid: Candidate(cid) for cid in {*kw, *vec}}
    share = w.keyword_share
    vec_weight = (1 - share) * agreement(kw, vec, head)
    fuse(cands, [RankedList(share, kw), RankedList(vec_weight, vec, w.cosine_spread)], w)
    return sorted(cands, key=lambda c: (-cands[c].direct, c))


def test_a_contradicting_vector_list_does_not_displace_the_keyword_order():
    # keyword: 1 > 2 > 3 > 4 > 5; the vector head (6..10) holds none of them, 3 and 1 far below
    kw = {1: 10.0, 2: 9.8, 3: 9.7, 4: 5.9, 5: 5.8}
    vec = {6: 0.60, 7: 0.59, 8: 0.58, 9: 0.57, 10: 0.56, 3: 0.55, 2: 0.2, 1: 0.1}
    assert _order(kw, vec, 0)[:3] != [1, 2, 3]  # plain fusion lets the vector list reorder the keyword head
    assert _order(kw, vec, 5)[:5] == [1, 2, 3, 4, 5]


def test_an_agreeing_vector_list_still_reorders_the_keyword_matches():
    kw = {1: 10.0, 2: 9.9, 3: 6.0, 4: 5.9, 5: 5.8}
    vec = {2: 0.9, 6: 0.3, 7: 0.29, 8: 0.28, 9: 0.27, 1: 0.1}
    assert _order(kw, vec, 5)[0] == 2
