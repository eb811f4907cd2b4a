"""The analyser shared by indexing and query terms (`recallql.index.analysis`, analyser 4):
Unicode normalisation, the zero width space as a word break, the stopword list, long tokens,
CJK and Thai runs, emoji, each through
a real tantivy index; the analyser version, BM25 statistics after deletes, reindex and
optimize are in `test_index_reindex.py`."""

from __future__ import annotations

import hashlib
import uuid

import pytest
import tantivy
from hypothesis import given
from hypothesis import strategies as st

import recallql
from recallql.index import analysis
from recallql.index.analysis import (
    MAX_TOKEN_CHARS,
    STOPWORDS,
    analyze,
    normalize,
    prepare,
    shown,
)
from recallql.index.embedders import HashEmbedder


@pytest.mark.parametrize(
    ("text", "terms"),
    [
        ("Backup retention policies", ["backup", "retent", "polici"]),
        ("C++", ["c"]),
        ("it's", []),  # "it" and the clitic "s" are stopwords
        ("{0}", ["0"]),
        ("a:b", ["b"]),
        ("OR", []),
        ("-v", ["v"]),
        ("session_id:s2", ["session", "id", "s2"]),
        ('36"', ["36"]),
        ("", []),
        ("the and of", []),
        ("x" * 41 + " kept", ["x" * 41, "kept"]),
    ],
    ids=["spec", "cpp", "apostrophe", "braces", "colon", "or-stopword", "dash", "field-syntax",
         "inch", "empty", "stopwords", "long-kept"],
)
def test_analyze(text, terms):
    assert analyze(text) == terms


def test_snapshot_analyze_is_the_index_analyser(index_db, index_docs):
    index_db.ingest("docs", index_docs)
    snap = index_db.snapshot("docs")
    assert snap.analyze("Backup retention policies") == ["backup", "retent", "polici"]
    rows, _ = snap.lexical_topn(snap.analyze("RETAINED backups"), 5)
    assert [snap.ids[r] for r in rows][:2] == ["backup-1", "backup-2"]


# -- stopwords ------------------------------------------------------------------------------------

QUESTION_WORDS = ["what", "which", "who", "whom", "when", "where", "why", "how", "do", "does",
                  "did", "is", "are", "was", "were", "have", "has", "had", "am", "be", "been"]


def test_question_words_are_stopwords():
    assert analyze("When did Caroline go to the LGBTQ support group?") == [
        "carolin", "go", "lgbtq", "support", "group"]
    assert [w for w in QUESTION_WORDS if analyze(w)] == []


def test_homonyms_the_snowball_list_leaves_out_stay_terms():
    # "a WILL", "old tin CAN", "merry month of MAY", "US" (Snowball's stop.txt comments)
    assert [analyze(w) for w in ["will", "can", "may", "must", "might", "us", "won", "haven"]] \
        == [["will"], ["can"], ["may"], ["must"], ["might"], ["us"], ["won"], ["haven"]]


def test_every_stopword_is_dropped_and_the_list_is_snowballs():
    assert len(STOPWORDS) == 144  # 124 words of stop.txt + 20 fragments of its compounds
    assert all(analyze(word) == [] for word in STOPWORDS)
    assert analyze(" ".join(sorted(STOPWORDS)) + " backup") == ["backup"]


# -- Unicode --------------------------------------------------------------------------------------

@pytest.mark.parametrize(
    ("stored", "query"),
    [("Café au lait", "cafe\u0301"),                    # NFC text, NFD query
     ("cafe\u0301 au lait", "CAFÉ"),                    # NFD text, NFC upper-case query
     ("ＲＥＣＡＬＬＱＬ release", "recallql"),           # full-width Latin
     ("the ﬁle system", "file"),                        # ligature
     ("Straße", "STRASSE"),                             # ß case-folds to ss
     ("in\u00adformation retrieval", "information"),    # soft hyphen inside a word
     ("ΣΟΦΙΑ", "σοφια"),                                # Greek, final sigma
     ("Ångström units", "A\u030angstro\u0308m")],       # NFD query for a precomposed text
    ids=["nfd-query", "nfd-text", "fullwidth", "ligature", "sharp-s", "soft-hyphen", "greek",
         "angstrom"])
