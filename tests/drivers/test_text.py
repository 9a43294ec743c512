"""Text search (issue 20) through pymongo, with MongoDB's documentation
examples: the `articles` collection of the $text reference (terms, phrases,
negation, $language, $caseSensitive, $diacriticSensitive, textScore sort),
the `stores` collection of the text search tutorial, mongod's resolved
index spec in listIndexes, one text index per collection, compound and
wildcard text indexes, weights, language override, the TEXT_MATCH plan,
index maintenance across updates, deletes and restarts, aggregate, and
mongod's errors (27, 2, 17313, 40218, 17262...)."""

import pytest
from bson.son import SON
from pymongo import MongoClient, TEXT, ASCENDING

from atomdb_clients import fails, per_test_client
from atomdb_testlib import restart, stop_all

ARTICLES = [
    {"_id": 1, "subject": "coffee", "author": "xyz", "views": 50},
    {"_id": 2, "subject": "Coffee Shopping", "author": "efg", "views": 5},
    {"_id": 3, "subject": "Baking a cake", "author": "abc", "views": 90},
    {"_id": 4, "subject": "baking", "author": "xyz", "views": 100},
    {"_id": 5, "subject": "Café Con Leche", "author": "abc", "views": 200},
    {"_id": 6, "subject": "Сырники", "author": "jkl", "views": 80},
    {"_id": 7, "subject": "coffee and cream", "author": "efg", "views": 10},
    {"_id": 8, "subject": "Cafe con Leche", "author": "xyz", "views": 10},
]

STORES = [
    {"_id": 1, "name": "Java Hut", "description": "Coffee and cakes"},
    {"_id": 2, "name": "Burger Buns", "description": "Gourmet hamburgers"},
    {"_id": 3, "name": "Coffee Shop", "description": "Just coffee"},
    {"_id": 4, "name": "Clothes Clothes Clothes", "description": "Discount clothing"},
    {"_id": 5, "name": "Java Shopping", "description": "Indonesian goods"},
]


client = per_test_client("")


@pytest.fixture
def articles(client):
    coll = client.textdb.articles
    coll.insert_many(ARTICLES)
    coll.create_index([("subject", TEXT)])
    return coll


@pytest.fixture
def stores(client):
    coll = client.textdb.stores
    coll.insert_many(STORES)
    coll.create_index([("name", TEXT), ("description", TEXT)])
    return coll


def ids(cursor):
    return sorted(d["_id"] for d in cursor)


def search(coll, **text):
    return ids(coll.find({"$text": dict(text)}))


def test_list_indexes_shows_mongods_resolved_text_spec(articles):
    spec = [i for i in articles.list_indexes() if i["name"] == "subject_text"]
    assert len(spec) == 1, "the text index is named subject_text as mongod names it"
    s = spec[0]
    assert s["key"] == SON([("_fts", "text"), ("_ftsx", 1)]), s
    assert s["weights"] == {"subject": 1}, s
    assert s["default_language"] == "english"
    assert s["language_override"] == "language"
    assert s["textIndexVersion"] == 3


def test_search_for_a_single_word(articles):
    assert search(articles, **{"$search": "coffee"}) == [1, 2, 7]


def test_match_any_of_the_search_terms(articles):
    assert search(articles, **{"$search": "bake coffee cake"}) == [1, 2, 3, 4, 7], \
        "terms are ORed; 'bake' matches 'Baking' by its stem"


def test_search_for_a_phrase(articles):
    assert search(articles, **{"$search": "\"coffee shop\""}) == [2]


def test_exclude_documents_that_contain_a_term(articles):
    assert search(articles, **{"$search": "coffee -shop"}) == [1, 7]


def test_search_a_different_language(articles):
    assert search(articles, **{"$search": "leche", "$language": "es"}) == [5, 8]


def test_case_and_diacritic_insensitive_search(articles):
    assert search(articles, **{"$search": "сы́рники CAFÉS"}) == [5, 6, 8]


def test_case_sensitive_search_for_a_term(articles):
    assert search(articles, **{"$search": "Coffee", "$caseSensitive": True}) == [2]


def test_case_sensitive_search_for_a_phrase(articles):
    assert search(articles, **{"$search": "\"Café Con Leche\"", "$caseSensitive": True}) == [5]


def test_case_sensitivity_with_a_negated_term(articles):
    assert search(articles, **{"$search": "Coffee -shop", "$caseSensitive": True}) == [2], \
        "a case-sensitive negation 'shop' does not exclude 'Shopping'"


def test_diacritic_sensitive_search(articles):
    assert search(articles, **{"$search": "CAFÉ", "$diacriticSensitive": True}) == [5]


def test_diacritic_sensitivity_with_a_negated_term(articles):
    got = search(articles, **{"$search": "leches -cafés", "$diacriticSensitive": True})
    assert got == [8], "only the accented café is excluded"


def test_text_score_projection_and_sort(articles):
    docs = list(articles.find({"$text": {"$search": "cake"}},
                              {"score": {"$meta": "textScore"}}))
    assert [(d["_id"], d["score"]) for d in docs] == [(3, 0.75)], docs
    assert docs[0]["subject"] == "Baking a cake", "a $meta-only projection keeps the fields"
    docs = list(articles.find({"$text": {"$search": "coffee"}},
                              {"subject": 1, "score": {"$meta": "textScore"}})
                .sort([("score", {"$meta": "textScore"})]))
    assert docs[0]["_id"] == 1 and docs[0]["score"] == 1.0, "the one-word subject scores highest"
    assert sorted(d["score"] for d in docs[1:]) == [0.75, 0.75]
    assert set(docs[0]) == {"_id", "subject", "score"}


def test_stores_tutorial_search_and_relevance(stores):
    assert search(stores, **{"$search": "java coffee shop"}) == [1, 3, 5]
    assert search(stores, **{"$search": "java \"coffee shop\""}) == [3]
    assert search(stores, **{"$search": "java shop -coffee"}) == [5]
    docs = list(stores.find({"$text": {"$search": "java coffee shop"}},
                            {"score": {"$meta": "textScore"}})
                .sort([("score", {"$meta": "textScore"})]))
    assert docs[0]["_id"] == 3, "Coffee Shop / Just coffee is the most relevant"
    scores = [d["score"] for d in docs]
    assert scores == sorted(scores, reverse=True)


def test_aggregate_match_sort_and_project_by_text_score(stores):
    out = list(stores.aggregate([
        {"$match": {"$text": {"$search": "coffee"}}},
        {"$sort": {"score": {"$meta": "textScore"}}},
        {"$project": {"name": 1, "score": {"$meta": "textScore"}}},
    ]))
    assert [(d["_id"], d["score"]) for d in out] == [(3, 1.5), (1, 0.75)], \
        "Coffee Shop / Just coffee: 0.75 per field; Coffee and cakes: 0.75"
    assert all(set(d) == {"_id", "name", "score"} for d in out)
    out = list(stores.aggregate([
        {"$match": {"$text": {"$search": "coffee"}}},
        {"$addFields": {"s": {"$meta": "textScore"}}},
        {"$match": {"s": {"$gt": 1}}},
    ]))
    assert [d["_id"] for d in out] == [3], "only Coffee Shop / Just coffee scores above 1"


def test_aggregate_text_errors(stores):
    db = stores.database
    fails(17313, lambda: list(stores.aggregate([{"$match": {}},
                                                {"$match": {"$text": {"$search": "x"}}}])),
          "$text only in the first $match")
    fails(40218, lambda: list(stores.aggregate([{"$sort": {"s": {"$meta": "textScore"}}}])),
          "textScore without $text")
    fails(238, lambda: list(stores.aggregate([
        {"$match": {"$text": {"$search": "coffee"}}}, {"$project": {"name": 1}},
        {"$addFields": {"s": {"$meta": "textScore"}}}])),
        "textScore after a reshaping stage is refused, not answered wrong")
    assert db is not None


def test_explain_shows_text_match(articles):
    plan = articles.database.command(SON([
        ("explain", SON([("find", "articles"),
                         ("filter", {"$text": {"$search": "coffee -shop \"and cream\""}})])),
        ("verbosity", "queryPlanner")]))["queryPlanner"]["winningPlan"]
    assert plan["stage"] == "TEXT_MATCH", plan
    assert plan["indexName"] == "subject_text"
    assert plan["parsedTextQuery"] == {"terms": ["coffe", "cream"], "negatedTerms": ["shop"],
                                       "phrases": ["and cream"], "negatedPhrases": []}, plan
    assert plan["inputStage"]["inputStage"]["stage"] == "IXSCAN"