def test_normal_forms_match(stored, query):
    assert analyze(stored)[0] == analyze(query)[0]
    with recallql.connect(embedder=HashEmbedder(8)) as db:
        db.ingest("docs", [{"id": "hit", "title": stored}, {"id": "miss", "title": "other"}])
        rows = db.execute("SEARCH docs MATCHING :q USING LEXICAL", q=query).ids()
    assert rows == ["hit"]


def test_normalize_is_nfkc_casefold_without_ignorables():
    assert normalize("ＡＢＣ ﬁ Straße") == "abc fi strasse"
    assert normalize("zero\u2060width\ufeff") == "zerowidth"
    assert normalize("Plain ASCII") == "plain ascii"


# -- analyser 4: the zero width space is a word break ---------------------------------------------

@pytest.mark.parametrize(
    ("version", "normal", "terms"),
    [(3, "foobar", ["foobar"]), (4, "foo bar", ["foo", "bar"])],
    ids=["analyser-3", "analyser-4"])
def test_a_zero_width_space_breaks_a_word_from_analyser_4(version, normal, terms):
    assert normalize("foo\u200bbar", version) == normal
    assert analyze("foo\u200bbar", version) == terms


@pytest.mark.parametrize(
    "char",
    ["\u200c", "\u200d", "\u2060", "\ufeff", "\u00ad", "\u200e", "\u180e", "\ufe0f"],
    ids=["zwnj", "zwj", "word-joiner", "bom", "soft-hyphen", "lrm", "mongolian-vowel-separator",
         "vs16"])
def test_the_other_default_ignorables_still_join_a_word(char):
    """UAX #29 gives them Word_Break Extend, ZWJ or Format (rule WB4 skips them): removed in
    analyser 4 as in 3."""
    assert analyze(f"foo{char}bar") == analyze(f"foo{char}bar", 3) == ["foobar"]


def test_the_zero_width_space_is_the_only_assigned_ignorable_that_breaks_a_word():
    """Against the Unicode tables of the regex crate tantivy's tokenizer is built on: every
    other assigned default-ignorable code point is Word_Break Format, Extend or ZWJ (skipped
    by UAX #29 rule WB4) or ALetter (the Hangul fillers)."""
    def matcher(pattern: str):
        built = tantivy.TextAnalyzerBuilder(tantivy.Tokenizer.regex(pattern)).build()
        return lambda char: bool(built.analyze(char))
    assigned = matcher(r"\p{Assigned}")
    joins = matcher(r"[\p{Word_Break=Format}\p{Word_Break=Extend}\p{Word_Break=ZWJ}"
                    r"\p{Word_Break=ALetter}]")
    breaks = [code for code in analysis._IGNORABLE
              if assigned(chr(code)) and not joins(chr(code))]
    assert breaks == [0x200B]


def test_a_zero_width_space_ends_a_thai_run_so_no_bigram_spans_two_words():
    # ฉัน|กิน|ข้าว "I eat rice", the words separated by zero width spaces
    sentence = "ฉัน\u200bกิน\u200bข้าว"
    assert analyze(sentence, 3) == ["ฉัน", "นกิ", "กิน", "นข้", "ข้า", "าว"]
    assert analyze(sentence) == ["ฉัน", "กิน", "ข้า", "าว"]  # nกิ, นข้ spanned two words
    assert analyze(sentence) == analyze("ฉัน กิน ข้าว")  # as if written with spaces
    assert analyze("数据\u200b库") == ["数据", "库"]  # a CJK run ends there too


def test_a_word_after_a_zero_width_space_is_found_and_its_neighbour_not_spanned():
    with recallql.connect(embedder=HashEmbedder(8)) as db:
        db.ingest("docs", [{"id": "zwsp", "title": "ฐาน\u200bข้อมูล foo\u200bbar"},
                           {"id": "joined", "title": "ฐานข้อมูล foobar"}])
        def lexical(q: str) -> list[str]:
            return db.execute("SEARCH docs MATCHING :q USING LEXICAL", q=q).ids()
        assert lexical("bar") == ["zwsp"]
        assert lexical("foobar") == ["joined"]
        assert lexical("นข้") == ["joined"]  # the bigram across the zero width space
        assert sorted(lexical("ข้อมูล")) == ["joined", "zwsp"]