def test_errors_as_mongod(articles, client):
    db = articles.database
    db.plain.insert_one({"a": "coffee"})
    fails(27, lambda: list(db.plain.find({"$text": {"$search": "coffee"}})),
          "no text index")
    fails(2, lambda: db.command(SON([("find", "articles"),
                                     ("filter", {"$text": {"$search": "x", "$language": "xx"}})])),
          "unsupported language")
    fails(40218, lambda: list(articles.find({}, {"s": {"$meta": "textScore"}})),
          "textScore without $text")
    fails(17308, lambda: list(articles.find({}, {"s": {"$meta": "bogus"}})),
          "unknown $meta")
    fails(14, lambda: list(articles.find({"$text": {"$search": 5}})), "$search not a string")
    fails(2, lambda: list(articles.find({"$text": {"$search": "x", "$foo": 1}})),
          "extra fields in $text")
    fails(238, lambda: list(articles.find({"$or": [{"$text": {"$search": "x"}}, {"_id": 1}]})),
          "$text below the top level is refused by name")
    assert ids(articles.find({"$and": [{"$text": {"$search": "coffee"}}, {"views": {"$gt": 5}}]})) \
        == [1, 7], "$text inside a top-level $and is ANDed with the filter, as in mongod"


def test_one_text_index_per_collection(articles):
    fails(85, lambda: articles.create_index([("author", TEXT)]),
          "a second text index with the same key pattern")
    fails(67, lambda: articles.create_index([("views", ASCENDING), ("author", TEXT)]),
          "a second text index with another key pattern")
    # the same index again is not an error (an ODM syncing its indexes)
    assert articles.create_index([("subject", TEXT)]) == "subject_text"


def test_odm_style_index_sync_then_find(client):
    """An ODM declares its indexes at start-up with createIndexes, then queries."""
    db = client.odm
    reply = db.command(SON([("createIndexes", "posts"), ("indexes", [
        {"key": {"title": "text", "body": "text"}, "name": "search",
         "weights": {"title": 10, "body": 2}, "default_language": "english"},
        {"key": {"created": -1}, "name": "created_-1"},
    ])]))
    assert reply["ok"] == 1 and reply["numIndexesAfter"] == 3, reply
    # syncing again: nothing changes
    again = db.command(SON([("createIndexes", "posts"), ("indexes", [
        {"key": {"title": "text", "body": "text"}, "name": "search",
         "weights": {"title": 10, "body": 2}, "default_language": "english"}])]))
    assert again["ok"] == 1 and again["numIndexesAfter"] == 3, again
    db.posts.insert_many([
        {"_id": 1, "title": "Brewing coffee", "body": "water and beans", "created": 1},
        {"_id": 2, "title": "Tea", "body": "coffee is mentioned here", "created": 2},
        {"_id": 3, "title": "Nothing", "body": "unrelated", "created": 3},
    ])
    docs = list(db.posts.find({"$text": {"$search": "coffee"}}, {"s": {"$meta": "textScore"}})
                .sort([("s", {"$meta": "textScore"})]))
    assert [d["_id"] for d in docs] == [1, 2], "the title weight (10) beats the body's (2)"
    assert docs[0]["s"] == 7.5 and docs[1]["s"] == 1.5, docs  # 10 x 0.75; 2 x 0.75
    spec = [i for i in db.posts.list_indexes() if i["name"] == "search"][0]
    assert spec["weights"] == {"body": 2, "title": 10}


def test_compound_text_index_needs_the_prefix_equality(client):
    coll = client.textdb.inventory
    coll.create_index([("dept", ASCENDING), ("description", TEXT)])
    coll.insert_many([
        {"_id": 1, "dept": "tech", "description": "lime green computer"},
        {"_id": 2, "dept": "tech", "description": "wireless green mouse"},
        {"_id": 3, "dept": "kitchen", "description": "green placemat"},
    ])
    assert ids(coll.find({"dept": "tech", "$text": {"$search": "green"}})) == [1, 2]
    assert ids(coll.find({"dept": "kitchen", "$text": {"$search": "green"}})) == [3]
    fails(2, lambda: list(coll.find({"$text": {"$search": "green"}})),
          "no equality on the prefix field")
    spec = [i for i in coll.list_indexes() if i["name"] == "dept_1_description_text"][0]
    assert spec["key"] == SON([("dept", 1), ("_fts", "text"), ("_ftsx", 1)])