def test_annotation_keywords_in_another_normal_form_match():
    with recallql.connect(embedder=HashEmbedder(8), clock=lambda: 1.7e9) as db:
        db.ingest("docs", [{"id": "menu", "title": "menu", "tags": ["CAFÉ"]},
                           {"id": "plain", "title": "menu"}])
        db.sessions.create("s", agent_id="a")
        db.sessions.annotate("s", "cafe\u0301")  # NFD, lower case
        rows = db.execute("SEARCH docs MATCHING 'menu' FOR SESSION 's'").rows
    reasons = {r.id: {e.code: e.detail for e in r.reasons} for r in rows}
    assert reasons["menu"]["SESSION_KEYWORDS"] == "1/1"
    assert reasons["plain"]["SESSION_KEYWORDS"] == "0/1"


def test_a_zero_width_space_splits_annotation_keywords():
    with recallql.connect(embedder=HashEmbedder(8), clock=lambda: 1.7e9) as db:
        db.ingest("docs", [{"id": "data", "title": "menu", "tags": ["ข้อมูล"]},
                           {"id": "plain", "title": "menu"}])
        db.sessions.create("s", agent_id="a")
        db.sessions.annotate("s", "ฐาน\u200bข้อมูล")  # two keywords: ฐาน, ข้อมูล
        rows = db.execute("SEARCH docs MATCHING 'menu' FOR SESSION 's'").rows
    reasons = {r.id: {e.code: e.detail for e in r.reasons} for r in rows}
    assert reasons["data"]["SESSION_KEYWORDS"] == "1/2"
    assert reasons["plain"]["SESSION_KEYWORDS"] == "0/2"


# -- long tokens and CJK runs ---------------------------------------------------------------------

SHA1 = hashlib.sha1(b"recallql").hexdigest()
SHA256 = hashlib.sha256(b"recallql").hexdigest()
UUID = uuid.UUID(int=0x0123456789ABCDEF0123456789ABCDEF).hex
LONG_WORDS = {
    "git-sha": SHA1,                                                     # 40 bytes
    "sha-256": SHA256,                                                   # 64 bytes
    "uuid-hex": UUID,                                                    # 32 bytes
    "german": "Donaudampfschifffahrtsgesellschaftskapitänsmützenabzeichen",  # 59 bytes
    "russian": "превысокомногорассмотрительствующий",                  # 70 bytes
    "hindi": "अन्तर्राष्ट्रीयकरणविशेषज्ञता",                          # 87 bytes, with marks
}


@pytest.mark.parametrize("word", list(LONG_WORDS.values()), ids=list(LONG_WORDS))
def test_long_tokens_are_whole_terms_and_findable(word):
    assert len(word.encode()) >= 32
    assert len(analyze(f"see {word} now")) == 3  # one term, not dropped, not cut
    with recallql.connect(embedder=HashEmbedder(8)) as db:
        db.ingest("docs", [{"id": "hit", "title": f"fixed in {word}"},
                           {"id": "miss", "title": "fixed in main"}])
        assert db.execute("SEARCH docs MATCHING :q USING LEXICAL", q=word).ids() == ["hit"]


def test_a_token_over_the_limit_is_split_not_dropped():
    token = "ab" * 300  # 600 characters
    pieces = analyze(token)
    assert [len(p) for p in pieces] == [MAX_TOKEN_CHARS, MAX_TOKEN_CHARS, 90]
    assert "".join(pieces) == token
    with recallql.connect(embedder=HashEmbedder(8)) as db:
        db.ingest("docs", [{"id": "hit", "title": f"blob {token}"}, {"id": "miss", "title": "x"}])
        assert db.execute("SEARCH docs MATCHING :q USING LEXICAL", q=token).ids() == ["hit"]


def test_cjk_runs_become_bigrams_so_words_inside_are_findable():
    run = "分布式数据库系统的查询优化与索引结构研究"  # 20 characters, 60 bytes
    assert analyze("数据库") == ["数据", "据库"]
    assert analyze("库") == ["库"]
    assert len(analyze(run)) == len(run) - 1
    assert prepare("Tokyoタワー") == "tokyo タワ ワー "
    with recallql.connect(embedder=HashEmbedder(8)) as db:
        db.ingest("docs", [{"id": "hit", "title": run}, {"id": "miss", "title": "文档"}])
        assert db.execute("SEARCH docs MATCHING :q USING LEXICAL", q=run).ids()[0] == "hit"
        assert db.execute("SEARCH docs MATCHING '数据库' USING LEXICAL").ids() == ["hit"]
        assert db.execute("SEARCH docs MATCHING '索引' USING LEXICAL").ids() == ["hit"]


# -- analyser 3: Turkish i, emoji, scripts written without spaces ---------------------------------

@pytest.mark.parametrize(
    ("stored", "query"),
    [("İstanbul office", "istanbul"),        # dotted capital İ case-folds to i + U+0307
     ("İstanbul office", "ISTANBUL"),
     ("istanbul office", "İSTANBUL"),
     ("KIRMIZI kalem", "kırmızı"),           # dotless ı
     ("ıstakoz", "ISTAKOZ")],
    ids=["dotted-capital", "dotted-vs-upper", "upper-dotted-query", "dotless-query",
         "dotless-text"])
def test_turkish_dotted_and_dotless_i_match_plain_i(stored, query):
    assert analyze(stored)[0] == analyze(query)[0]
    with recallql.connect(embedder=HashEmbedder(8)) as db:
        db.ingest("docs", [{"id": "hit", "title": stored}, {"id": "miss", "title": "other"}])
        assert db.execute("SEARCH docs MATCHING :q USING LEXICAL", q=query).ids() == ["hit"]


def test_turkish_i_in_annotation_keywords_matches_metadata():
    with recallql.connect(embedder=HashEmbedder(8), clock=lambda: 1.7e9) as db:
        db.ingest("docs", [{"id": "tr", "title": "ofis", "tags": ["İZMİR"]},
                           {"id": "plain", "title": "ofis"}])
        db.sessions.create("s", agent_id="a")
        db.sessions.annotate("s", "izmir")
        rows = db.execute("SEARCH docs MATCHING 'ofis' FOR SESSION 's'").rows
    reasons = {r.id: {e.code: e.detail for e in r.reasons} for r in rows}
    assert reasons["tr"]["SESSION_KEYWORDS"] == "1/1"


@pytest.mark.parametrize(
    ("stored", "query"),
    [("release party 🎉 tonight", "🎉"),
     ("on call 👩\u200d💻 rota", "👩\u200d💻"),       # a ZWJ sequence
     ("looks good 👍🏽", "👍"),                      # a skin-tone modifier is not a term
     ("trip to 🇯🇵 in May", "🇯🇵")],                 # a flag: two regional indicators
    ids=["emoji", "zwj-sequence", "skin-tone", "flag"])
def test_emoji_are_terms(stored, query):
    assert analyze(query)
    with recallql.connect(embedder=HashEmbedder(8)) as db:
        db.ingest("docs", [{"id": "hit", "title": stored}, {"id": "miss", "title": "party 🎈"}])
        assert db.execute("SEARCH docs MATCHING :q USING LEXICAL", q=query).ids() == ["hit"]


@pytest.mark.parametrize(
    ("stored", "query"),
    [("ฐานข้อมูลสำรองข้อมูลทุกวัน", "ข้อมูล"),          # Thai: "data" inside a run
     ("ພາສາລາວງ່າຍ", "ລາວ"),                          # Lao
     ("ភាសាខ្មែរស្រួល", "ខ្មែរ"),                      # Khmer
     ("မြန်မာစာအုပ်", "စာအုပ်")],                       # Myanmar
    ids=["thai", "lao", "khmer", "myanmar"])
def test_words_inside_runs_of_scripts_without_spaces_are_findable(stored, query):
    with recallql.connect(embedder=HashEmbedder(8)) as db:
        db.ingest("docs", [{"id": "hit", "title": stored}, {"id": "miss", "title": "other"}])
        assert db.execute("SEARCH docs MATCHING :q USING LEXICAL", q=query).ids() == ["hit"]


def test_thai_runs_become_bigrams_of_characters_with_their_marks():
    # ข้ อ มู ล: a vowel or tone mark stays with its consonant
    assert analyze("ข้อมูล") == ["ข้อ", "อมู", "มูล"]
    assert analyze("ก") == ["ก"]