def test_wildcard_text_index_and_language_override(client):
    coll = client.textdb.quotes
    coll.create_index([("$**", TEXT)], name="all_text")
    coll.insert_many([
        {"_id": 1, "language": "portuguese", "original": "A sorte protege os audazes.",
         "translation": [{"language": "english", "quote": "Fortune favors the bold."},
                         {"language": "spanish", "quote": "La suerte protege a los audaces."}]},
        {"_id": 2, "language": "spanish", "original": "Nada hay más surrealista que la realidad.",
         "translation": [{"language": "english", "quote": "There is nothing more surreal than reality."}]},
        {"_id": 3, "original": "is this a dagger which I see before me.",
         "translation": {"language": "spanish", "quote": "Es este un puñal que veo delante de mí."}},
    ])
    assert search(coll, **{"$search": "reality"}) == [2]
    assert search(coll, **{"$search": "dagger"}) == [3]
    assert search(coll, **{"$search": "puñal"}) == [3]
    fails(17262, lambda: coll.insert_one({"_id": 9, "language": "klingon", "q": "x"}),
          "a document's unsupported language override")
    assert coll.count_documents({"_id": 9}) == 0, "nothing was written"


def test_index_follows_updates_and_deletes(articles):
    articles.update_one({"_id": 3}, {"$set": {"subject": "tea time"}})
    assert search(articles, **{"$search": "tea"}) == [3]
    assert search(articles, **{"$search": "cake"}) == []
    articles.delete_one({"_id": 1})
    assert search(articles, **{"$search": "coffee"}) == [2, 7]
    assert articles.count_documents({"$text": {"$search": "coffee"}}) == 2
    r = articles.delete_many({"$text": {"$search": "coffee"}})
    assert r.deleted_count == 2
    assert search(articles, **{"$search": "coffee"}) == []


@pytest.mark.parametrize("kill", [False, True])
def test_text_index_survives_restart(atomdb, kill):
    c = MongoClient(atomdb.uri(), serverSelectionTimeoutMS=10000)
    c.textdb.articles.insert_many(ARTICLES)
    c.textdb.articles.create_index([("subject", TEXT)], default_language="spanish")
    c.textdb.articles.insert_one({"_id": 9, "subject": "canciones de café"})
    c.close()
    server = restart(atomdb, kill=kill)
    try:
        c = MongoClient(server.uri(), serverSelectionTimeoutMS=10000)
        coll = c.textdb.articles
        spec = [i for i in coll.list_indexes() if i["name"] == "subject_text"][0]
        assert spec["default_language"] == "spanish"
        assert search(coll, **{"$search": "canción"}) == [9], "rebuilt with the Spanish stemmer"
        assert search(coll, **{"$search": "leche"}) == [5, 8]
        c.close()
    finally:
        stop_all([server])


def test_text_score_in_later_batches_and_large_sorts(client):
    """The cursor's later batches still compute textScore (the projection
    keeps the query alive), and a sort by score orders hundreds of matches."""
    coll = client.textdb.many
    coll.create_index([("t", TEXT)])
    coll.insert_many([{"_id": i, "t": " ".join(["coffee"] * (1 + i % 5) + ["tea"] * (i % 7))}
                      for i in range(300)])
    cur = coll.find({"$text": {"$search": "coffee"}}, {"s": {"$meta": "textScore"}}) \
        .sort([("s", {"$meta": "textScore"})]).batch_size(7)
    docs = list(cur)
    assert len(docs) == 300
    scores = [d["s"] for d in docs]
    assert all(isinstance(s, float) and s > 0 for s in scores), "every batch has its scores"
    assert scores == sorted(scores, reverse=True), "highest score first"
    # "coffee" five times alone: 1 + 1/2 + 1/4 + 1/8 + 1/16, coefficient 1
    assert docs[0]["s"] == 1.9375 and docs[0]["t"] == " ".join(["coffee"] * 5), docs[0]