def test_analyser_2_collections_keep_analyser_2():
    assert analyze("İstanbul 🎉 ข้อมูล", version=2) == ["i\u0307stanbul", "ข้อมูล"]


def test_describe_names_the_zero_width_space_from_analyser_4():
    assert "zero width space" in analysis.describe(4)
    assert "zero width space" not in analysis.describe(3)
    assert analysis.describe(analysis.CURRENT_VERSION).startswith("analyser 4: ")


# -- versions, addresses, e-mail: the whole token and its parts (preserve_original) ---------------

@pytest.mark.parametrize(
    ("text", "terms"),
    [("v1.2.3", ["v1.2.3", "v1", "2", "3"]),
     ("10.0.0.1", ["10.0.0.1", "10", "0", "0", "1"]),
     ("pi is 3.14159.", ["pi", "3.14159", "3", "14159"]),
     ("bob.smith@example.com", ["bob.smith@example.com", "bob", "smith", "exampl", "com"])],
    ids=["version", "ipv4", "decimal", "email"])
def test_dotted_numbers_and_emails_are_a_term_besides_their_parts(text, terms):
    assert [shown(term) for term in analyze(text)] == terms
    assert [t for t in analyze(text) if t != shown(t)]  # the whole term's separators are marks


@pytest.mark.parametrize(
    ("exact", "other", "query"),
    [("fixed in v1.2.3", "fixed in v1.3.2", "v1.2.3"),
     ("pi is 3.14159", "pi is 14159.3", "3.14159"),
     ("write to bob.smith@example.com", "bob smith wrote about example.com",
      "bob.smith@example.com")],
    ids=["version", "decimal", "email"])
def test_the_exact_version_or_address_ranks_above_the_same_parts_in_another_order(exact, other,
                                                                                  query):
    with recallql.connect(embedder=HashEmbedder(8)) as db:
        db.ingest("docs", [{"id": "exact", "title": exact}, {"id": "other", "title": other}])
        rows = db.execute("SEARCH docs MATCHING :q USING LEXICAL", q=query).rows
    assert [r.id for r in rows] == ["exact", "other"]  # the parts still match
    assert rows[0].score > rows[1].score


def test_explain_shows_a_version_term_with_its_dots():
    with recallql.connect(embedder=HashEmbedder(8)) as db:
        db.ingest("docs", [{"id": "a", "title": "fixed in v1.2.3"}])
        plan = db.explain("SEARCH docs MATCHING 'v1.2.3' USING LEXICAL").to_text()
    assert "terms=[v1.2.3, v1, 2, 3]" in plan


@pytest.mark.parametrize("text", [" " * 300, "\n" * 256 + "\t", "\u3000" * 400, "\xa0 " * 200])
def test_a_long_text_of_whitespace_only_has_no_terms_and_no_error(text):
    """It raised ValueError (``max()`` of no chunks), so such a body could not be ingested and
    such a MATCHING text failed with a raw traceback."""
    assert analysis.analyze(text) == []


def test_whitespace_only_bodies_ingest_and_search(tmp_path):
    import numpy as np

    import recallql

    with recallql.connect(tmp_path / "db", embedder=None) as db:
        db.ingest("docs", [{"id": "blank", "body": " " * 300, "vector": np.ones(384, np.float32)},
                           {"id": "word", "body": " " * 300 + "backups",
                            "vector": np.ones(384, np.float32)}])
        assert [r.id for r in db.execute("SEARCH docs MATCHING 'backups' USING LEXICAL").rows
                ] == ["word"]
        assert db.execute("SEARCH docs MATCHING :q USING LEXICAL", q=" " * 300).rows == []


@given(st.lists(st.tuples(st.integers(0, 400), st.sampled_from(" \n\t\u3000\xa0\u2028")),
                max_size=6).map(lambda runs: "".join(("aé数-" * 100)[:n] + sep
                                                      for n, sep in runs)))
def test_the_long_chunk_check_equals_measuring_every_chunk(text):
    assert analysis._has_long_chunk(text) == (
        max(map(len, text.split()), default=0) > analysis.MAX_TOKEN_CHARS)
